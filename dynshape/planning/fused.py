"""Planner of fused sequences: one tile shape per table, every tile runs the whole step
program in a per-tile buffer (VARIABLE_FULL tails, tiles anchored at the start)."""
from dynshape_kernels.abi import fused_table as kfused
from dynshape_kernels.abi.fused_table import CHUNK

# elements of an elementwise tile: 32768 float32 = 128 KB stays in L2 while every step runs
# over it. Measured on one thread first (3e7 elements: 4096 lost ~20% to per-tile overhead on
# short chains, 16384 gained nothing over 8192); then on 2 threads, tile sizes alternating in
# one process (float32, (n/1000, 1000) + bias): add+relu 3e7 4.74 -> 4.48 ms, 1e6 124 -> 102
# us, 3e5 42 -> 35 us; add+relu+mul+exp 3e7 7.11 -> 6.92 ms, 1e6 228 -> 197 us; an 8-step
# chain with tanh, gelu, log and sigmoid unchanged (compute-bound); 65536 no better
TILE_ELEMENTS = 32768
# a CUDA tile is one thread block's share (cuda/fused.py): unmeasured there, it keeps the
# size it had when the CPU's was 8192
DEVICE_TILE_ELEMENTS = 8192


def tile_shape(prog, p, b0, b1, target="cpu"):
    """Tile shape (rows, columns) of a table of ``target`` for buckets b0 (rows), b1
    (columns)."""
    hi1 = max(b1[1], 1)
    if prog.tail in (kfused.T_ROWWISE, kfused.T_REDUCE_ROWS):
        return max(1, CHUNK // hi1), hi1
    strided = any(abs(st[-1]) > 1 for st in p.strides[:2])
    if strided and p.m > 1:
        return 64, 64
    size = TILE_ELEMENTS if target == "cpu" else DEVICE_TILE_ELEMENTS
    t1 = min(size, hi1)
    return max(1, size // t1), t1
