"""An elementwise chain run block by block, each block stored with streaming stores.

For an output larger than the last-level cache (the fused control block's F_STREAM), the
step interpreter's way (the first step writes the output tile, the later steps run over
it in place) reads every output line before writing it, and runs each later step over a
tile that has left L1. Here a tile whose rows follow each other in x and in the output
is cut into blocks of ``BLOCK_BYTES``: the first step reads x into an L1 block buffer,
every later step runs on that buffer, and the block's whole output lines are written
with streaming stores (``cpu.streaming``); the next block of x (and of a side laid out as
the tile) is prefetched while a block computes. Measured on 3e7 float32 elements, 2
threads, both ways in one process (interpreter / blocks, four runs): add a bias row, relu,
multiply by 2: 1.06-1.27x; the same then exp: 0.98-1.12x; bias, relu, add a residual:
0.96-1.03x; an eight-step compute-bound chain: 0.97-0.99x. Blocks of 1 KB lost on the
exp chain (0.85-0.90x), of 4 and 8 KB on the residual chain; plain stores from the block
lost everywhere (0.65-0.85x).

Every step is one of the generated switches (``cpu.switches``) on a borrowed view of the
block (a view of a counted array costs two atomics), so a block costs one switch call per
step: blocks are large enough (512 float32 elements) for that call to stay small beside
their vector work. Steps take their side inputs when laid out as the tile (row step equal
to the tile's width, column step 1), as one row repeated for every row (row step 0) or as
one element (both steps 0); any other chain runs through the interpreter (:func:`runs`).
"""
import numpy as np
from numba import njit

from .half import store
from .prefetch import prefetch
from .steps import (G_COL, G_OFF, G_ROW, K_CONST_L, K_CONST_R, K_SIDE_R, K_UNARY, P_ATTR,
                    P_CODE, P_KIND, P_SIDE)
from .streaming import BLOCK_BYTES as STREAM_BYTES, LINE_BYTES, stream_block
from .switches import (map_contig, map_inplace, zip_contig, zip_left, zip_left_scalar,
                       zip_right, zip_right_scalar, zip_scalar_a, zip_scalar_b)

#: bytes of a block: steps run on it in L1 (a multiple of the streaming stores' blocks);
#: measured on the 3e7 chains: 2 KB ahead of 1 KB and 4 KB
BLOCK_BYTES = 2048
#: shortest repeated side row taken block by block (a block is cut at every row end)
MIN_PERIOD = 64


@njit(inline="always")
def runs(prog, sgeo, v1):
    """Whether the chain ``prog`` (two steps or more) runs block by block over a tile of
    rows of ``v1`` elements: every side laid out as the tile, as a repeated row of at least
    MIN_PERIOD elements, or as one element."""
    if prog.shape[0] < 2:
        return False
    for s in range(prog.shape[0]):
        k = prog[s, P_KIND]
        if k == K_UNARY or k == K_CONST_R or k == K_CONST_L:
            continue
        si = prog[s, P_SIDE]
        rs = sgeo[si, G_ROW]
        cs = sgeo[si, G_COL]
        if cs == 1:
            if rs != v1 and (rs != 0 or v1 < MIN_PERIOD):
                return False
        elif cs != 0 or rs != 0:
            return False
    return True


@njit(inline="always")
def _side_piece(code, kind, first, xs, blk, side, q, m):
    """Step ``code`` with side elements ``side[q:q + m]`` on ``m`` elements: from ``xs``
    into ``blk`` for the first step, else ``blk`` in place."""
    sp = side[q:q + m]
    if first:
        if kind == K_SIDE_R:
            zip_contig(code, xs, sp, blk, m)
        else:
            zip_contig(code, sp, xs, blk, m)
    elif kind == K_SIDE_R:
        zip_right(code, blk, sp, m)
    else:
        zip_left(code, sp, blk, m)


