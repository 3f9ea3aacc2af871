"""Reductions (sum, mean, max, min, argmax, argmin) against NumPy, their tables and errors."""
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dynshape
from dynshape import testing
from dynshape.tables.bucket import bucket
from dynshape.planning.walk import WalkTiling
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.common_area import STRAT_COLUMNS, STRAT_LANES
from dynshape_kernels.abi.tail_mode import OVERLAP, TailMode

from oracles import ulps

DTYPES = ("float32", "float64", "int32", "int64")
OPS = ("sum", "mean", "max", "min", "argmax", "argmin")

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture(scope="module", autouse=True)
def _warm():
    dynshape.warm(["reduce"])


def _reference(op, x, axis, keepdims):
    if op.startswith("arg"):
        return getattr(np, op)(x, axis=axis, keepdims=keepdims)
    if op in ("sum", "mean") and x.dtype.kind == "f":
        # exact-ish float64 reference; dynshape accumulates float32 in float64
        r = getattr(np, op)(x.astype(np.float64), axis=axis, keepdims=keepdims)
        return np.asarray(r).astype(x.dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return getattr(np, op)(x, axis=axis, keepdims=keepdims)


def _check(op, x, axis, keepdims, res):
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            np_res = np.asarray(getattr(np, op)(x, axis=axis, keepdims=keepdims))
    res = np.asarray(res)
    assert res.dtype == np_res.dtype, (res.dtype, np_res.dtype)
    assert res.shape == np_res.shape
    ref = np.asarray(_reference(op, x, axis, keepdims))
    if op in ("sum", "mean") and x.dtype.kind == "f":
        # documented bound: float64 accumulation, at most count/16+16 roundings of sum|x|
        ax = tuple(range(x.ndim)) if axis is None else axis
        scale = np.abs(x.astype(np.float64)).sum(axis=ax, keepdims=keepdims)
        if op == "mean":
            scale = scale / max(1, int(np.prod([x.shape[a] for a in np.atleast_1d(ax)])))
        eps = float(np.finfo(x.dtype).eps)
        r64, ref64 = res.astype(np.float64), ref.astype(np.float64)
        nan = np.isnan(ref64)
        assert (np.isnan(r64) == nan).all()
        bound = 2 * eps * np.abs(ref64) + 64 * eps * scale
        assert (np.abs(r64 - ref64)[~nan] <= bound[~nan]).all(), (res, ref)
    else:
        np.testing.assert_array_equal(res, ref)


@st.composite
def cases(draw, ops=OPS, dtypes=DTYPES):
    op = draw(st.sampled_from(ops))
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(testing.shapes(max_rank=5, max_side=9))
    x = draw(testing.views(shape, dtype=dtype))
    if not dtype.startswith("int") and x.size and draw(st.integers(0, 5)) == 0:
        x = x.copy()
        flat = x.reshape(-1)
        for _ in range(draw(st.integers(1, 3))):
            flat[draw(st.integers(0, x.size - 1))] = np.nan
    if op.startswith("arg"):
        axis = draw(st.one_of(st.none(), st.integers(-max(x.ndim, 1), max(x.ndim - 1, 0))))
    else:
        axis = draw(st.one_of(
            st.none(),
            st.integers(-max(x.ndim, 1), max(x.ndim - 1, 0)),
            st.lists(st.integers(0, max(x.ndim - 1, 0)), unique=True,
                     max_size=x.ndim).map(tuple)))
    if x.ndim == 0 and axis is not None and not isinstance(axis, tuple):
        axis = None
    keepdims = draw(st.booleans())
    return op, x, axis, keepdims


def _empty_error(op, x, axis):
    axes = range(x.ndim) if axis is None else np.atleast_1d(axis)
    count = int(np.prod([x.shape[a] for a in axes])) if x.ndim else 1
    if count:
        return False
    return op in ("max", "min", "argmax", "argmin")


@settings(max_examples=150)
@given(cases())
def test_matches_numpy(case):
    op, x, axis, keepdims = case
    if _empty_error(op, x, axis):
        with pytest.raises(ValueError):
            dynshape.run(op, x, axis=axis, keepdims=keepdims)
        return
    res = dynshape.run(op, x, axis=axis, keepdims=keepdims)
    _check(op, x, axis, keepdims, res)


@settings(max_examples=80)
@given(cases(dtypes=("float16", "bfloat16")), st.booleans())
def test_half_precision_rounds_the_float64_result_once(case, strided_out):
    """float16/bfloat16: max, min and the arg ops are exact; sums and means are the float64
    result rounded once to the format (1 ulp allowed where the float64 sums of the reference
    and the kernels differ in their own rounding, bounded as for float64 by ``scale``)."""
    op, x, axis, keepdims = case
    if _empty_error(op, x, axis):
        with pytest.raises(ValueError):
            dynshape.run(op, x, axis=axis, keepdims=keepdims)
        return
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        ref = np.asarray(getattr(np, op)(x64, axis=axis, keepdims=keepdims))
    out = None
    if strided_out and ref.ndim:
        dt = np.int64 if op.startswith("arg") else x.dtype
        big = np.zeros(tuple(2 * n for n in ref.shape), dtype=dt)
        out = big[tuple(slice(None, None, -2) for _ in ref.shape)]
    res = dynshape.run(op, x, axis=axis, keepdims=keepdims, out=out)
    assert out is None or res is out
    res = np.asarray(res)
    if op.startswith("arg"):
        assert res.dtype == np.int64
        np.testing.assert_array_equal(res, ref)
        return
    assert res.dtype == x.dtype and res.shape == ref.shape
    if op in ("max", "min"):
        assert ulps(res, ref.astype(x.dtype)) == 0
        return
    ax = tuple(range(x.ndim)) if axis is None else axis
    scale = np.abs(x64).sum(axis=ax, keepdims=keepdims)
    if op == "mean":
        scale = scale / max(1, int(np.prod([x.shape[a] for a in np.atleast_1d(ax)])))
    assert ulps(res, ref.astype(x.dtype), atol=64 * 2.0 ** -53 * scale) <= 1


def test_half_precision_sums_round_once_not_through_float32():
    """The exact float64 sum 1 + ulp/2 + 2**-24 of these float16 values lies just above a
    float16 tie, so it rounds up; rounded to float32 first it would become the tie itself and
    round to even (down)."""
    ulp = float(np.spacing(np.float16(1.0)))
    v = np.array([1.0, ulp / 2, 2.0 ** -24], np.float16)
    assert np.float16(np.float32(1.0 + ulp / 2 + 2.0 ** -24)) == np.float16(1.0)
    assert dynshape.run("sum", v) == np.float16(1.0 + ulp)
    assert dynshape.run("sum", v[::-1].reshape(1, 3), axis=1)[0] == np.float16(1.0 + ulp)
    assert dynshape.run("mean", np.tile(v, (2, 1)), axis=1)[0] == \
        np.float16((1.0 + ulp / 2 + 2.0 ** -24) / 3)


@settings(max_examples=40)
@given(cases(), st.booleans())
def test_out(driver_calls, case, strided_out):
    op, x, axis, keepdims = case
    assume(not _empty_error(op, x, axis))
    expect = np.asarray(dynshape.run(op, x, axis=axis, keepdims=keepdims))
    if strided_out:
        big = np.zeros(tuple(2 * n for n in expect.shape), dtype=expect.dtype)
        out = big[tuple(slice(None, None, -2) for _ in expect.shape) + (Ellipsis,)]
    else:
        out = np.empty_like(expect)
    before = len(driver_calls)
    r = dynshape.run(op, x, axis=axis, keepdims=keepdims, out=out)
    assert r is out
    assert len(driver_calls) - before == (1 if out.size else 0)
    np.testing.assert_array_equal(out, expect)


def test_middle_axis_and_transposed_in_place():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 300, 130)).astype(np.float32)
    for v in (x, x.transpose(2, 0, 1), x[:, ::-3, ::2]):
        for axis in (0, 1, 2, (0, 2), (1, 2), (0, 1)):
            for op in ("sum", "max", "min", "mean"):
                _check(op, v, axis, False, dynshape.run(op, v, axis=axis))
        for axis in (0, 1, 2, None):
            for op in ("argmax", "argmin"):
                _check(op, v, axis, False, dynshape.run(op, v, axis=axis))


