"""CUDA kernels of the plane families: unary (copy included) and binary with broadcasting.

One kernel per (family, dtype); one launch per table. Block ``(e, j)`` runs entry ``e`` of
the table for the outer (batch) indices ``j, j + gridDim.y, ...``. The entry's kernel id
decodes into (op code, tile slot) exactly as on the CPU; the tile is clipped by bounds
(VARIABLE tails) or anchored back from the end (OVERLAP), both resolved by ``resolve``.
Row tiles map consecutive threads to consecutive columns. The square slot stages the tile
through shared memory when an input is read across its columns (a transposed copy): reads
are then coalesced along the input's rows and writes along the output's columns. Half
precision moves carriers; the switches of its kind widen, compute in float32 and round.
"""
from numba import cuda

from ..abi.common_area import C_NOUTER
from ..abi.cuda_tiles import CUDA_ELEMENTWISE_TILES
from .scalars import switches
from .tiles import decode_entry, operand_strides, outer_offset

N_SLOTS = len(CUDA_ELEMENTWISE_TILES)
#: the slot of the square tile (shared-memory transpose)
SQUARE = max(range(N_SLOTS), key=lambda s: CUDA_ELEMENTWISE_TILES[s][0])
SQ = CUDA_ELEMENTWISE_TILES[SQUARE][0]
SQ1 = SQ + 1      # padded row: no shared-memory bank conflicts down a column
assert CUDA_ELEMENTWISE_TILES[SQUARE][1] == SQ, "the square slot must be square"
T0S = tuple(t[0] for t in CUDA_ELEMENTWISE_TILES)
T1S = tuple(t[1] for t in CUDA_ELEMENTWISE_TILES)


def make_unary(nbtype, kind):
    """The unary kernel of one dtype: ``(x, out, common, entries, a0, a1)`` (the op's
    attributes as scalars of the computed dtype)."""
    unary_op, _ = switches(kind)
    t0s, t1s = T0S, T1S

    def unary(x, o, common, entries, a0, a1):
        e = cuda.blockIdx.x
        code, slot, r0, v0, c0, v1, t0, t1 = decode_entry(entries, e, common, t0s, t1s)
        osm, osn = operand_strides(common, 0)
        xsm, xsn = operand_strides(common, 1)
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        tile = cuda.shared.array((SQ, SQ1), nbtype)
        staged = slot == SQUARE and xsn != 1 and xsm == 1
        j = cuda.blockIdx.y
        while j < common[C_NOUTER]:
            ob = outer_offset(common, 0, j) + r0 * osm + c0 * osn
            xb = outer_offset(common, 1, j) + r0 * xsm + c0 * xsn
            if staged:
                # read down the rows (x's contiguous axis), write along the columns
                for i in range(tid, SQ * SQ, nt):
                    c = i // SQ
                    r = i % SQ
                    if r < v0 and c < v1:
                        tile[r, c] = x[xb + r * xsm + c * xsn]
                cuda.syncthreads()
                for i in range(tid, SQ * SQ, nt):
                    r = i // SQ
                    c = i % SQ
                    if r < v0 and c < v1:
                        o[ob + r * osm + c * osn] = unary_op(code, tile[r, c], a0, a1)
                cuda.syncthreads()
            elif v0 > 0 and v1 > 0:
                for i in range(tid, v0 * v1, nt):
                    r = i // v1
                    c = i - r * v1
                    o[ob + r * osm + c * osn] = unary_op(code, x[xb + r * xsm + c * xsn],
                                                         a0, a1)
            j += cuda.gridDim.y
    return unary


def make_binary(nbtype, kind):
    """The binary kernel of one dtype: ``(a, b, out, common, entries)``."""
    _, binary_op = switches(kind)
    t0s, t1s = T0S, T1S

    def binary(a, b, o, common, entries):
        e = cuda.blockIdx.x
        code, slot, r0, v0, c0, v1, t0, t1 = decode_entry(entries, e, common, t0s, t1s)
        osm, osn = operand_strides(common, 0)
        asm, asn = operand_strides(common, 1)
        bsm, bsn = operand_strides(common, 2)
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        j = cuda.blockIdx.y
        if v0 > 0 and v1 > 0:
            while j < common[C_NOUTER]:
                ob = outer_offset(common, 0, j) + r0 * osm + c0 * osn
                ab = outer_offset(common, 1, j) + r0 * asm + c0 * asn
                bb = outer_offset(common, 2, j) + r0 * bsm + c0 * bsn
                for i in range(tid, v0 * v1, nt):
                    r = i // v1
                    c = i - r * v1
                    o[ob + r * osm + c * osn] = binary_op(code, a[ab + r * asm + c * asn],
                                                          b[bb + r * bsm + c * bsn])
                j += cuda.gridDim.y
    return binary
