"""Drivers' scratch: one allocation made by the driver on the calling thread, carved into a
part per thread (conv2d) or per ``prange`` chunk (pooling), each buffer whole 64-byte lines.

Scratch a worker thread allocates itself lies in the first pages of that thread's own malloc
arena, and kernels that read and write their scratch per tile ran at about half speed there
in some processes (no page faults, no allocations per tile; what in glibc or the core makes
those addresses slow is not known). Measured, 2 threads, float32: depthwise conv2d 3x3 over
128 channels of 113x115 ran in 850-930 or 520-550 us from process to process (1 thread
870-900; ``MALLOC_ARENA_MAX=1``: 540-560 every time), with the driver's one allocation 522-579
in four processes out of four; max_pool2d 3x3/2 over 1x64x112x112 once ran in 291 us (183
elsewhere). Elementwise, reduce and row-wise scratch showed no such two speeds.
"""
from numba import njit

#: bytes a buffer of a part is rounded up to (no two threads write one cache line)
LINE = 64


@njit(inline="always")
def round_up(n, m):
    """``n`` rounded up to a multiple of ``m``."""
    return (n + m - 1) // m * m
