"""matmul (NumPy semantics) and gemm (ONNX semantics) against NumPy in float64; tables,
counting invariants and errors."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dynshape
from dynshape import testing
from dynshape.runtime.matmul import build_table, matmul_key
from dynshape.tables.matmul_table import MatmulTable
from dynshape_kernels.abi.tiles import MATMUL_SLOTS_F32 as SLOTS_F32
from dynshape_kernels.cpu.vector_width import target_has_avx512f

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

PRIMES = [1, 2, 3, 5, 7, 13, 17, 31, 61, 97, 127, 257]
dims = st.one_of(st.sampled_from(PRIMES), st.integers(1, 300))
dtypes = st.sampled_from([np.float32, np.float64])
BF16 = np.dtype(ml_dtypes.bfloat16)
ACTS = {None: lambda x: x, "relu": lambda x: np.maximum(x, 0), "tanh": np.tanh,
        "abs": np.abs, "sigmoid": lambda x: 1 / (1 + np.exp(-x))}


@pytest.fixture(scope="module", autouse=True)
def _warm():
    dynshape.warm(["matmul"])


def _check(y, ref, absref, K, dt):
    eps = np.finfo(dt).eps
    tol = 4 * np.sqrt(max(K, 1)) * eps * (absref + 1e-30) + 1e-30
    err = np.abs(y.astype(np.float64) - ref)
    assert y.dtype == dt
    assert np.all(err <= tol), f"max error {err.max()} (tolerance {tol.max()})"


def _view(draw, shape, dt, rng):
    """An array of ``shape`` as a strided / transposed / negative-stride view inside a NaN
    guard buffer (any read outside the view would poison the result)."""
    kind = draw(st.sampled_from(["c", "t", "step", "neg"]))
    if kind == "t" and len(shape) >= 2:
        base = np.full(shape[:-2] + (shape[-1], shape[-2]), np.nan, dt)
        base[...] = rng.standard_normal(base.shape)
        return np.swapaxes(base, -1, -2)
    if kind in ("step", "neg"):
        big = np.full(tuple(2 * s + 3 for s in shape), np.nan, dt)
        sl = tuple(slice(1, 1 + 2 * s, 2) for s in shape)
        if kind == "neg":
            sl = tuple(slice(2 * s - 1, None, -2) if s else slice(1, 1) for s in shape)
        v = big[sl]
        v[...] = rng.standard_normal(v.shape)
        return v
    return rng.standard_normal(shape).astype(dt)


@st.composite
def matmul_cases(draw, dtypes=dtypes):
    M, N, K = draw(dims), draw(dims), draw(dims)
    dt = draw(dtypes)
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    nd_a = draw(st.sampled_from([1, 2, 2, 3, 4]))
    nd_b = draw(st.sampled_from([1, 2, 2, 3]))
    batch = draw(st.lists(st.integers(1, 4), min_size=2, max_size=2))
    sa = (K,) if nd_a == 1 else tuple(draw(st.sampled_from([1, b])) for b in batch[:nd_a - 2][::-1]) + (M, K)
    sb = (K,) if nd_b == 1 else tuple(draw(st.sampled_from([1, b])) for b in batch[:nd_b - 2][::-1]) + (K, N)
    if nd_a * nd_b > 2 and M * N * K * max(np.prod(sa[:-2] or (1,)), np.prod(sb[:-2] or (1,))) > 3e6:
        K = 1 + K % 40
        sa = sa[:-1] + (K,)
        sb = (K,) + sb[1:] if nd_b == 1 else sb[:-2] + (K, N)
    a = _view(draw, sa, dt, rng)
    b = _view(draw, sb, dt, rng)
    return a, b, dt


@settings(max_examples=60)
@given(matmul_cases(), st.sampled_from(list(ACTS)), st.booleans(), st.booleans(), st.data())
def test_matmul_matches_numpy(case, act, use_bias, use_res, data):
    a, b, dt = case
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    absref = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    kw = {}
    N = b.shape[-1] if b.ndim > 1 else None
    if use_bias and N is not None:
        bias = np.random.default_rng(1).standard_normal(N).astype(dt)
        kw["bias"] = bias
        ref = ref + bias
        absref = absref + np.abs(bias)
    if use_res and ref.ndim:
        res = np.random.default_rng(2).standard_normal(ref.shape[-1:]).astype(dt)
        kw["residual"] = res
        ref = ref + res
        absref = absref + np.abs(res)
    if act is not None:
        kw["activation"] = act
    y = dynshape.run("matmul", a, b, **kw)
    K = a.shape[-1]
    if act is not None:
        # compare the activation of the float64 pre-activation within the same tolerance
        eps = np.finfo(dt).eps
        pre_tol = 4 * np.sqrt(K) * eps * (absref + 1e-30)
        lo, hi = ACTS[act](ref - pre_tol), ACTS[act](ref + pre_tol)
        y64 = y.astype(np.float64)
        slack = 8 * eps * np.maximum(np.abs(ACTS[act](ref)), 1e-30) + 1e-30
        ok = (y64 >= np.minimum(lo, hi) - slack) & (y64 <= np.maximum(lo, hi) + slack)
        if act == "abs":
            ok |= np.abs(y64 - np.abs(ref)) <= pre_tol + slack
        assert ok.all(), f"activation {act}: {np.abs(y64 - ACTS[act](ref)).max()}"
        assert y.shape == ref.shape
    else:
        assert y.shape == ref.shape
        _check(y, ref, absref, K, dt)


#: unit roundoff of the half-precision formats
HALF_U = {np.dtype(np.float16): 2.0 ** -11, BF16: 2.0 ** -8}


@settings(max_examples=40)
@given(matmul_cases(dtypes=st.sampled_from([np.float16, BF16])), st.booleans(),
       st.booleans())
def test_half_precision_accumulates_in_float32_and_rounds_once(case, use_bias, relu):
    """float16/bfloat16: the float32 bound of the blocked dot product, plus one rounding to
    the format (and the subnormal spacing of float16 near 0)."""
    a, b, dt = case
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = np.matmul(a64, b64)
    absref = np.matmul(np.abs(a64), np.abs(b64))
    kw = {}
    if use_bias and b.ndim > 1:
        bias = np.random.default_rng(1).standard_normal(b.shape[-1]).astype(dt)
        kw["bias"] = bias
        ref = ref + bias.astype(np.float64)
        absref = absref + np.abs(bias.astype(np.float64))
    if relu:
        kw["activation"] = "relu"
        ref = np.maximum(ref, 0)
    y = dynshape.run("matmul", a, b, **kw)
    assert y.dtype == dt and y.shape == ref.shape
    K = a.shape[-1]
    acc = 4 * np.sqrt(max(K, 1)) * 2.0 ** -23 * absref
    tol = acc + HALF_U[np.dtype(dt)] * (np.abs(ref) + acc) + 2.0 ** -24
    err = np.abs(y.astype(np.float64) - ref)
    assert (err <= tol).all(), f"max error {err.max()}"


@settings(max_examples=40)
@given(dims, dims, dims, dtypes, st.booleans(), st.booleans(),
       st.sampled_from([None, "scalar", "row", "col", "full"]),
       st.floats(-2, 2), st.floats(-2, 2), st.integers(0, 2**31))
def test_gemm_matches_onnx_semantics(M, N, K, dt, ta, tb, cshape, alpha, beta, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((K, M) if ta else (M, K)).astype(dt)
    B = rng.standard_normal((N, K) if tb else (K, N)).astype(dt)
    args = [A, B]
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    A64, B64 = (A64.T if ta else A64), (B64.T if tb else B64)
    ref = alpha * (A64 @ B64)
    absref = abs(alpha) * (np.abs(A64) @ np.abs(B64))
    if cshape is not None:
        shp = {"scalar": (), "row": (N,), "col": (M, 1), "full": (M, N)}[cshape]
        C = rng.standard_normal(shp).astype(dt)
        args.append(C)
        ref = ref + beta * C
        absref = absref + abs(beta) * np.abs(C)
    y = dynshape.run("gemm", *args, alpha=alpha, beta=beta, transA=int(ta), transB=int(tb))
    _check(y, ref, absref, K, dt)


def test_gemm_epilogue_bias_relu_and_in_place_c():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((37, 53)).astype(np.float32)
    B = rng.standard_normal((53, 29)).astype(np.float32)
    C = rng.standard_normal((37, 29)).astype(np.float32)
    ref = np.maximum(A.astype(np.float64) @ B + C, 0)
    y = dynshape.run("gemm", A, B, C, activation="relu")
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    # out is C itself (the residual read and written in place) and out overlapping A
    C2 = C.copy()
    dynshape.run("gemm", A, B, C2, out=C2)
    np.testing.assert_allclose(C2, A.astype(np.float64) @ B + C, rtol=1e-4, atol=1e-4)
    sq = rng.standard_normal((40, 40))
    ref = sq @ sq
    dynshape.run("matmul", sq, sq, out=sq)
    np.testing.assert_allclose(sq, ref, rtol=1e-12, atol=1e-12)


@given(dims, dims, dims, st.integers(1, 5))
def test_tables_cover_every_shape_of_their_bucket_once(M, N, K, nb):
    key = matmul_key("float32", M, N, K, nb)
    for variant in ("simplified", "optimized"):
        t = build_table(key, variant)
        t.validate()
        testing.check_matmul_coverage(t, M, N, nb)
        lo = [b[0] + 1 for b in t.bucket]
        testing.check_matmul_coverage(t, max(lo[0], 1), max(lo[1], 1), max(lo[3], 1))
        # every tile fits its slot's macro tile; K is not a table dimension
        cfg = np.array(SLOTS_F32)
        assert (t.entries[:, 3] <= cfg[t.entries[:, 0], 2]).all()
        assert (t.entries[:, 4] <= cfg[t.entries[:, 0], 3]).all()


def test_optimized_picks_slots_per_problem():
    def slot(M, N, K, nb=1):
        key = matmul_key("float32", M, N, K, nb)
        return build_table(key, "optimized").entries[0, 0]
    assert slot(8, 4096, 4096) == 3          # skinny M: B read in place
    assert slot(2048, 2048, 2048) == 0       # large square
    # narrow N: one vector of B rows read in place (the in-place slot: 1.94 ms against the
    # dot slot's 2.23 ms on 2 threads) or a narrow-N slot, never the large or skinny-M ones
    assert slot(4096, 8, 4096) in (1, 2, 4)
    assert slot(17, 33, 64, 256) == 1        # batched small
    if not target_has_avx512f():
        # the skinny-M slot's kernel spills without AVX-512: with B in cache a GEMV goes to
        # the in-place slot (0.66 of NumPy's time against 0.21, AVX2)
        assert slot(1, 3072, 768) == 1


def test_no_compilation_and_one_driver_call_for_new_shapes(driver_calls):
    rng = np.random.default_rng(5)
    dynshape.run("matmul", np.ones((3, 4), np.float32), np.ones((4, 5), np.float32))
    with testing.count_compilations() as c:
        for M, N, K, nb in [(211, 97, 389, 1), (3, 1999, 17, 2), (129, 5, 301, 3)]:
            a = rng.standard_normal((nb, M, K)).astype(np.float32)
            b = rng.standard_normal((K, N)).astype(np.float32)
            before = len(driver_calls)
            y = dynshape.run("matmul", a, b, activation="gelu")
            assert len(driver_calls) == before + 1
            assert y.shape == (nb, M, N)
    assert c.count == 0, c.functions


def test_shapes_of_one_bucket_share_a_table():
    dynshape.clear_cache()
    a = np.ones((1000, 64), np.float32)
    b = np.ones((64, 700), np.float32)
    dynshape.run("matmul", a, b)
    dynshape.run("matmul", a[:990], b[:, :690])
    s = dynshape.cache_stats()
    assert s["tables"] == 1 and s["hits"] >= 1
    t = dynshape.explain("matmul", (990, 64), (64, 690))
    assert isinstance(t, MatmulTable) and "K is walked inside" in t.describe()


def test_empty_and_k_zero():
    z = dynshape.run("matmul", np.ones((3, 0)), np.ones((0, 4)))
    np.testing.assert_array_equal(z, np.zeros((3, 4)))
    assert dynshape.run("matmul", np.ones((0, 5)), np.ones((5, 4))).shape == (0, 4)
    y = dynshape.run("gemm", np.ones((3, 0)), np.ones((0, 4)), np.full((4,), 2.0), beta=0.5)
    np.testing.assert_array_equal(y, np.ones((3, 4)))


def test_strided_out():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 33, 17))
    b = rng.standard_normal((17, 45))
    big = np.full((2, 66, 100), np.nan)
    out = big[:, ::2, 1:91:2]
    dynshape.run("matmul", a, b, out=out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-12, atol=1e-12)
    mask = np.ones(big.shape, bool)
    mask[:, ::2, 1:91:2] = False
    assert np.isnan(big[mask]).all()


@pytest.mark.parametrize("call, err, words", [
    (lambda: dynshape.run("matmul", np.ones((3, 4)), np.ones((5, 6))), dynshape.ShapeError,
     "inner dimensions"),
    (lambda: dynshape.run("matmul", np.ones((2, 3, 4)), np.ones((3, 4, 5))), dynshape.ShapeError,
     "broadcast"),
    (lambda: dynshape.run("matmul", np.ones(3), np.float64(2)), dynshape.ShapeError, "scalar"),
    (lambda: dynshape.run("matmul", np.ones((2, 2), np.int32), np.ones((2, 2), np.int32)),
     dynshape.DtypeError, "accepted: float32, float64"),
    (lambda: dynshape.run("matmul", np.ones((2, 2)), np.ones((2, 2)), activation="swish"),
     dynshape.OpAttributeError, "accepted"),
    (lambda: dynshape.run("matmul", np.ones((2, 2)), np.ones((2, 3)), bias=np.ones(2)),
     dynshape.ShapeError, "bias"),
    (lambda: dynshape.run("matmul", np.ones((2, 2)), np.ones((2, 3)), out=np.ones((2, 2))),
     dynshape.ShapeError, "out"),
    (lambda: dynshape.run("gemm", np.ones((2, 2, 2)), np.ones((2, 2))), dynshape.ShapeError,
     "2-D"),
    (lambda: dynshape.run("gemm", np.ones((2, 3)), np.ones((3, 4)), np.ones((3, 4))),
     dynshape.ShapeError, "broadcast"),
    (lambda: dynshape.run("gemm", np.ones((2, 3)), np.ones((3, 4)), transA=2),
     dynshape.OpAttributeError, "transA"),
    (lambda: dynshape.run("gemm", np.ones((2, 3)), np.ones((3, 4)), alpha="x"),
     dynshape.OpAttributeError, "alpha"),
    (lambda: dynshape.run("gemm", np.ones((2, 3))), dynshape.ArgumentError, "2 or 3"),
])
def test_bad_input(call, err, words):
    with pytest.raises(err, match=words):
        call()


def test_corrupt_table_is_refused():
    key = matmul_key("float32", 50, 50, 8, 1)
    t = build_table(key, "simplified")
    bad = t.entries.copy()
    bad[0, 3] = 10_000
    t2 = MatmulTable.__new__(MatmulTable)
    t2.__dict__.update(t.__dict__)
    t2.entries = bad
    with pytest.raises(dynshape.TableFormatError, match="macro tile"):
        t2.validate()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_epilogue_step_program(dt):
    """The GEMM epilogue runs a step program (what fused sequences starting with a matmul
    use): y = exp(-(a @ b + row_side)) * col_side, per batch."""
    from dynshape import ops
    from dynshape.runtime.matmul import MATMUL
    from dynshape_kernels.cpu import steps
    from dynshape_kernels.cpu.scalar_ops import BINARY_OPS, UNARY_OPS
    rng = np.random.default_rng(11)
    nb, M, N, K = 3, 45, 70, 33
    a = rng.standard_normal((nb, M, K)).astype(dt)
    b = rng.standard_normal((K, N)).astype(dt)
    row = rng.standard_normal(N).astype(dt)            # broadcast over rows and batches
    col = rng.standard_normal((nb, M, 1)).astype(dt)   # one value per (batch, row)
    prog = np.array([[steps.K_SIDE_R, BINARY_OPS.index("add"), 0, 0],
                     [steps.K_UNARY, UNARY_OPS.index("neg"), 0, 0],
                     [steps.K_UNARY, UNARY_OPS.index("exp"), 0, 0],
                     [steps.K_SIDE_L, BINARY_OPS.index("mul"), 1, 0]], np.int64)
    sgeo = np.zeros((steps.MAX_SIDES, 4), np.int64)
    sgeo[0] = (0, 0, 0, 1)
    sgeo[1] = (0, M, 1, 0)
    dummy = np.zeros(1, dt)
    launch = ops.get("matmul").prepare([a, b], None, {})
    launch.extra["steps"] = (prog, np.zeros(2, dt), (row, col.reshape(-1), dummy, dummy), sgeo)
    y = MATMUL.run(launch)
    ref = col * np.exp(-(a.astype(np.float64) @ b + row))
    tol = 1e-4 if dt == np.float32 else 1e-11
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol)


def test_matmul_tables_persist_and_load(tmp_path):
    """warmup saves the optimized matmul table; after clearing the cache it is loaded (a
    MatmulTable, same entries), and a tampered file is refused and rebuilt."""
    import glob
    import warnings
    dynshape.set_table_dir(str(tmp_path))
    try:
        t = dynshape.warmup("matmul", (300, 129), (129, 517))
        assert isinstance(t, MatmulTable) and t.variant == "optimized"
        files = glob.glob(str(tmp_path / "*" / "*.npz"))
        assert len(files) == 1
        dynshape.clear_cache()
        loaded = dynshape.cache_stats()["tables_loaded"]
        t2 = dynshape.warmup("matmul", (300, 129), (129, 517))
        assert dynshape.cache_stats()["tables_loaded"] == loaded + 1
        assert isinstance(t2, MatmulTable)
        np.testing.assert_array_equal(t2.entries, t.entries)
        # a table whose tiles overlap is refused on load (checksum rewritten to match)
        bad = MatmulTable.load(files[0])
        e = bad.entries.copy()
        e[-1, 1] = 0
        bad.entries = e
        bad.save(files[0])
        dynshape.clear_cache()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t3 = dynshape.warmup("matmul", (300, 129), (129, 517))
        assert any("exactly once" in str(x.message) or "outside" in str(x.message) for x in w)
        np.testing.assert_array_equal(t3.entries, t.entries)
    finally:
        dynshape.set_table_dir(None)