@njit(inline="always")
def _step(prog, s, pattrs, sides, sgeo, r0, r1, v1, x, xs0, blk, t, m):
    """Step ``s`` of the chain on the block of elements ``t .. t + m`` of the tile at
    (r0, r1) (flat: its rows of ``v1`` follow each other): the first step reads x from
    ``x[xs0 + t]``, later steps run on ``blk`` in place."""
    kind = prog[s, P_KIND]
    code = prog[s, P_CODE]
    first = s == 0
    xs = x[xs0 + t:xs0 + t + m]
    if kind == K_UNARY:
        a0 = pattrs[prog[s, P_ATTR]]
        a1 = pattrs[prog[s, P_ATTR] + 1]
        if first:
            map_contig(code, xs, blk, m, a0, a1)
        else:
            map_inplace(code, blk, m, a0, a1)
        return
    if kind == K_CONST_R or kind == K_CONST_L:
        c = store(blk, pattrs[prog[s, P_ATTR]])
        if first:
            if kind == K_CONST_R:
                zip_scalar_b(code, xs, c, blk, m)
            else:
                zip_scalar_a(code, c, xs, blk, m)
        elif kind == K_CONST_R:
            zip_right_scalar(code, blk, c, m)
        else:
            zip_left_scalar(code, c, blk, m)
        return
    si = prog[s, P_SIDE]
    side = sides[si]
    sb0 = sgeo[si, G_OFF] + r0 * sgeo[si, G_ROW] + r1 * sgeo[si, G_COL]
    if sgeo[si, G_COL] == 0:                  # one element for the whole tile
        c = side[sb0]
        if first:
            if kind == K_SIDE_R:
                zip_scalar_b(code, xs, c, blk, m)
            else:
                zip_scalar_a(code, c, xs, blk, m)
        elif kind == K_SIDE_R:
            zip_right_scalar(code, blk, c, m)
        else:
            zip_left_scalar(code, c, blk, m)
        return
    if sgeo[si, G_ROW] != 0:                  # laid out as the tile
        _side_piece(code, kind, first, xs, blk, side, sb0 + t, m)
        return
    q = 0                                     # a row repeated: cut at each row end
    while q < m:
        c0 = (t + q) % v1
        k = min(m - q, v1 - c0)
        _side_piece(code, kind, first, xs[q:q + k], blk[q:q + k], side, sb0 + c0, k)
        q += k


@njit(inline="always")
def _prefetch_sides(prog, sides, sgeo, r0, r1, t, size, line):
    """Prefetch the block at ``t`` of each side laid out as the tile (a residual streams
    from memory as x does)."""
    for s in range(prog.shape[0]):
        k = prog[s, P_KIND]
        if k == K_UNARY or k == K_CONST_R or k == K_CONST_L:
            continue
        si = prog[s, P_SIDE]
        if sgeo[si, G_COL] != 1 or sgeo[si, G_ROW] == 0:
            continue
        side = sides[si]
        p0 = sgeo[si, G_OFF] + r0 * sgeo[si, G_ROW] + r1 + t
        for q in range(p0, min(p0 + size, side.size), line):
            prefetch(side, q)


@njit(inline="always")
def run_tile(x, o, prog, pattrs, sides, sgeo, buf, xb, ob, r0, r1, n, v1, g, e):
    """The chain over the ``n`` elements of the tile at (r0, r1) from ``x[xb]`` to ``o[ob]``
    (rows of ``v1`` following each other in both), block by block in ``buf`` (borrowed,
    BLOCK_BYTES), storing the output elements ``g .. e`` (whole lines, ``stream_span``)
    streaming and the others normally. The caller fences once its work item is done."""
    w = STREAM_BYTES // o.itemsize
    line = LINE_BYTES // o.itemsize
    size = buf.size
    nsteps = prog.shape[0]
    t = np.int64(0)
    while t < n:
        # the head before the first line start is a block of its own, so later blocks
        # start on line starts
        m = g if (t == 0 and g > 0) else min(size, n - t)
        blk = buf[:m]
        # the next block of x asked for now: its lines arrive while this one computes
        p0 = xb + t + m
        for q in range(p0, min(p0 + size, x.size), line):
            prefetch(x, q)
        _prefetch_sides(prog, sides, sgeo, r0, r1, t + m, size, line)
        for s in range(nsteps):
            _step(prog, s, pattrs, sides, sgeo, r0, r1, v1, x, xb, blk, t, m)
        ms = 0
        if t >= g:
            ms = min(m, e - t) // w * w if e > t else 0
        for q in range(0, ms, w):
            stream_block(blk[q:], o, ob + t + q)
        dst = o[ob + t + ms:ob + t + m]
        src = blk[ms:]
        for i in range(m - ms):
            dst[i] = src[i]
        t += m
