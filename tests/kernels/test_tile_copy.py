"""Tile copies between strided operands and tile buffers, the transposed ones through the 8x8
block transpose in registers: every item lands where NumPy's transpose puts it, nothing
outside the tile is written, and item types the block transpose does not take fall back to
the item-by-item loop."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numba import njit

from dynshape_kernels.cpu.block_transpose import can_transpose8, transpose8
from dynshape_kernels.cpu.tile_copy import gather_tile, scatter_tile, transpose_tile

DTYPES = [np.float32, np.float64, np.uint16, np.int8, np.bool_, np.complex64]
SENTINEL = 0                   # the values are 1..99 (True for bool)


def _values(rng, shape, dtype):
    v = rng.integers(1, 100, size=shape)
    if dtype is np.complex64:
        return (v + 1j * v[::-1]).astype(dtype)
    return v.astype(dtype)


@njit(cache=True)
def _can(a, b):
    return can_transpose8(a, b)


@njit(cache=True)
def _block(src, soff, ss, dst, doff, ds):
    transpose8(src, soff, ss, dst, doff, ds)


def test_one_block_is_numpys_transpose():
    src = np.arange(10 * 9, dtype=np.float32)
    dst = np.zeros(12 * 11, dtype=np.float32)
    _block(src, 9 + 1, 9, dst, 11 + 2, 11)     # the 8x8 block at (1, 1) of a 10x9 source
    want = src.reshape(10, 9)[1:9, 1:9].T      # dst[r, c] = src[c, r]
    got = dst.reshape(12, 11)
    np.testing.assert_array_equal(got[1:9, 2:10], want)
    got[1:9, 2:10] = 0
    assert not got.any()                       # nothing else written


def test_the_block_transpose_takes_integer_and_float_items_of_one_type():
    f32, f64 = np.zeros(1, np.float32), np.zeros(1, np.float64)
    assert _can(f32, f32) and _can(f64, f64)
    assert _can(np.zeros(1, np.uint16), np.zeros(1, np.uint16))
    assert _can(np.zeros(1, np.int8), np.zeros(1, np.int8))
    assert not _can(f32, f64)                                   # mixed item types
    assert not _can(np.zeros(1, np.complex64), np.zeros(1, np.complex64))
    assert not _can(np.zeros(1, np.bool_), np.zeros(1, np.bool_))


def test_the_block_transpose_is_vector_loads_shuffles_and_stores():
    """The block transpose of float32 items compiles to eight 8-lane vector loads and stores
    around LLVM shufflevector instructions (the in-register transpose), and to nothing for
    item types it does not take."""
    @njit                                        # not cached: its LLVM can be inspected
    def block(src, dst):
        transpose8(src, 0, 8, dst, 0, 8)

    a = np.zeros(64, np.float32)
    block(a, a.copy())
    ir = block.inspect_llvm(block.signatures[0])
    assert ir.count("shufflevector") >= 24
    assert ir.count("load <8 x float>") == 8 and ir.count("store <8 x float>") == 8
    c = np.zeros(64, np.complex64)
    block(c, c.copy())
    assert "shufflevector" not in block.inspect_llvm(block.signatures[1])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("v0,v1", [(64, 64), (16, 64), (13, 29), (8, 8), (7, 9), (1, 20), (64, 3)])
def test_transposed_gather_and_scatter_move_every_item_once(dtype, v0, v1):
    rng = np.random.default_rng(v0 * 100 + v1)
    _check(rng, dtype, v0, v1, r0=3, c0=2, extra_pitch=5)


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from([np.float32, np.float64, np.uint16]),
       v0=st.integers(1, 40), v1=st.integers(1, 40), r0=st.integers(0, 9),
       c0=st.integers(0, 9), extra_pitch=st.integers(0, 9), seed=st.integers(0, 2**16))
def test_transposed_tiles_of_any_size_and_place(dtype, v0, v1, r0, c0, extra_pitch, seed):
    _check(np.random.default_rng(seed), dtype, v0, v1, r0, c0, extra_pitch)


def _check(rng, dtype, v0, v1, r0, c0, extra_pitch):
    """A v0 x v1 tile at (r0, c0) of a transposed (column-major) m x n operand: gathered into
    a buffer of row pitch v1 + extra_pitch, then scattered into a transposed output."""
    m, n = r0 + v0 + 4, c0 + v1 + 3
    base = _values(rng, (n, m), dtype)             # the operand is base.T: strides (1, m)
    x = base.reshape(-1)
    pitch = v1 + extra_pitch
    buf = np.full(v0 * pitch + 8, SENTINEL, dtype=dtype)
    gather_tile(x, r0 + c0 * m, 1, m, v0, v1, buf, pitch, v1)    # prefetches the next tile
    want = base.T[r0:r0 + v0, c0:c0 + v1]
    rows = buf[:v0 * pitch].reshape(v0, pitch)
    np.testing.assert_array_equal(rows[:, :v1], want)
    assert (rows[:, v1:] == SENTINEL).all() and (buf[v0 * pitch:] == SENTINEL).all()

    out = np.full(m * n, SENTINEL, dtype=dtype)     # a transposed output: strides (1, m)
    scatter_tile(out, r0 + c0 * m, 1, m, v0, v1, buf, pitch, np.int64(0))
    got = out.reshape(n, m).T
    np.testing.assert_array_equal(got[r0:r0 + v0, c0:c0 + v1], want)
    outside = np.ones(got.shape, bool)
    outside[r0:r0 + v0, c0:c0 + v1] = False
    assert (got[outside] == SENTINEL).all()


@pytest.mark.parametrize("dst_ahead", [0, 29, 10**9, -10**9],
                         ids=["dst none", "dst next tile", "dst far past the end",
                              "dst before the start"])
@pytest.mark.parametrize("ahead", [0, 29, 10**9], ids=["none", "next tile", "far past the end"])
def test_prefetching_the_next_tile_changes_no_item(ahead, dst_ahead):
    """``transpose_tile``'s ``ahead`` and ``dst_ahead``: it prefetches the source rows the
    next tile of a row-major table reads and the destination rows it writes (past the
    array's end for the last tiles, which a prefetch may name), and moves exactly the same
    items, writing nothing outside the tile."""
    rng = np.random.default_rng(ahead % 97)
    m, n, r0, c0, v0, v1 = 45, 70, 3, 38, 37, 29       # source rows c0 + v1 + ahead > n
    base = _values(rng, (n, m), np.float32)             # the source is base.T: strides (1, m)
    out = np.full((m, n), SENTINEL, np.float32)
    transpose_tile(base.reshape(-1), r0 + c0 * m, m, out.reshape(-1), r0 * n + c0, n,
                   v0, v1, ahead, dst_ahead)
    np.testing.assert_array_equal(out[r0:r0 + v0, c0:c0 + v1], base.T[r0:r0 + v0, c0:c0 + v1])
    outside = np.ones(out.shape, bool)
    outside[r0:r0 + v0, c0:c0 + v1] = False
    assert (out[outside] == SENTINEL).all()


@pytest.mark.parametrize("pf", [0, 29, 10**9, -10**9],
                         ids=["none", "next tile", "far past the end", "before the start"])
def test_scattering_rows_that_prefetch_the_next_tile_changes_no_item(pf):
    """``scatter_tile``'s ``pf`` on unit-stride output rows: each row prefetches the next
    tile's part of it (past the array's end for the last tiles), and the tile's items land
    exactly where they did, nothing outside the tile written."""
    rng = np.random.default_rng(7)
    m, n, r0, c0, v0, v1, pitch = 40, 90, 5, 33, 31, 29, 35
    buf = _values(rng, v0 * pitch, np.float32)
    out = np.full((m, n), SENTINEL, np.float32)
    scatter_tile(out.reshape(-1), r0 * n + c0, n, 1, v0, v1, buf, pitch, np.int64(pf))
    want = buf.reshape(v0, pitch)[:, :v1]
    np.testing.assert_array_equal(out[r0:r0 + v0, c0:c0 + v1], want)
    outside = np.ones(out.shape, bool)
    outside[r0:r0 + v0, c0:c0 + v1] = False
    assert (out[outside] == SENTINEL).all()
