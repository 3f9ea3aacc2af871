"""Planner of fused sequences: one tile shape per table, every tile runs the whole step
program in a per-tile buffer (VARIABLE_FULL tails, tiles anchored at the start)."""
from dynshape_kernels.abi import fused_table as kfused
from dynshape_kernels.abi.fused_table import CHUNK

# elements of an elementwise tile: 8192 float32 = 32 KB stays in L1/L2 while every step runs
# over it; measured against 2048/4096/16384 on one thread (3e7 elements: 4096 lost ~20% to
# per-tile overhead on short chains, 16384 gained nothing more)
TILE_ELEMENTS = 8192


def tile_shape(prog, p, b0, b1):
    """Tile shape (rows, columns) of a table for buckets b0 (rows), b1 (columns)."""
    hi1 = max(b1[1], 1)
    if prog.tail in (kfused.T_ROWWISE, kfused.T_REDUCE_ROWS):
        return max(1, CHUNK // hi1), hi1
    strided = any(abs(st[-1]) > 1 for st in p.strides[:2])
    if strided and p.m > 1:
        return 64, 64
    t1 = min(TILE_ELEMENTS, hi1)
    return max(1, TILE_ELEMENTS // t1), t1
