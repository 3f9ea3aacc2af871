"""Row-wise ops (softmax, log_softmax, layer_norm, rms_norm) against NumPy, tables, errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dynshape
from dynshape import testing
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.tail_mode import OVERLAP, TailMode

from oracles import ulps

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture(scope="module", autouse=True)
def _warm():
    dynshape.warm(["rowwise"])


# ---- float64 references ----------------------------------------------------------------------
def ref_softmax(x, axis):
    x = x.astype(np.float64)
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def ref_log_softmax(x, axis):
    x = x.astype(np.float64)
    m = x.max(axis=axis, keepdims=True)
    return (x - m) - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def _norm_axes(x, axis):
    return tuple(range(axis % x.ndim, x.ndim))


def ref_layer_norm(x, w=None, b=None, axis=-1, eps=1e-5):
    ax = _norm_axes(x, axis)
    x = x.astype(np.float64)
    mu = x.mean(axis=ax, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=ax, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


def ref_rms_norm(x, w=None, axis=-1, eps=1e-5):
    ax = _norm_axes(x, axis)
    x = x.astype(np.float64)
    y = x / np.sqrt((x * x).mean(axis=ax, keepdims=True) + eps)
    return y if w is None else y * w


def _close(res, ref, dtype):
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(res.astype(np.float64), ref, rtol=tol, atol=tol)


@st.composite
def cases(draw, dtypes=("float32", "float64")):
    op = draw(st.sampled_from(["softmax", "log_softmax", "layer_norm", "rms_norm"]))
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(testing.shapes(max_rank=5, max_side=9).filter(lambda s: len(s) >= 1))
    x = draw(testing.views(shape, dtype=dtype))
    axis = draw(st.integers(-x.ndim, x.ndim - 1))
    return op, x, axis


def _params(op, x, axis, draw):
    norm = x.shape[axis % x.ndim:]
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    w = b = None
    if op in ("layer_norm", "rms_norm") and draw(st.booleans()):
        wshape = norm[draw(st.integers(0, len(norm))):]          # broadcasts to norm
        w = rng.standard_normal(wshape).astype(x.dtype)
    if op == "layer_norm" and draw(st.booleans()):
        b = rng.standard_normal(norm).astype(x.dtype)
    return w, b


def _run_and_ref(op, x, axis, w, b, out=None):
    if x.size == 0:
        args = {"softmax": (), "log_softmax": (), "layer_norm": (w, b), "rms_norm": (w,)}[op]
        return dynshape.run(op, x, *args, axis=axis, out=out), np.empty(x.shape)
    if op == "softmax":
        return dynshape.run(op, x, axis=axis, out=out), ref_softmax(x, axis)
    if op == "log_softmax":
        return dynshape.run(op, x, axis=axis, out=out), ref_log_softmax(x, axis)
    if op == "layer_norm":
        return (dynshape.run(op, x, w, b, axis=axis, out=out),
                ref_layer_norm(x, w, b, axis))
    return dynshape.run(op, x, w, axis=axis, out=out), ref_rms_norm(x, w, axis)


@settings(max_examples=120)
@given(cases(), st.data())
def test_matches_numpy(case, data):
    op, x, axis = case
    w, b = _params(op, x, axis, data.draw)
    res, ref = _run_and_ref(op, x, axis, w, b)
    assert res.shape == x.shape and res.dtype == x.dtype
    _close(res, ref, x.dtype)


@settings(max_examples=60)
@given(cases(dtypes=("float16", "bfloat16")), st.booleans(), st.data())
def test_half_precision_within_ulps_of_the_float64_result(case, strided, data):
    """float16/bfloat16 rows are computed in float32 (sums in float64) and each result is
    rounded once (softmax twice: it scales its stored exponentials) to the format; 1e-5
    absolute is allowed where results near 0 come from cancellation (x - mean, w*y + b)."""
    op, x, axis = case
    w, b = _params(op, x, axis, data.draw)
    out = None
    if strided and x.size:
        big = np.zeros(tuple(2 * n for n in x.shape), dtype=x.dtype)
        out = big[tuple(slice(None, None, -2) for _ in x.shape)]
    res, ref = _run_and_ref(op, x, axis, w, b, out=out)
    assert res.shape == x.shape and res.dtype == x.dtype
    assert out is None or res is out
    if x.size:
        assert ulps(res, ref.astype(x.dtype), atol=1e-5) <= (2 if op == "softmax" else 1)


@settings(max_examples=40)
@given(cases(), st.sampled_from(["fresh", "strided", "alias"]), st.data())
def test_out(driver_calls, case, kind, data):
    op, x, axis = case
    w, b = _params(op, x, axis, data.draw)
    expect = _run_and_ref(op, x, axis, w, b)[1]
    if kind == "alias":
        x = x.copy() if not x.flags.writeable else x
        out = x                                   # computed in place
        x_in = x
    elif kind == "strided":
        big = np.zeros(tuple(2 * n for n in x.shape), dtype=x.dtype)
        out = big[tuple(slice(None, None, -2) for _ in x.shape)]
        x_in = x
    else:
        out = np.empty_like(x)
        x_in = x
    before = len(driver_calls)
    r = _run_and_ref(op, x_in, axis, w, b, out=out)[0]
    assert r is out
    assert len(driver_calls) - before == (1 if x.size else 0)
    _close(out, expect, x.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_softmax_rows_that_prefetch_the_next_row(dtype):
    """Rows of at least AHEAD_ROW elements run their exp pass in AHEAD_BLOCK blocks while
    prefetching the next row this thread reads (the entry's next, or the next work item's
    first): every layout of the rows (reversed, permuted outer axes, rows with gaps, an
    out= view with gaps, a partial last block) gives the reference."""
    from dynshape_kernels.cpu.rowwise import AHEAD_BLOCK, AHEAD_ROW
    rng = np.random.default_rng(5)
    n = AHEAD_ROW + AHEAD_BLOCK + 37                   # a partial last block
    x = (rng.standard_normal((3, 5, n)) * 4).astype(dtype)
    wide = (rng.standard_normal((9, n + 300)) * 4).astype(dtype)
    for v in (x, x[::-1], x[:, ::-2], x.transpose(1, 0, 2), wide[:, 100:100 + n],
              wide[::-2, :n]):
        _close(dynshape.run("softmax", v), ref_softmax(v, -1), dtype)
    buf = np.full((6, n + 9), 7.0, dtype)
    out = buf[:, 3:3 + n]
    v = wide[:6, :n]
    dynshape.run("softmax", v, out=out)
    _close(out, ref_softmax(v, -1), dtype)
    assert (buf[:, :3] == 7).all() and (buf[:, 3 + n:] == 7).all()    # gaps untouched


@pytest.mark.parametrize("n", [1, 511, 512, 513, 30522, 200003])
def test_sums_of_exponentials_in_blocks_keep_float32_accuracy(n):
    """softmax's and log_softmax's sums of exponentials accumulate in float32 over blocks of
    SUM_BLOCK elements and in float64 across them: on rows of one to hundreds of blocks
    (and partial ones) the results stay within 1.5e-6 (relative; log_softmax absolute, plus its
    result's rounding) of a
    float64 computation from the same float32 inputs (the float64 sums gave the same
    errors: the float32 arguments of exp dominate them)."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n)).astype(np.float32)
    ref = ref_softmax(x, -1)
    np.testing.assert_allclose(dynshape.run("softmax", x), ref, rtol=1.5e-6, atol=0)
    np.testing.assert_allclose(dynshape.run("log_softmax", x), np.log(ref), rtol=1.2e-7,
                               atol=1.5e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_short_rows_that_follow_each_other_run_in_groups(op, dtype):
    """Rows of at most JOIN_ROW elements that follow each other in x and the output run in
    groups of up to JOIN_ELEMENTS elements (their maxima spread over a scratch, one exp loop
    over the group): rows on both sides of JOIN_ROW, groups that end inside a work item,
    special values that stay in their own row of a group, and rows that do not follow each
    other (gaps between rows, an out= view with gaps: one row at a time) give the
    reference."""
    from dynshape_kernels.cpu.rowwise import JOIN_ELEMENTS, JOIN_ROW
    rng = np.random.default_rng(9)
    ref = ref_softmax if op == "softmax" else ref_log_softmax
    for n in (1, 7, 77, JOIN_ROW - 1, JOIN_ROW, JOIN_ROW + 1):
        x = (rng.standard_normal((3 * JOIN_ELEMENTS // n + 5, n)) * 4).astype(dtype)
        x[2, -1] = np.nan                   # a NaN row, next to finite ones
        x[5, :] = -np.inf                   # a row of -inf (NaN in every element)
        x[7, 0] = np.inf
        x[8, 0] = dtype(1e30)               # a huge value: the other elements' exp is 0
        wide = (rng.standard_normal((x.shape[0], n + 5)) * 4).astype(dtype)
        buf = np.full((x.shape[0], n + 9), 7.0, dtype)
        with np.errstate(all="ignore"):
            for v, out in ((x, None), (wide[:, 2:2 + n], None), (x, buf[:, 4:4 + n])):
                got = dynshape.run(op, v, out=out)
                want = ref(v, -1)
                assert np.array_equal(np.isnan(got), np.isnan(want)), (op, n)
                tol = 2e-5 if dtype == np.float32 else 1e-12
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
        assert (buf[:, :4] == 7).all() and (buf[:, 4 + n:] == 7).all()     # gaps untouched


def test_large_rows_and_middle_axis():
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((7, 3001)) * 5).astype(np.float32)
    _close(dynshape.run("softmax", logits), ref_softmax(logits, -1), np.float32)
    _close(dynshape.run("log_softmax", logits), ref_log_softmax(logits, -1), np.float32)
    x = rng.standard_normal((4, 700, 33)).astype(np.float32)
    for v in (x, x[:, ::-1], x.transpose(2, 1, 0)):
        for axis in (0, 1, 2):
            _close(dynshape.run("softmax", v, axis=axis), ref_softmax(v, axis), np.float32)
        _close(dynshape.run("layer_norm", v, axis=1), ref_layer_norm(v, axis=1), np.float32)
    h = rng.standard_normal((50, 768)).astype(np.float64) + 100.0    # large mean
    w = rng.standard_normal(768)
    b = rng.standard_normal(768)
    _close(dynshape.run("layer_norm", h, w, b), ref_layer_norm(h, w, b), np.float64)
    _close(dynshape.run("rms_norm", h, w, epsilon=1e-6), ref_rms_norm(h, w, eps=1e-6),
           np.float64)


def test_special_values():
    """Every row compared in full (NaN where the float64 reference is NaN, equal values
    elsewhere): infinities, NaN, a row of -inf, huge finite values."""
    x = np.array([[0.0, -np.inf, 1.0], [np.nan, 1.0, 2.0], [np.inf, 1.0, 0.0],
                  [-np.inf, -np.inf, -np.inf], [1e30, -1e30, 0.0], [np.inf, -np.inf, 3.0]],
                 np.float32)
    with np.errstate(all="ignore"):
        for op, ref in (("softmax", ref_softmax), ("log_softmax", ref_log_softmax)):
            got = dynshape.run(op, x)
            want = ref(x, -1).astype(np.float32)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=op)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, equal_nan=True,
                                       err_msg=op)


def test_in_place_softmax_is_one_call(driver_calls):
    x = np.random.default_rng(4).standard_normal((33, 65)).astype(np.float32)
    expect = ref_softmax(x, -1)
    before = len(driver_calls)
    dynshape.run("softmax", x, out=x)
    assert len(driver_calls) - before == 1
    _close(x, expect, np.float32)


def test_errors():
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(dynshape.OpAttributeError, match="accepted: -3..2"):
        dynshape.run("softmax", x, axis=3)
    with pytest.raises(dynshape.OpAttributeError, match="single integer"):
        dynshape.run("softmax", x, axis=(1, 2))
    with pytest.raises(dynshape.OpAttributeError, match="unknown attribute"):
        dynshape.run("softmax", x, dim=1)
    with pytest.raises(dynshape.DtypeError, match="float32, float64, float16, bfloat16"):
        dynshape.run("layer_norm", x.astype(np.int32))
    with pytest.raises(dynshape.ShapeError, match=r"expected the normalized shape \(3, 4\)"):
        dynshape.run("layer_norm", x, np.ones(3, np.float32), axis=1)
    with pytest.raises(dynshape.ShapeError, match=r"bias has shape \(5,\)"):
        dynshape.run("layer_norm", x, None, np.ones(5, np.float32))
    with pytest.raises(dynshape.ArgumentError):
        dynshape.run("rms_norm", x, x, x)
    with pytest.raises(dynshape.ShapeError):
        dynshape.run("softmax", x, out=np.zeros((2, 3), np.float32))
    with pytest.raises(dynshape.OpAttributeError, match="epsilon"):
        dynshape.run("layer_norm", x, epsilon="big")


def test_no_compilation_for_new_shapes():
    rng = np.random.default_rng(5)
    for dt in ("float32", "float64"):
        dynshape.run("softmax", rng.standard_normal((3, 4)).astype(dt))
    with testing.count_compilations() as c:
        for shape in ((5, 17), (2, 3, 1000), (9,), (4, 1, 6, 2)):
            for dt in ("float32", "float64"):
                x = rng.standard_normal(shape).astype(dt)
                w = np.ones(shape[-1], dt)
                for axis in (0, -1):
                    dynshape.run("softmax", x[..., ::-1], axis=axis)
                    dynshape.run("log_softmax", x, axis=axis)
                dynshape.run("layer_norm", x, w, w)
                dynshape.run("rms_norm", x.T, axis=0)
    assert c.count == 0, c.functions


@settings(max_examples=30)
@given(st.sampled_from([((77, 30522), -1), ((4096, 768), -1), ((3, 500, 64), 1),
                        ((2, 9, 5, 7), 2), ((1, 5), 0)]),
       st.sampled_from(["softmax", "layer_norm"]), st.data())
def test_tables_cover_rows_once(case, op, data):
    shape, axis = case
    fam = CATALOG.families["rowwise"]
    assert TailMode.OVERLAP not in fam.tail_modes
    t = dynshape.explain(op, shape, axis=axis)
    assert not (t.entries[:, 1:3] == OVERLAP).any()
    assert (testing.check_coverage(t, t.shape) == 1).all()
    (lo0, hi0), (lo1, hi1) = t.bucket
    m = data.draw(st.integers(lo0 + 1, hi0))
    n = data.draw(st.integers(lo1 + 1, hi1))
    assert (testing.check_coverage(t, (m, n)) == 1).all()


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("centre", [1.0, 10.0, -7.3, 1000.0])
def test_layer_norm_of_rows_with_a_large_mean(centre, transposed):
    """float32 rows whose mean is large against their spread: the deviations keep the
    float64 mean (found by the property test: the mean rounded to float32 first gave 1e-4
    relative errors for a spread of 1e-3 around 10)."""
    rng = np.random.default_rng(3)
    x = (centre + 1e-3 * rng.standard_normal((40, 2))).astype(np.float32)
    if transposed:
        x = np.ascontiguousarray(x.T).T          # rows along a strided axis (column walk)
    _close(dynshape.run("layer_norm", x), ref_layer_norm(x), np.float32)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm", "rms_norm"])
def test_both_sides_of_the_serial_threshold(op):
    """Calls reading fewer than SERIAL_ROW_READS elements run on the calling thread, larger
    ones on the thread pool; rows that are one contiguous run take the short path, others
    (strided, several normalized axes) the general one. Every combination agrees with
    NumPy."""
    from dynshape_kernels.cpu.reduce_runs import SERIAL_ROW_READS
    rng = np.random.default_rng(3)
    for n in (SERIAL_ROW_READS // 64 - 1, SERIAL_ROW_READS // 64 + 1, 8 * SERIAL_ROW_READS // 64):
        x = (rng.standard_normal((n, 64)) * 3).astype(np.float32)
        w = rng.standard_normal(64).astype(np.float32)
        b = rng.standard_normal(64).astype(np.float32)
        x3 = x.reshape(n, 8, 8)
        for v, axis in ((x, -1), (x[:, ::-1], -1), (x.T.copy().T, -1), (x3, 1)):
            if op in ("softmax", "log_softmax") and v.ndim == 3:
                continue                   # one axis only: (n, 8, 8) over axis 1 is columns
            ref = {"softmax": lambda: ref_softmax(v, axis),
                   "log_softmax": lambda: ref_log_softmax(v, axis),
                   "layer_norm": lambda: ref_layer_norm(v, w.reshape(v.shape[1:]),
                                                        b.reshape(v.shape[1:]), axis),
                   "rms_norm": lambda: ref_rms_norm(v, w.reshape(v.shape[1:]), axis)}[op]()
            args = {"layer_norm": (w.reshape(v.shape[1:]), b.reshape(v.shape[1:])),
                    "rms_norm": (w.reshape(v.shape[1:]),)}.get(op, ())
            out = np.full(v.shape, np.nan, np.float32)
            dynshape.run(op, v, *args, axis=axis, out=out)
            _close(out, ref, np.float32)
