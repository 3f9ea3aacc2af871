"""The control block of the fused-sequence driver and its tail kinds.

A fused table's control block ``ctrl`` (int64, F_SIZE) holds the tile shape, the tail kind
(none, a row-wise op, a reduction over rows or over everything), its op code, the step index
where the tail starts, the epsilon slot, the number of side inputs, and whether the output
is written with streaming stores (``F_STREAM``, the CPU: see ``cpu.streaming``).
"""
T_NONE, T_ROWWISE, T_REDUCE_ROWS, T_REDUCE_ALL = range(4)
F_T0, F_T1, F_TAIL, F_TCODE, F_SPLIT, F_EPS, F_NSIDES, F_STREAM = range(8)
F_SIZE = 8
#: columns of a tile row: a float32 row of 4096 is 16 KB, so a tile stays in L1/L2 while
#: every step of the chain runs over it
CHUNK = 4096
#: dtypes of the fused driver on the CPU, and on the CUDA target (the same: half precision
#: included; the CUDA kernel runs every tail kind too)
FUSED_DTYPES = ("float32", "float64", "int32", "int64", "float16", "bfloat16")
CUDA_FUSED_DTYPES = FUSED_DTYPES


def fused_dtypes(target):
    """The fused driver's dtypes on ``target`` (a CPU-like target shares the CPU's)."""
    return CUDA_FUSED_DTYPES if target == "cuda" else FUSED_DTYPES
