"""The tile slots each family's static kernels are compiled for: ``(T0, T1, w)`` per slot,
``w`` the VARIABLE_PARTIAL window (0: none). Part of the catalog (kernel ids)."""

#: unary, binary and copy: three row tiles and two square tiles for transposed access. A
#: 128x128 tile reads a transposed operand's rows 512 bytes at a time (float32: 3187 x 9431
#: transposed add 26.7-28.8 -> 21.6-22.5 ms, copy 16.5-17.9 -> 14.7-16.3 against 64x64
#: tiles, 2 threads); 64x64 ones keep planes of a few 128x128 tiles balanced over the
#: threads (the optimizer chooses; the simplified table takes the 128x128 one)
ELEMENTWISE_TILES = ((1, 512, 32), (1, 4096, 64), (1, 16384, 64), (64, 64, 8), (128, 128, 8))


def square_tile(tiles=ELEMENTWISE_TILES):
    """(T0, T1) of the slot with the most rows: the elementwise 2-D tile of simplified tables
    (the optimizer may take a smaller square one)."""
    return max((t[:2] for t in tiles), key=lambda t: t[0])
#: reductions: tiles of the kept plane; the reduced dimensions are walked inside
REDUCE_TILES = ((1, 1, 0), (1, 32, 0), (1, 1024, 0), (8, 128, 0))
#: row-wise ops: tiles of rows; the normalized dimensions are walked inside
ROWWISE_TILES = ((1, 1, 0), (1, 8, 0), (1, 64, 0), (1, 512, 0))
#: pooling: tiles of the output plane (OH x OW)
POOL_TILES = ((16, 32, 0), (8, 64, 0), (4, 128, 0), (2, 256, 0))
#: conv2d: (output channels, output positions) per tile; the last slot is the direct
#: (depthwise) kernel
CONV_TILES = ((192, 512, 0), (48, 192, 0), (8, 2048, 0))
CONV_DIRECT_SLOT = 2
#: the register tiles of the conv tiles that read their window in place (``cpu.conv_inplace``):
#: (output channels, vectors of output positions), 24 accumulators each. A float32 tile of
#: ``mv`` channels takes the 8-row one when it pads fewer channels (:func:`conv_window_tile`):
#: 8 rows divide the usual channel counts (64, 128, ...) where 6 left 4 padded rows in every
#: 64 (2 threads, 64 -> 64 3x3 on 57x61: 1374-1376 -> 1303-1308 us; 128 -> 128 on 28x28,
#: 256 -> 256 on 14x14, 512 -> 512 on 7x7, 64 -> 128 3x3/2 on 56x56: 3-7% faster). With no
#: fewer padded rows, and for float64 (8 lanes: segments of 24 positions, as often slower as
#: faster), the 6-row one, whose segments of 4 vectors pay the per-segment mask and loop
#: set-up over more positions (16 -> 24 channels 5x5 on 100x100 was 10% slower in 3-vector
#: segments).
CONV_WINDOW_TILES = ((6, 4), (8, 3))


def conv_window_tile(mv, lanes):
    """Index into CONV_WINDOW_TILES of the register tile for a conv tile of ``mv`` output
    channels in vectors of ``lanes``: 1 (8 rows) when the vectors hold 16 lanes (float32) and
    8 rows pad fewer channel rows than 6 rows do, else 0. Integers or NumPy arrays of them
    (the planner prices arrays of tiles); compiled as it is by the kernels."""
    return ((lanes == 16) & (-(-mv // 8) * 8 < -(-mv // 6) * 6)) * 1

#: matmul micro-kernel slots per dtype: (MR, NR, MC, NC, KC). The large slot's K block is
#: 128: its B micro-panel (KC x NR, 32 KB) then stays in the 48 KB L1 while the tile's row
#: panels of A pass it (at 256, 64 KB, the micro-kernel ran ~15% slower from L2)
MATMUL_SLOTS_F32 = (
    (6, 64, 192, 512, 128),    # 0: large tiles
    (6, 48, 48, 192, 256),     # 1: small / medium tiles (batched small GEMMs)
    (24, 16, 384, 16, 512),    # 2: narrow N (N <= 16)
    (8, 48, 8, 3072, 512),     # 3: skinny M (M <= 8), B read in place
    (3, 8, 96, 16, 2048),      # 4: narrow N, inner-product kernel, A read in place
)
MATMUL_SLOTS_F64 = (
    (6, 32, 192, 256, 128),
    (6, 24, 48, 96, 256),
    (24, 8, 384, 8, 512),
    (8, 24, 8, 1536, 512),
    (3, 8, 96, 16, 2048),
)
MATMUL_NSLOTS = 5
#: the slot whose micro-kernel is the inner-product (dot) form
MATMUL_DOT_SLOT = 4
#: the slot whose tiles read A and B in place (no packing) when B is row-contiguous and
#: neither operand is half precision: the small/medium tiles of batched small GEMMs
MATMUL_INPLACE_SLOT = 1
#: the in-place slot's tiles with a k-contiguous A compute a panel's last columns past its
#: whole vectors, when there are at most this many, as dot products of A's rows with B's
#: columns instead of one more masked vector (``cpu.gemm_operands._dot_cols``), when the K
#: block is at least MATMUL_DOT_TAIL_MIN_K vectors long
MATMUL_DOT_TAIL = 2
MATMUL_DOT_TAIL_MIN_K = 2
#: the slot whose micro-kernel reads a k-contiguous A from its rows (B still packed) instead
#: of packing A into micro-panels, for operands that are not half precision
MATMUL_A_ROWS_SLOT = 0
#: below this many multiply-adds (M*N*K*batches) the matmul driver runs every tile on the
#: calling thread (``cpu.gemm``: waking the thread pool costs more than a second thread
#: saves); the combination's cost model prices such calls on one thread
MATMUL_SERIAL_MACS = 1 << 18


def matmul_slots(dtype):
    """The (MR, NR, MC, NC, KC) slots of ``dtype``: float64's, or float32's (float32 and the
    half-precision formats, computed in float32)."""
    import numpy as np
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    return MATMUL_SLOTS_F64 if name == "float64" else MATMUL_SLOTS_F32
