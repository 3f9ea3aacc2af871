"""Tests of the dynshape static-tile GEMM (dynshape_kernels/cpu/gemm.py) against NumPy, through
the driver called directly with every slot (dynshape.testing.matmul_direct).

All cases go through the same few compiled driver specialisations (one per
dtype; disk-cached), so the runtime is dominated by the first compile.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from types import SimpleNamespace

from dynshape.planning.matmul_tiles import make_gemm_table
from dynshape.testing.matmul_direct import gemm
from dynshape_kernels.abi.matmul_table import TABLE_COLS
from dynshape_kernels.abi.tiles import MATMUL_NSLOTS

G = SimpleNamespace(gemm=gemm, make_gemm_table=make_gemm_table, TABLE_COLS=TABLE_COLS,
                    NSLOTS=MATMUL_NSLOTS)

DIMS = st.one_of(st.integers(1, 300), st.sampled_from([1, 2, 3, 5, 7, 13, 31, 61, 97, 127, 193, 251, 257, 293]))
DTYPES = st.sampled_from([np.float32, np.float64])
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _tol(dt, K):
    return (2e-5 if dt == np.float32 else 1e-12) * max(1, K) ** 0.5 * 4


def _operand(rng, shape, dt, layout):
    """A (rows, cols) array with the requested memory layout (a view)."""
    r, c = shape
    if layout == "c":
        return rng.standard_normal((r, c)).astype(dt)
    if layout == "t":  # transposed (column-major) view
        return rng.standard_normal((c, r)).astype(dt).T
    if layout == "slice":  # strided both ways
        return rng.standard_normal((2 * r + 1, 3 * c + 2)).astype(dt)[1::2, 2::3]
    if layout == "neg":  # negative strides
        return rng.standard_normal((r, c)).astype(dt)[::-1, ::-1]
    if layout == "negt":
        return rng.standard_normal((c, r)).astype(dt)[::-1].T
    raise ValueError(layout)


LAYOUTS = st.sampled_from(["c", "t", "slice", "neg", "negt"])


def _check(out, ref, dt, K):
    ref = np.asarray(ref, np.float64)
    scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
    np.testing.assert_allclose(out, ref, rtol=0, atol=_tol(dt, K) * scale)


@SETTINGS
@given(M=DIMS, N=DIMS, K=DIMS, dt=DTYPES, la=LAYOUTS, lb=LAYOUTS, seed=st.integers(0, 2**31))
def test_plain(M, N, K, dt, la, lb, seed):
    rng = np.random.default_rng(seed)
    a = _operand(rng, (M, K), dt, la)
    b = _operand(rng, (K, N), dt, lb)
    out = G.gemm(a, b)
    assert out.dtype == dt
    _check(out, a.astype(np.float64) @ b.astype(np.float64), dt, K)


@SETTINGS
@given(M=DIMS, N=DIMS, K=DIMS, dt=DTYPES, slot=st.integers(0, G.NSLOTS - 1),
       la=LAYOUTS, lb=LAYOUTS, lo=st.sampled_from(["c", "t", "neg"]), seed=st.integers(0, 2**31))
def test_every_slot_and_out_layout(M, N, K, dt, slot, la, lb, lo, seed):
    """Force each static kernel (tiles of its MC x NC, tails included),
    writing into a strided output view."""
    rng = np.random.default_rng(seed)
    a = _operand(rng, (M, K), dt, la)
    b = _operand(rng, (K, N), dt, lb)
    out = _operand(rng, (M, N), dt, lo)
    G.gemm(a, b, out=out, slot=slot)
    _check(out, a.astype(np.float64) @ b.astype(np.float64), dt, K)


@SETTINGS
@given(M=DIMS, N=DIMS, K=DIMS, dt=DTYPES,
       alpha=st.sampled_from([1.0, -0.5, 2.0, 0.0]), beta=st.sampled_from([0.0, 1.0, -1.5]),
       cshape=st.sampled_from(["full", "row", "col", "scalar", "t"]),
       use_bias=st.booleans(), relu=st.booleans(), seed=st.integers(0, 2**31))
def test_epilogue(M, N, K, dt, alpha, beta, cshape, use_bias, relu, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(dt)
    b = rng.standard_normal((K, N)).astype(dt)
    c = {"full": lambda: rng.standard_normal((M, N)),
         "row": lambda: rng.standard_normal((1, N)),
         "col": lambda: rng.standard_normal((M, 1)),
         "scalar": lambda: np.array(rng.standard_normal()),
         "t": lambda: rng.standard_normal((N, M)).T}[cshape]().astype(dt)
    bias = rng.standard_normal(N).astype(dt) if use_bias else None
    out = G.gemm(a, b, alpha=alpha, beta=beta, c=c, bias=bias, act="relu" if relu else None)
    ref = alpha * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c.astype(np.float64)
    if use_bias:
        ref = ref + bias
    if relu:
        ref = np.maximum(ref, 0)
    _check(out, ref, dt, K)


def test_beta_zero_ignores_nan_c():
    a = np.ones((5, 4), np.float32)
    b = np.ones((4, 3), np.float32)
    c = np.full((5, 3), np.nan, np.float32)
    out = G.gemm(a, b, beta=0.0, c=c)
    np.testing.assert_array_equal(out, np.full((5, 3), 4, np.float32))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_k_zero(dt):
    a = np.zeros((7, 0), dt)
    b = np.zeros((0, 9), dt)
    c = np.arange(63, dtype=dt).reshape(7, 9)
    out = G.gemm(a, b, alpha=2.0, beta=0.5, c=c, bias=np.ones(9, dt))
    np.testing.assert_allclose(out, 0.5 * c + 1)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nb=st.integers(1, 9), M=st.integers(1, 70), N=st.integers(1, 70), K=st.integers(1, 70),
       dt=DTYPES, bcast=st.sampled_from([None, "a", "b"]), seed=st.integers(0, 2**31))
def test_batched(nb, M, N, K, dt, bcast, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((1 if bcast == "a" else nb, M, K)).astype(dt)
    b = rng.standard_normal((1 if bcast == "b" else nb, K, N)).astype(dt)[:, ::-1]
    out = G.gemm(a, b)
    _check(out, np.matmul(a.astype(np.float64), b.astype(np.float64)), dt, K)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("M,N,K", [(8, 1000, 300), (1000, 8, 300), (300, 300, 1100), (17, 33, 64)])
def test_heuristic_shapes(dt, M, N, K):
    """Shapes that pick the skinny / narrow / small slots, and K > KC."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(dt)
    b = rng.standard_normal((K, N)).astype(dt)
    _check(G.gemm(a, b), a.astype(np.float64) @ b.astype(np.float64), dt, K)


