"""The CUDA target's tile slots: ``(T0, T1, w)`` per slot, one thread block per (entry, outer
index). Part of the catalog (kernel ids); kept apart from the CPU's tiles so that CPU kernels
are not rebuilt when these change."""
#: threads per block of every CUDA kernel (a multiple of the warp)
CUDA_THREADS = 256
#: elementwise: two row tiles (each thread walks T1 / CUDA_THREADS columns) and a square
#: tile that goes through shared memory for transposed access (coalesced on both sides)
CUDA_ELEMENTWISE_TILES = ((1, 1024, 0), (1, 8192, 0), (32, 32, 0))
#: reductions: T0 x T1 outputs per block; CUDA_THREADS / (T0 * T1) threads reduce each one
CUDA_REDUCE_TILES = ((1, 1, 0), (1, 8, 0), (1, 256, 0), (8, 32, 0))
#: row-wise ops: T1 rows per block; CUDA_THREADS / T1 threads normalize each row
CUDA_ROWWISE_TILES = ((1, 1, 0), (1, 8, 0), (1, 64, 0))
#: matmul: output tiles per block (shared-memory operand tiles, register-blocked threads)
CUDA_MATMUL_TILES = ((64, 64, 0), (32, 32, 0))
#: pooling: tiles of the output plane (OH x OW); one thread per output, its window walked
CUDA_POOL_TILES = ((8, 32, 0), (4, 64, 0), (16, 16, 0))
#: conv2d: (output channels, output positions) per block; a thread per output, K walked
CUDA_CONV_TILES = ((16, 64, 0), (4, 32, 0))