def test_long_rows_lanes_and_nan_rules():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 5000)).astype(np.float64)
    x[1, 777] = np.nan
    x[1, 4000] = np.nan
    x[2, :] = 1.0            # ties: first occurrence
    for op in ("max", "min", "argmax", "argmin", "sum"):
        _check(op, x, 1, False, dynshape.run(op, x, axis=1))
    assert dynshape.run("argmax", x, axis=1)[1] == 777
    assert dynshape.run("argmin", x, axis=1)[2] == 0


@given(n=st.integers(2, 2100), dtype=st.sampled_from(("float32", "float64", "float16")),
       kind=st.sampled_from(("plain", "nan", "zeros")), seed=st.integers(0, 2**16))
def test_row_extremes_nan_anywhere_and_signed_zeros(n, dtype, kind, seed):
    """Rows of any length take one vectorized pass of maxnum/minnum promised no NaN and no
    signed-zero order, with a NaN flag beside it: the extreme of every row, a NaN anywhere
    (the vector body, its remainder) gives NaN, a zero extreme has IEEE maximum/minimum's
    sign (max of -0 and +0 is +0, min is -0) in any position, and argmax/argmin (that pass,
    then a search) give NumPy's index."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, n)).astype(dtype)
    if kind == "nan":
        x[0, rng.integers(n)] = np.nan
    elif kind == "zeros":
        x[0] = -np.abs(x[0]) - 1            # max of row 0: a zero; min of row 1: a zero
        x[1] = np.abs(x[1]) + 1
        i, j = rng.choice(n, 2, replace=False)
        x[0, i], x[0, j] = -0.0, 0.0
        x[1, i], x[1, j] = 0.0, -0.0
    mx = dynshape.run("max", x, axis=1)
    mn = dynshape.run("min", x, axis=1)
    # arg-extremes find the extreme by the same pass, then its first occurrence: NumPy's
    # index in every case (the first NaN; the first zero of either sign, as -0 == +0)
    np.testing.assert_array_equal(dynshape.run("argmax", x, axis=1), x.argmax(axis=1))
    np.testing.assert_array_equal(dynshape.run("argmin", x, axis=1), x.argmin(axis=1))
    if kind == "nan":
        assert np.isnan(mx[0]) and np.isnan(mn[0])
        assert mx[1] == x[1].max() and mn[1] == x[1].min()
    elif kind == "zeros":
        assert mx[0] == 0 and not np.signbit(mx[0])
        assert mn[1] == 0 and np.signbit(mn[1])
        assert mn[0] == x[0].min() and mx[1] == x[1].max()
        assert dynshape.run("argmax", x[0]) == min(i, j)
    else:
        np.testing.assert_array_equal(mx, x.max(axis=1))
        np.testing.assert_array_equal(mn, x.min(axis=1))


def test_scalar_results_and_dtypes():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    r = dynshape.run("sum", x)
    assert isinstance(r, np.int64) and r == 66
    assert dynshape.run("mean", x).dtype == np.float64
    assert dynshape.run("argmax", x) == 11
    assert dynshape.run("max", x, axis=0).dtype == np.int32
    z = np.zeros((0, 3), np.float32)
    assert dynshape.run("sum", z, axis=0).tolist() == [0, 0, 0]
    assert np.isnan(dynshape.run("mean", z, axis=0)).all()
    assert dynshape.run("max", z, axis=1).shape == (0,)
    with pytest.raises(ValueError):
        dynshape.run("max", z, axis=0)
    with pytest.raises(ValueError):
        dynshape.run("argmax", z, axis=0)
    b = np.broadcast_to(np.arange(3.0), (5, 3))      # zero strides in a reduced axis
    np.testing.assert_array_equal(dynshape.run("sum", b, axis=0), b.sum(axis=0))


def test_out_aliasing_input():
    x = np.arange(24, dtype=np.float64).reshape(4, 6)
    expect = x.sum(axis=1)
    out = x[:, 0]                     # partially overlaps the input
    dynshape.run("sum", x, axis=1, out=out)
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("bad, msg", [
    (dict(axis=2), "accepted: -2..1"),
    (dict(axis=(0, 0)), "duplicate"),
    (dict(axis=(0, -2)), "duplicate"),
    (dict(axis=1.5), "integer"),
    (dict(keepdims=1), "keepdims"),
    (dict(axes=0), "unknown attribute"),
])
def test_errors(bad, msg):
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(dynshape.OpAttributeError, match=msg):
        dynshape.run("sum", x, **bad)


def test_more_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(dynshape.OpAttributeError, match="single integer"):
        dynshape.run("argmax", x, axis=(0, 1))
    with pytest.raises(dynshape.DtypeError,
                       match="float32, float64, int32, int64, float16, bfloat16"):
        dynshape.run("sum", x.astype(np.int16))
    with pytest.raises(dynshape.ShapeError):
        dynshape.run("sum", x, axis=0, out=np.zeros(2, np.float32))
    with pytest.raises(dynshape.DtypeError):
        dynshape.run("sum", x.astype(np.int32), axis=0, out=np.zeros(3, np.int32))
    with pytest.raises(dynshape.ArgumentError):
        dynshape.run("sum", x, x)


def test_no_compilation_for_new_shapes():
    rng = np.random.default_rng(3)
    for dt in DTYPES:                  # warm: tables and every driver path
        dynshape.run("sum", rng.standard_normal((3, 4)).astype(dt), axis=0)
    with testing.count_compilations() as c:
        # (300, 200) whole: past the serial threshold, the split into parts (reduce_split)
        for shape, axis in (((17, 3, 5), 1), ((2, 999), -1), ((7, 6, 5, 4), (0, 2)),
                            ((40,), None), ((300, 200), None)):
            for dt in DTYPES:
                x = (rng.standard_normal(shape) * 10).astype(dt)
                for op in OPS:
                    if op.startswith("arg") and isinstance(axis, tuple):
                        continue
                    dynshape.run(op, x[..., ::-1], axis=axis)
    assert c.count == 0, c.functions


# ---- tables --------------------------------------------------------------------------------
@settings(max_examples=60)
@given(st.integers(1, 300), st.integers(1, 5000), st.integers(1, 4),
       st.sampled_from([STRAT_LANES, STRAT_COLUMNS]), st.integers(0, 10**6),
       st.sampled_from(["simplified", "optimized"]), st.data())
def test_tables_cover_every_output_once(m, n, n_outer, strategy, count, variant, data):
    fam = CATALOG.families["reduce"]
    assert TailMode.OVERLAP not in fam.tail_modes
    bk = (bucket(m, fam.quanta[0]), bucket(n, fam.quanta[1]))
    tiling = WalkTiling(CATALOG, "reduce", "sum", "float32", bk, (m, n), n_outer, False,
                        fam.tail_modes, count=count, strategy=strategy)
    comb = tiling.simplified() if variant == "simplified" else tiling.optimized()
    t = dynshape.ParamTable("reduce", "sum", "float32", "cpu", CATALOG.hash, bk, comb.entries,
                            np.zeros(0), 2, CATALOG.family_base("reduce", "float32"), 0,
                            comb.variant, comb.cost, comb.description, (m, n))
    assert not (t.entries[:, 1:3] == OVERLAP).any()
    (lo0, hi0), (lo1, hi1) = bk
    mm = data.draw(st.integers(lo0 + 1, hi0))
    nn = data.draw(st.integers(lo1 + 1, hi1))
    counts = testing.check_coverage(t, (mm, nn))
    assert (counts == 1).all()


def test_explained_tables_cover_once_and_offer_choices():
    seen = set()
    for shape, axis in (((64, 513, 1027), 1), ((64, 513, 1027), -1), ((77, 30522), 0),
                        ((5, 3), None), ((1000, 3), 0), ((8, 100000), -1), ((77, 3000), -1)):
        t = dynshape.explain("sum", shape, axis=axis)
        m, n = t.shape
        assert (testing.check_coverage(t, (m, n)) == 1).all()
        seen.add(tuple(sorted({CATALOG[int(k)].tile for k in t.entries[:, 0]})))
    assert len(seen) > 1        # the optimized combination really chooses between tiles


@pytest.mark.parametrize("op", ["sum", "max", "argmin"])
def test_both_sides_of_the_serial_threshold(op):
    """Calls reading fewer than SERIAL_READS elements run on the calling thread, larger ones
    on the thread pool (cyclic chunks): both agree with NumPy, rows and columns."""
    from dynshape_kernels.cpu.reduce_runs import SERIAL_READS
    rng = np.random.default_rng(5)
    for n in (SERIAL_READS // 96 - 1, SERIAL_READS // 96 + 1, 4 * SERIAL_READS // 96):
        x = rng.standard_normal((n, 96)).astype(np.float32)
        for v in (x, x[::-1, ::2], x.T):
            for axis in (0, 1):
                _check(op, v, axis, False, dynshape.run(op, v, axis=axis))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_one_run_per_output_short_and_long(dtype):
    """Last-axis reductions whose rows are one contiguous run take the short path: a plain
    loop for sums of up to SHORT_SUM elements, max / min one vectorized pass inlined (a NaN
    or a zero result hands over to the exact loop). Every length around those limits and
    the vector loop's steps (16 and 64 float32 elements), NaN and infinities at every
    position class, ties, agree with NumPy."""
    from dynshape_kernels.cpu.reduce import SHORT_SUM
    rng = np.random.default_rng(9)
    for n in (1, 2, 3, 4, 5, 7, 8, 9, SHORT_SUM - 1, SHORT_SUM, SHORT_SUM + 1, 15, 16, 17,
              63, 64, 65, 127, 128, 129, 511, 512, 515):
        x = (rng.standard_normal((40, n)) * 100).astype(dtype)
        if dtype != "int32":
            x[1, 0] = np.nan
            x[2, n - 1] = np.nan
            x[5, :] = np.nan
        x[6, :] = x[6, 0]                       # ties: the first occurrence wins
        x[7, n // 3] = x[7].max()
        xi = x.copy()                           # infinities: extremes only (the sum oracle
        if dtype != "int32":                    # measures errors, inf - inf has none)
            xi[3, n // 2] = np.inf
            xi[4, n // 2] = -np.inf
        for op in ("sum", "mean", "max", "min", "argmax", "argmin"):
            if op == "mean" and dtype == "int32":
                continue
            v = x if op in ("sum", "mean") else xi
            _check(op, v, 1, False, dynshape.run(op, v, axis=1))
            _check(op, v[:, ::-1], 1, False, dynshape.run(op, v[:, ::-1], axis=1))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_columns_sums_add_in_order_bit_for_bit(dtype):
    """COLUMNS sums (a leading or middle reduced axis) add each column's elements one after
    the other in memory order of the reduced rows, as the module's accuracy contract says,
    even though the kernel takes four reduced rows per pass over the accumulators: the
    result equals a sequential float64 (int64) running sum rounded once, bit for bit. Run
    lengths around the four-row step, two reduced axes (several runs), a reversed view
    (added in memory order), strided columns (the per-row path), a transposed view."""
    rng = np.random.default_rng(14)
    acc = np.int64 if dtype == "int32" else np.float64
    for L in (1, 2, 3, 4, 5, 7, 8, 9, 255, 1000):
        x = (rng.standard_normal((L, 2, 77)) * 1000).astype(dtype)
        # (view, axis, its reduced rows in the order they are added)
        views = [(x, 0, x), (x, (0, 1), x.reshape(2 * L, 77)), (x[::-1], 0, x),
                 (x[:, :, ::2], 0, x[:, :, ::2]), (x.transpose(1, 0, 2), 1, x)]
        for v, axis, rows in views:
            got = dynshape.run("sum", v, axis=axis)
            assert got.dtype == _reference("sum", v, axis, False).dtype
            want = np.cumsum(rows.astype(acc), axis=0)[-1].astype(got.dtype)
            np.testing.assert_array_equal(got, want.reshape(got.shape),
                                          err_msg=f"L={L} axis={axis}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_columns_extremes_over_four_row_steps(dtype):
    """COLUMNS max / min take four reduced rows per pass: a NaN or an extreme in any of the
    four rows, or in the rows left over after the last full step, reaches its column."""
    rng = np.random.default_rng(15)
    for L in (1, 3, 4, 5, 8, 11):
        for r in range(L):
            x = rng.standard_normal((L, 3, 40)).astype(dtype)
            x[r, 0, 5] = np.nan
            x[r, 1, 7] = 1e30
            x[r, 2, 9] = -1e30
            for op in ("max", "min"):
                for v, axis in ((x, 0), (x, (0, 1)), (x.transpose(1, 0, 2), 1)):
                    with np.errstate(invalid="ignore"):
                        want = getattr(np, op)(v, axis=axis)
                    np.testing.assert_array_equal(dynshape.run(op, v, axis=axis), want,
                                                  err_msg=f"{op} L={L} row={r}")


def test_few_work_items_are_split_by_kept_columns():
    """One or three work items (a small kept plane: the 768 sums over axis 0 of 4096x768 are
    one entry) are split in two by kept columns so that both threads work; more stay whole."""
    from dynshape_kernels.cpu.reduce import PART_ALIGN, column_parts
    assert [int(column_parts(n)) for n in (1, 2, 3, 4, 5, 15, 64)] == [2, 1, 2, 1, 1, 1, 1]
    assert PART_ALIGN % 8 == 0      # parts start on whole float64 accumulator vectors
    x = np.zeros((4096, 768), np.float32)
    assert len(dynshape.explain("sum", x, axis=0).entries) == 1


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("cols", [17, 33, 257, 768, 1000])
@pytest.mark.parametrize("batch", [1, 3])
def test_split_work_items_give_the_whole_items_results(batch, cols, dtype):
    """Split items (see above) reduce every kept element once, in the same order: sums equal
    the sequential running sum bit for bit, extremes and arg-extremes find values placed on
    either side of the split (the first column of the second part, the last column)."""
    from dynshape_kernels.cpu.reduce import PART_ALIGN
    rng = np.random.default_rng(16)
    rows = max(64, 40000 // cols)                           # past the serial threshold
    x = (rng.standard_normal((batch, rows, cols)) * 1000).astype(dtype)
    half = -(-cols // 2)                                    # ceil(cols / 2)
    w = -(-half // PART_ALIGN) * PART_ALIGN                 # the second part's first column
    for c in {0, min(w, cols - 1), cols - 1}:
        x[:, rows // 2, c] = 10 ** 6
        x[:, rows // 3, c] = -10 ** 6
    acc = np.int64 if dtype == "int32" else np.float64
    got = dynshape.run("sum", x, axis=1)
    np.testing.assert_array_equal(got, np.cumsum(x.astype(acc), axis=1)[:, -1].astype(got.dtype))
    # into every other element of a wider buffer: each part writes its columns, nothing else
    buf = np.full((batch, 2 * cols + 3), -7, got.dtype)
    view = buf[:, 1:2 * cols + 1:2]
    dynshape.run("sum", x, axis=1, out=view)
    np.testing.assert_array_equal(view, got)
    gaps = np.ones(buf.shape, bool)
    gaps[:, 1:2 * cols + 1:2] = False
    assert (buf[gaps] == -7).all()
    for op in ("max", "min", "argmax", "argmin"):
        np.testing.assert_array_equal(dynshape.run(op, x, axis=1), getattr(np, op)(x, axis=1),
                                      err_msg=op)
    if dtype == "float32":
        x[:, 5, min(w, cols - 1)] = np.nan
        x[:, 7, cols - 1] = np.nan
        for op in ("max", "min"):
            with np.errstate(invalid="ignore"):
                want = getattr(np, op)(x, axis=1)
            np.testing.assert_array_equal(dynshape.run(op, x, axis=1), want, err_msg=op)


def test_one_output_calls_split_into_parts():
    """How many parts a reduction to one element is split into: one per PART_READS reduced
    elements, at least 2 and at most N_CHUNKS."""
    from dynshape_kernels.cpu import reduce_split
    from dynshape_kernels.cpu.reduce import _RB
    from dynshape_kernels.abi.common_area import R_COUNT
    common = np.zeros(_RB + R_COUNT + 1, np.int64)
    got = []
    for count in (1 << 15, 3 * reduce_split.PART_READS - 1, 10 ** 6, 10 ** 9):
        common[_RB + R_COUNT] = count
        got.append(int(reduce_split.parts(common, _RB)))
    assert got == [2, 2, 10 ** 6 // reduce_split.PART_READS, 64]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16"])
def test_reductions_to_one_element_split_between_threads(dtype):
    """A reduction to one element (x.sum(), x.argmax(): one work item) past the serial
    threshold is split into parts reduced on their own, their partials combined in part
    order (reduce_split): whole runs per part when there are as many runs as parts, else a
    slice of every run. Every op agrees with NumPy (extremes, arg-extremes and integer sums
    exactly, wrapping int64 sums included; float sums and means within the contract) on
    both kinds of split, contiguous, strided, reversed and transposed; into out= with
    keepdims. The arg ops' ties: the extreme placed in two parts against their order (a
    slice of every run puts flat index 99999 in the last part, 100000 in the first) and
    NaNs likewise give the smaller index."""
    rng = np.random.default_rng(21)
    # int64 sums wrap (2**60 x 3e5), as NumPy's; float16 sums stay finite
    big = {"int64": 2 ** 60, "float16": 1}.get(dtype, 1000)
    ops = [op for op in OPS if not (dtype == "int64" and op == "mean")]
    for shape in ((3, 100000), (1000, 700), (250000,), (41, 37, 29)):
        x = (rng.standard_normal(shape) * big).astype(dtype)
        views = [x, x[::-1], x.T]
        if x.ndim > 1:
            views.append(x[:, ::2])
        for v in views:
            for op in ops:
                _check(op, v, None, False, dynshape.run(op, v))
            kept = np.zeros((1,) * v.ndim, np.float64 if dtype == "int32" else dtype)
            if np.dtype(dtype).kind == "f":
                assert dynshape.run("mean", v, keepdims=True, out=kept) is kept
                _check("mean", v, None, True, kept)
    # the extreme at each part's first and last element (5 parts of a run of n)
    from dynshape_kernels.cpu.reduce_split import PART_READS
    n = 5 * PART_READS + 3
    y = rng.standard_normal(n).astype(dtype)
    edges = sorted({n * p // 5 for p in range(6)} | {n * p // 5 - 1 for p in range(1, 6)})
    for pos in edges[:-1] if edges[-1] == n else edges:
        z = y.copy()
        z[pos] = 100
        assert dynshape.run("max", z) == 100 and dynshape.run("argmax", z) == pos
        z[pos] = -100
        assert dynshape.run("min", z) == -100 and dynshape.run("argmin", z) == pos
    x = rng.standard_normal((3, 100000)).astype(dtype)
    hi = np.asarray(x.max() + 1).astype(dtype)
    x[0, 99999] = x[1, 0] = hi
    x[2, 5] = -hi
    assert dynshape.run("argmax", x) == 99999 and dynshape.run("argmin", x) == 200005
    assert dynshape.run("max", x) == hi
    if np.dtype(dtype).kind == "f":
        x[0, 99999] = x[1, 0] = np.nan
        assert dynshape.run("argmax", x) == 99999 and dynshape.run("argmin", x) == 99999
        assert np.isnan(dynshape.run("max", x)) and np.isnan(dynshape.run("sum", x))
        # zeros of both signs in different parts (4 parts of 2**14): max +0, min -0
        y = np.zeros(1 << 16, dtype)
        y[:20000] = -0.0
        assert not np.signbit(dynshape.run("max", y)) and np.signbit(dynshape.run("min", y))
        y[30000] = 1
        assert dynshape.run("argmax", y) == 30000 and dynshape.run("argmin", y) == 0


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_strided_runs_reduce_in_eight_lanes(dtype):
    """Sums, max and min over strided runs (a reduced axis walked with a step other than 1)
    keep 8 interleaved partial results (reduce_runs._sum_strided, _ext_strided): every run
    length around the lane count, its multiples and the 32-element switch of the extremes,
    forward and reversed, each element counted once (integer sums exactly, floats within
    the contract; the extreme and a NaN at every position of a run)."""
    rng = np.random.default_rng(22)
    for n in (1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 100):
        x = (rng.standard_normal((5, 3 * n)) * 1000).astype(dtype)
        for v in (x[:, ::3], x[:, ::-3]):
            for op in ("sum", "mean", "max", "min", "argmax"):
                _check(op, v, 1, False, dynshape.run(op, v, axis=1))
        for pos in range(n):
            y = x.copy()
            y[0, 3 * pos] = 10 ** 6
            y[1, 3 * pos] = -10 ** 6
            if dtype.startswith("float"):
                y[2, 3 * pos] = np.nan
            for op in ("max", "min"):
                v = y[:, ::3]
                _check(op, v, 1, False, dynshape.run(op, v, axis=1))


@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("view", ["contiguous", "reversed", "column_slice"])
def test_column_walks_that_prefetch_match_numpy(dtype, view):
    """Inputs of at least ``AHEAD_MIN_BYTES`` take the column walks that prefetch the rows
    ahead (``cpu.reduce``): the results are NumPy's (bit for bit for max, min and integer
    sums), on a walk backwards (a reversed reduced axis: the rows ahead lie below) and on
    tiles that cover part of each row."""
    from dynshape_kernels.cpu.reduce import AHEAD_MIN_BYTES
    rng = np.random.default_rng(7)
    itemsize = np.dtype(dtype).itemsize
    cols = 67
    rows = 251
    batch = AHEAD_MIN_BYTES // (rows * cols * itemsize) + 1
    full = (rng.standard_normal((batch, rows, cols)) * 100).astype(dtype)
    assert full.nbytes >= AHEAD_MIN_BYTES
    x = {"contiguous": full, "reversed": full[:, ::-1, :],
         "column_slice": full[:, :, 3:64]}[view]
    for op in ("sum", "max", "min"):
        got = dynshape.run(op, x, axis=1)
        want = _reference(op, x, 1, False)
        if op == "sum" and dtype == "float32":
            np.testing.assert_allclose(got, want, rtol=2e-7, atol=1e-4)
        else:
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_runs_that_prefetch_match_numpy(dtype):
    """Inputs of at least ``RUN_AHEAD_MIN_BYTES`` sum and take the extremes of their
    contiguous runs block by block, prefetching ahead (``reduce_runs.sum_run``,
    ``ext_run_ahead``): rows of several blocks and a partial one, tiles over part of each
    row, one output of the whole input (split between the threads), a NaN in a block and in
    the partial block, and zero results whose sign the exact fallback orders. Float32 sums
    stay within the documented 1 ulp of the float64 sum."""
    from dynshape_kernels.cpu.reduce_runs import RUN_AHEAD_MIN_BYTES, RUN_BLOCK_BYTES
    rng = np.random.default_rng(11)
    itemsize = np.dtype(dtype).itemsize
    cols = 3 * (RUN_BLOCK_BYTES // itemsize) + 37
    rows = RUN_AHEAD_MIN_BYTES // (cols * itemsize) + 10
    full = (rng.standard_normal((rows, cols)) * 100).astype(dtype)
    assert full.nbytes >= RUN_AHEAD_MIN_BYTES
    if dtype != "int64":
        full[3, RUN_BLOCK_BYTES // itemsize + 5] = np.nan        # in a whole block
        full[4, cols - 2] = np.nan                                # in the partial block
        full[5] = 0.0
        full[5, 1::7] = -0.0                                      # max +0.0, min -0.0
        full[6] = -0.0
    full[7, cols - 1] = 10 ** 6                                   # extremes in the tail
    full[8, cols - 1] = -10 ** 6
    for x in (full, full[:, 5:-3]):
        for op in ("sum", "mean", "max", "min"):
            got = dynshape.run(op, x, axis=1)
            _check(op, x, 1, False, got)
            if op in ("max", "min") and dtype != "int64":
                # IEEE maximum / minimum: +0.0 above -0.0 (NumPy's own order varies)
                zero = (got == 0)
                neg = np.signbit(x) & (x == 0)
                want = neg.any(axis=1) if op == "min" else (neg | (x != 0)).all(axis=1)
                assert zero[5] and zero[6]
                assert (np.signbit(got) == want)[zero].all()
        if dtype == "float32":
            exact = x.astype(np.float64).sum(axis=1)
            got = dynshape.run("sum", x, axis=1).astype(np.float64)
            ok = ~np.isnan(exact)
            bound = (np.spacing(np.abs(exact.astype(np.float32))).astype(np.float64)
                     + cols * 2.0 ** -53 * np.abs(x.astype(np.float64)).sum(axis=1))
            assert (np.abs(got - exact)[ok] <= bound[ok]).all()
    flat = full[9:].ravel()                        # no NaN: one output, split in parts
    assert flat.nbytes >= RUN_AHEAD_MIN_BYTES
    for op in ("sum", "max", "min"):
        _check(op, flat, 0, False, dynshape.run(op, flat, axis=0))