def test_driver_direct_table():
    """Call the matmul driver directly with a hand-made table mixing slots, tiles reaching
    past M and N (clipped) and rows of a batch that does not exist (skipped)."""
    import numba
    from dynshape_kernels import drivers
    from dynshape_kernels.cpu import steps
    M, N, K = 37, 150, 45
    rng = np.random.default_rng(1)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    t0 = G.make_gemm_table(20, N, 20, 64, slot=0)
    t1 = G.make_gemm_table(M - 20 + 7, N + 30, 8, 48, slot=1)   # past M and N: clipped
    t1[:, 1] += 20
    t2 = G.make_gemm_table(M, N, 64, 64, slot=1, batch=2)[-3:]   # batch 1: skipped
    table = np.concatenate([t0, t1, t2])
    i = np.int64
    dummy = np.zeros(1, np.float32)
    boffs = np.zeros((1, 4), np.int64)
    guard = np.full(M * N + 16, 7.0, np.float32)
    cv = guard[8:8 + M * N]
    boffs[0, 2] = 0
    drivers.get("matmul", "float32")(
        table, i(M), i(N), i(K), boffs, a.ravel(), i(K), i(1), b.ravel(), i(N), i(1),
        cv, i(N), i(1), 1.0, 0.0, dummy, i(0), i(0), dummy, i(0), i(0), i(0), i(0),
        steps.empty_program(), np.zeros(2, np.float32), (dummy,) * steps.MAX_SIDES,
        np.zeros((steps.MAX_SIDES, 4), np.int64), i(numba.get_num_threads()))
    _check(cv.reshape(M, N), a.astype(np.float64) @ b, np.float32, K)
    assert (guard[:8] == 7).all() and (guard[8 + M * N:] == 7).all()
    assert G.make_gemm_table(0, 5, 4, 4).shape == (0, G.TABLE_COLS)


def test_table_validation_and_aliasing():
    with pytest.raises(ValueError):
        G.make_gemm_table(100, 100, 1000, 64, slot=0, dtype=np.float32)
    t = G.make_gemm_table(10, 7, 4, 3, slot=1, batch=2)
    assert t.shape == (2 * 3 * 3, G.TABLE_COLS)
    assert (t[:, 3] > 0).all() and (t[:, 4] > 0).all()
    # read-only inputs and an output aliasing an input
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    a.flags.writeable = False
    sq = np.arange(16, dtype=np.float32).reshape(4, 4)
    ref = a.astype(np.float64) @ sq
    np.testing.assert_allclose(G.gemm(a, sq), ref)
    ref2 = sq.astype(np.float64) @ sq + sq
    G.gemm(sq, sq, out=sq, beta=1.0, c=sq)
    np.testing.assert_allclose(sq, ref2)
