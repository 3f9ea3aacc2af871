"""Copies between a strided tile of an operand and a contiguous tile buffer (the DISCARD
tails and the fused drivers' tile buffers). Unit-stride rows copy through views, which
LLVM vectorizes (a slice assignment is 1.6x slower). Transposed tiles (unit stride along
the tile's rows on one side, along its columns on the other) move 8x8 blocks through
registers (:mod:`.block_transpose`), the rest of the tile item by item."""
import numpy as np

from .block_transpose import can_transpose8, transpose8
from .callee import callee
from .prefetch import LINE_BYTES as PREFETCH_LINE, prefetch, prefetch_span
from .readonly_view import readonly


@callee(cache=True)
def transpose_tile(src, sb, ss, dst, db, ds, v0, v1, ahead, dst_ahead):
    """``dst[db + r*ds + c] = src[sb + c*ss + r]`` for r < v0, c < v1: 8x8 blocks in
    registers, the ragged edges (and item types the block transpose does not take) by item.

    ``ahead`` > 0: while the blocks of source rows c..c+7 move, prefetch the same part of
    source rows c+ahead..c+ahead+7, which the next tile of a row-major table reads (its
    columns are the next source rows). The hardware prefetcher does not follow 8 rows of
    one tile's width each. Measured on a 3187 x 9431 float32 a.T, 64x64 tiles, 2 threads:
    a tile loop alone 13.7 -> 13.2 ms (best of blocks 12.3 -> 11.8); the drivers, old and
    new builds alternating: copy 15.9 -> 15.0 ms, a.T + b 27.1 -> 24.5. 0 when the source
    is a tile buffer, or the next tile is not the one to the right.

    ``dst_ahead`` > 0: likewise the destination rows' ``v1`` elements ``dst_ahead`` further
    on, which the next tile writes (each store to a line not in cache reads it first), a
    few rows before each column block. 0 when the destination is a tile buffer."""
    r8 = v0 - v0 % 8 if can_transpose8(src, dst) else 0
    c8 = v1 - v1 % 8 if r8 > 0 else 0
    line = PREFETCH_LINE // src.itemsize
    # the destination rows whose next-tile part each column block prefetches
    per = (v0 + c8 // 8 - 1) // (c8 // 8) if dst_ahead > 0 and c8 > 0 else 0
    for c in range(0, c8, 8):
        if ahead > 0:
            for q in range(c + ahead, c + ahead + 8):
                for r in range(0, v0, line):
                    prefetch(src, sb + q * ss + r)
        for q in range((c // 8) * per, min(v0, (c // 8 + 1) * per)):
            prefetch_span(dst, db + q * ds + dst_ahead, v1)
        for r in range(0, r8, 8):
            transpose8(src, sb + c * ss + r, ss, dst, db + r * ds + c, ds)
    for c in range(v1):
        r_start = r8 if c < c8 else 0
        s = sb + c * ss
        for r in range(r_start, v0):
            dst[db + r * ds + c] = src[s + r]


@callee(cache=True)
def gather_tile(x, xb, xsm, xsn, v0, v1, buf, pitch, ahead):
    """Copy the valid v0 x v1 region of a strided tile into ``buf`` (row pitch ``pitch``),
    walking the source along its smaller stride (a blocked transpose for transposed reads,
    which prefetches ``ahead`` columns on: the tile width when the caller's next tile is the
    one to the right, 0 when it is not, as for blocks of whole rows; see transpose_tile)."""
    if xsn == 1:
        for r in range(v0):
            d = buf[r * pitch:r * pitch + v1]        # (views and a loop: a slice assignment
            sv = x[xb + r * xsm:xb + r * xsm + v1]   # is 1.6x slower)
            for c in range(v1):
                d[c] = sv[c]
    elif xsm == 1:
        transpose_tile(x, xb, xsn, buf, np.int64(0), pitch, v0, v1, ahead, np.int64(0))
    elif abs(xsm) < abs(xsn):
        for c in range(v1):
            src = xb + c * xsn
            for r in range(v0):
                buf[r * pitch + c] = x[src + r * xsm]
    else:
        for r in range(v0):
            src = xb + r * xsm
            for c in range(v1):
                buf[r * pitch + c] = x[src + c * xsn]


@callee(cache=True)
def scatter_tile(o, ob, osm, osn, v0, v1, buf, pitch, pf):
    """Write the valid region of ``buf`` to a strided output tile (the inverse of gather).
    ``pf`` > 0 (unit-stride output rows only): each row first prefetches its ``v1``
    elements ``pf`` further on, which the next tile to the right writes (see
    ``transpose_tile``'s ``dst_ahead``); in a loop of its own, so the plain rows keep theirs."""
    if osn == 1 and pf > 0:
        for r in range(v0):
            prefetch_span(o, ob + r * osm + pf, v1)
            d = o[ob + r * osm:ob + r * osm + v1]
            sv = buf[r * pitch:r * pitch + v1]
            for c in range(v1):
                d[c] = sv[c]
    elif osn == 1:
        for r in range(v0):
            d = o[ob + r * osm:ob + r * osm + v1]
            sv = buf[r * pitch:r * pitch + v1]
            for c in range(v1):
                d[c] = sv[c]
    elif osm == 1:
        # (the tile typed read-only like the operands: one compiled transpose_tile)
        transpose_tile(readonly(buf), np.int64(0), pitch, o, ob, osn, v1, v0, np.int64(0),
                       np.int64(0))
    elif abs(osm) < abs(osn):
        for c in range(v1):
            dst = ob + c * osn
            for r in range(v0):
                o[dst + r * osm] = buf[r * pitch + c]
    else:
        for r in range(v0):
            dst = ob + r * osm
            for c in range(v1):
                o[dst + c * osn] = buf[r * pitch + c]
