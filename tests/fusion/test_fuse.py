"""Fused sequences (dynshape.fuse): results equal running the steps one by one with
dynshape.run, any chain runs without compiling, no full-size intermediate is allocated, and
bad steps or calls raise clear errors."""
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dynshape
from dynshape import (ArgumentError, DtypeError, OpAttributeError, ShapeError, UnknownOpError,
                      testing)
from dynshape.fusion.run import FusedTable
from dynshape.ops import as_dtype

from oracles import ulps

FLOAT_UNARY = [("relu",), ("abs",), ("neg",), ("exp",), ("log",), ("sqrt",), ("reciprocal",),
               ("sigmoid",), ("tanh",), ("silu",), ("gelu",),
               ("gelu", {"approximate": "tanh"}), ("leaky_relu", {"alpha": 0.2}),
               ("clip", {"min": -1.5, "max": 2.0})]
INT_UNARY = [("relu",), ("abs",), ("neg",), ("clip", {"min": -20, "max": 30})]
FLOAT_BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum"]
INT_BINARY = ["add", "sub", "mul", "maximum", "minimum"]
SIDES = ("a", "b", "c", "d")
TOL = {"float32": dict(rtol=2e-5, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-13),
       "int32": dict(rtol=0, atol=0), "int64": dict(rtol=0, atol=0)}


# ---- reference: the steps one by one with dynshape.run -----------------------------------
def reference(steps, x, sides):
    v = x
    with np.errstate(all="ignore"):
        for raw in steps:
            name, rest = (raw, ()) if isinstance(raw, str) else (raw[0], tuple(raw[1:]))
            attrs = dict(rest[-1]) if rest and isinstance(rest[-1], dict) else {}
            rest = rest[:-1] if attrs else rest
            if name in ("softmax", "log_softmax"):
                v = dynshape.run(name, v, axis=-1)
            elif name in ("layer_norm", "rms_norm"):
                w, b = attrs.pop("weight", None), attrs.pop("bias", None)
                v = dynshape.run(name, v, **attrs)
                if w is not None:
                    v = dynshape.run("mul", v, sides[w])
                if b is not None:
                    v = dynshape.run("add", v, sides[b])
            elif name in ("sum", "mean", "max", "min"):
                v = dynshape.run(name, v, **attrs)
            elif not rest:
                v = dynshape.run(name, v, **attrs)
            else:
                ops = rest if len(rest) == 2 else ("_", rest[0])
                a, b = (v if o == "_" else sides[o] if isinstance(o, str) else o for o in ops)
                v = dynshape.run(name, a, b)
    return v


def reduction_scale(steps, x, sides):
    """Per output element, the condition scale of a trailing sum or mean: the same reduction
    of |input| (in float64). A sum's rounding error depends on the order of the additions and
    is bounded relative to sum|v|, not to the (possibly cancelled) sum itself; max and min
    return one of their inputs, so their error is relative to the result alone (scale 0)."""
    name, attrs = steps[-1]
    if name not in ("sum", "mean"):
        return 0.0
    pre = np.asarray(reference(steps[:-1], x, sides), dtype=np.float64)
    red = np.sum if name == "sum" else np.mean
    with np.errstate(all="ignore"):
        scale = red(np.abs(pre), axis=attrs.get("axis"), keepdims=attrs.get("keepdims", False))
    return np.nan_to_num(scale, nan=0.0)


def assert_matches(got, ref, dtype, reduce_scale=None):
    """Elementwise |got - ref| <= atol + rtol * (|ref| + reduce_scale); NaN where the
    reference is NaN and the same infinities."""
    assert got.dtype == ref.dtype and got.shape == ref.shape
    tol = TOL[dtype]
    if reduce_scale is None or not tol["rtol"]:
        np.testing.assert_allclose(got, ref, equal_nan=True, **tol)
        return
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    finite = np.isfinite(r)
    np.testing.assert_array_equal(g[~finite], r[~finite])
    allowed = tol["atol"] + tol["rtol"] * (np.abs(r) + np.broadcast_to(reduce_scale, r.shape))
    with np.errstate(invalid="ignore"):
        bad = finite & ~(np.abs(g - r) <= allowed)
    assert not bad.any(), (f"{int(bad.sum())} of {r.size} elements off: got {g[bad][:5]}, "
                           f"want {r[bad][:5]}, allowed {allowed[bad][:5]}")


def rounding_spread(chain, y, scale, sides, ulps=4):
    """(reference, spread): the chain run on its input ``y`` (the lead op's output, float),
    and per element how far that result moves when ``y`` moves by ``ulps`` units of its
    rounding either way (``eps * scale``, ``scale`` the lead op's sum of |terms|: the bound
    of its rounding in any order); inf where it turns NaN or infinite. A lead op that sums in
    another order (a fused conv's tiles and K blocks against the plain conv's) may land
    anywhere in that range: sqrt of a value that cancelled to nearly 0, say (conv output
    2.25e-7: sqrt 0.000474 against 0.000477)."""
    ref = np.asarray(reference(chain, y, sides))
    d = ulps * np.finfo(y.dtype).eps * np.asarray(scale, np.float64)
    spread = np.zeros(ref.shape)
    r = ref.astype(np.float64)
    for nudged in ((y - d).astype(y.dtype), (y + d).astype(y.dtype)):
        v = np.asarray(reference(chain, nudged, sides), np.float64)
        with np.errstate(invalid="ignore"):
            diff = np.where((v == r) | (np.isnan(v) & np.isnan(r)), 0.0, np.abs(v - r))
        spread = np.maximum(spread, np.where(np.isnan(diff), np.inf, diff))
    return ref, spread


def assert_within_spread(got, ref, spread, dtype):
    """assert_matches with each element's tolerance widened by its rounding spread; the
    elements of unbounded spread (next to a NaN or an overflow) are not compared, and must
    stay rare, or the test would compare nothing."""
    assert got.dtype == ref.dtype and got.shape == ref.shape
    free = np.isinf(spread)
    assert free.sum() <= max(1, 0.01 * free.size), f"{int(free.sum())} of {free.size} unbounded"
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    finite = np.isfinite(r)
    np.testing.assert_array_equal(g[~finite & ~free], r[~finite & ~free])
    tol = TOL[dtype]
    allowed = tol["atol"] + tol["rtol"] * np.abs(r) + spread
    with np.errstate(invalid="ignore"):
        bad = finite & ~free & ~(np.abs(g - r) <= allowed)
    assert not bad.any(), (f"{int(bad.sum())} of {r.size} elements off: got {g[bad][:5]}, "
                           f"want {r[bad][:5]}, allowed {allowed[bad][:5]}")


# ---- strategies ---------------------------------------------------------------------------
@st.composite
def chains(draw, dtype, ndim):
    is_int = dtype.startswith("int")
    steps = []
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):
            u = draw(st.sampled_from(INT_UNARY if is_int else FLOAT_UNARY))
            steps.append(u[0] if len(u) == 1 else u)
        else:
            op = draw(st.sampled_from(INT_BINARY if is_int else FLOAT_BINARY))
            if draw(st.booleans()):
                other = draw(st.sampled_from(SIDES))
            else:
                other = draw(st.sampled_from([2, -3] if is_int else [0.5, 2.0, -1.25, 3]))
            if draw(st.booleans()):
                steps.append((op, other))
            else:
                steps.append((op, other, "_") if draw(st.booleans()) else (op, "_", other))
    end = draw(st.sampled_from(["none", "reduce"] if is_int or ndim == 0
                               else ["none", "reduce", "rowwise"]))
    if end == "reduce":
        axes = [None, -1] if ndim else [None]
        steps.append((draw(st.sampled_from(["sum", "mean", "max", "min"])),
                      {"axis": draw(st.sampled_from(axes)), "keepdims": draw(st.booleans())}))
    elif end == "rowwise":
        op = draw(st.sampled_from(["softmax", "log_softmax", "layer_norm", "rms_norm"]))
        attrs = {}
        if op in ("layer_norm", "rms_norm") and draw(st.booleans()):
            attrs["weight"] = draw(st.sampled_from(SIDES))
        if op == "layer_norm" and draw(st.booleans()):
            attrs["bias"] = draw(st.sampled_from(SIDES))
        steps.append((op, attrs) if attrs else op)
        if draw(st.booleans()):
            steps.append(draw(st.sampled_from(["relu", ("mul", 2.0), ("add", "a")])))
    return steps


def side_shape(draw, shape):
    """A shape that broadcasts to ``shape``: a suffix with some dimensions set to 1."""
    k = draw(st.integers(0, len(shape)))
    suffix = shape[len(shape) - k:]
    return tuple(1 if draw(st.booleans()) else n for n in suffix)


@st.composite
def cases(draw, dtypes=("float32", "float64", "int32", "int64"), max_side=9):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(st.lists(st.integers(1, max_side), min_size=0, max_size=4).map(tuple))
    steps = draw(chains(dtype, len(shape)))
    x = draw(testing.views(shape, dtype=dtype))
    if dtype.startswith("float"):
        x = (x / 4).astype(dtype)
    sides = {}
    for name in SIDES:
        sshape = side_shape(draw, shape)
        sides[name] = draw(testing.views(sshape, dtype=dtype)) if sshape else \
            np.asarray(draw(st.integers(-3, 3)), dtype=as_dtype(dtype))
    return dtype, steps, x, sides


def used(f, sides):
    return {k: sides[k] for k in f.side_names}


# ---- results ----------------------------------------------------------------------------
@given(cases())
@settings(max_examples=150)
def test_random_chains_match_running_the_steps_one_by_one(case):
    dtype, steps, x, sides = case
    f = dynshape.fuse(steps)
    with np.errstate(all="ignore"):
        got = f(x, **used(f, sides))
    ref = reference(steps, x, sides)
    scale = None
    if f.end is not None and f.end.kind == "reduce" and np.asarray(ref).size:
        scale = reduction_scale(steps, x, sides)
    assert_matches(np.asarray(got), np.asarray(ref), dtype, scale)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["float32", "float64"]), st.sampled_from(["softmax", "log_softmax"]),
       st.integers(1, 1300), st.integers(1, 520), st.booleans(), st.booleans(),
       st.booleans(), st.integers(0, 9))
def test_short_softmax_rows_in_groups_equal_the_ops_one_by_one(dtype, op, rows, n, before,
                                                                after, view, seed):
    """Row-wise tails over rows of at most rowwise.JOIN_ROW elements run in the row-wise
    driver's groups (fused_tail.joined_rows), on rows of x read in place (no step before
    the tail) or on the tile buffer (a step before it), into the buffer (a step after it)
    or straight into the output (none after, a step before), over many tiles; rows past
    JOIN_ROW and rows of a view (not following each other) row by row. Bit for bit the ops
    run one by one where those group the rows too (x's rows follow each other), and
    NumPy's within the ops' tolerance."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((rows, 2 * n if view else n)).astype(dtype)
    x = base[:, ::2] if view else base
    steps = ([("mul", 0.375)] if before else []) + [op] + ([("add", 0.5)] if after else [])
    got = dynshape.fuse(steps)(x)
    ref = dynshape.run(op, dynshape.run("mul", x, 0.375) if before else x, axis=-1)
    ref = dynshape.run("add", ref, 0.5) if after else ref
    if not view and n <= 512:
        np.testing.assert_array_equal(got, ref)
    np.testing.assert_allclose(got, ref, **TOL[dtype])
    np.testing.assert_allclose(got, reference(steps, x, {}), **TOL[dtype])


@pytest.mark.parametrize("below", [True, False])
@pytest.mark.parametrize("tail", ["softmax", "layer_norm"])
def test_row_wise_chains_on_either_side_of_the_serial_threshold_are_right(below, tail):
    """A chain with a row-wise tail goes to the threads from the row-wise driver's crossover
    (SERIAL_ROW_READS elements, not the elementwise SERIAL_ELEMENTS): on either side every
    row is computed, once, as the ops one by one compute it."""
    from dynshape_kernels.cpu.elementwise import SERIAL_ELEMENTS
    from dynshape_kernels.cpu.reduce_runs import SERIAL_ROW_READS
    assert SERIAL_ROW_READS < SERIAL_ELEMENTS
    n = 24
    rows = SERIAL_ROW_READS // n + (-3 if below else 3)
    assert (rows * n < SERIAL_ROW_READS) == below
    x = np.random.default_rng(rows).standard_normal((rows, n)).astype(np.float32)
    got = dynshape.fuse([("mul", 0.5), tail])(x)
    ref = dynshape.run(tail, dynshape.run("mul", x, 0.5), **({"axis": -1} if tail == "softmax"
                                                             else {}))
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-6)


@given(cases(dtypes=("float16", "bfloat16")))
@settings(max_examples=80)
def test_half_precision_chains_equal_their_ops_one_by_one(case):
    """A float16/bfloat16 chain rounds to the format after every step, as its ops do one by
    one: elementwise chains are bit for bit the same; a row-wise or reduction tail may sum in
    another order (in float64), so it may differ by 1 ulp."""
    dtype, steps, x, sides = case
    f = dynshape.fuse(steps)
    with np.errstate(all="ignore"):
        got = np.asarray(f(x, **used(f, sides)))
    ref = np.asarray(reference(steps, x, sides))
    assert got.dtype == ref.dtype == as_dtype(dtype) and got.shape == ref.shape
    assert ulps(got, ref) <= (0 if f.end is None else 1)


@given(cases(dtypes=("float32", "int64"), max_side=5), st.booleans())
@settings(max_examples=40)
def test_run_and_out_views(case, positional):
    """dynshape.run(f, ...) is f(...); ``out`` may be a strided view; sides positionally."""
    dtype, steps, x, sides = case
    f = dynshape.fuse(steps)
    s = used(f, sides)
    with np.errstate(all="ignore"):
        ref = f(x, **s)
        shape = np.shape(ref)
        base = np.full(tuple(2 * n for n in shape), 7, dtype=ref.dtype)
        out = base[tuple(slice(None, None, -2) for _ in shape)] if shape else base[...]
        args = [s[k] for k in f.side_names] if positional else []
        kw = {} if positional else s
        r = dynshape.run(f, x, *args, out=out, **kw)
    assert r is out
    np.testing.assert_array_equal(out, ref)


def test_large_rows_and_long_rows_match():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 9000)).astype(np.float32)
    w = rng.standard_normal(9000).astype(np.float32)
    for tail in ["softmax", "log_softmax", ("layer_norm", {"weight": "w", "bias": "w"}),
                 ("rms_norm", {"weight": "w"}), ("sum", {"axis": -1}), ("max", {"axis": -1}),
                 ("mean", {"axis": None}), ("min", {"axis": None})]:
        steps = [("mul", "w"), "tanh", tail]
        f = dynshape.fuse(steps)
        scale = reduction_scale(steps, x, {"w": w}) if isinstance(tail, tuple) \
            and tail[0] in ("sum", "max", "mean", "min") else None
        assert_matches(f(x, w=w), reference(steps, x, {"w": w}), "float32", scale)


@pytest.mark.parametrize("shape", [(37, 1000), (300, 33), (3, 9000)])
@pytest.mark.parametrize("steps", [
    [("sub", "a", "_"), ("add", "b"), ("sub", "_", "c"), ("div", 3.0, "_"), "tanh",
     ("sub", "_", 0.5)],
    [("sub", "_", "a"), ("mul", "b"), ("sub", "c", "_")],
    ["neg", ("sub", 2.0, "_"), ("add", "b")],
    [("sub", 2.0, "_"), ("add", "b"), ("div", "_", 4.0)],
    [("sub", "b", "_"), ("mul", "a"), ("sub", "b", "_")],
    [("sub", "_", "b"), ("sub", "a", "_"), ("div", "_", "b")],
])
@pytest.mark.parametrize("rows", ["contiguous", "strided"])
def test_tiles_of_whole_rows_run_each_step_once_per_tile(shape, steps, rows):
    """A (rows, columns) plane that a row-broadcast side keeps from coalescing: tiles of
    whole rows. Rows that follow each other run each unary, constant and full-size side step
    (first or later, operand on either side) over the tile as one run; rows apart (x a
    column slice of a wider array) and row-broadcast sides run each step in one call over
    the tile's rows."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    if rows == "strided":
        x = np.concatenate([x, x[:, :5]], axis=1)[:, :shape[1]]
    sides = {"a": rng.standard_normal(shape).astype(np.float32),
             "b": rng.standard_normal(shape[1]).astype(np.float32),
             "c": rng.standard_normal(shape).astype(np.float32) + 3}
    f = dynshape.fuse(steps)
    out = np.empty_like(x)
    got = f(x, out=out, **used(f, sides))
    assert got is out
    assert_matches(got, reference(steps, x, sides), "float32")


def test_in_place_and_aliased_side():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 300))
    ref = np.tanh(np.maximum(x, 0) * 2 + x)
    f = dynshape.fuse(["relu", ("mul", 2.0), ("add", "s")])
    y = x.copy()
    f(y, s=x, out=y)                                  # exact alias of x
    g = dynshape.fuse(["relu", ("mul", 2.0), ("add", "s"), "tanh"])
    s = x.copy()
    g(x, s=s, out=s)                                  # out is a side input: read first
    np.testing.assert_allclose(s, ref, rtol=1e-13)
    np.testing.assert_allclose(y, np.maximum(x, 0) * 2 + x, rtol=1e-13)


def test_broadcast_side_grows_the_shape_and_scalars_are_weak():
    x = np.arange(4, dtype=np.float32)
    b = np.ones((3, 1), np.float32)
    f = dynshape.fuse([("add", "b"), ("mul", "k")])
    y = f(x, b=b, k=2)
    assert y.shape == (3, 4) and y.dtype == np.float32
    np.testing.assert_array_equal(y, (x + b) * 2)


def test_empty_inputs_and_empty_reductions():
    x = np.zeros((0, 5), np.float32)
    assert dynshape.fuse(["relu", "exp"])(x).shape == (0, 5)
    assert dynshape.fuse(["relu", ("sum", {"axis": -1})])(x).shape == (0,)
    e = np.zeros((3, 0), np.float32)
    np.testing.assert_array_equal(dynshape.fuse(["abs", ("sum", {"axis": -1})])(e), [0, 0, 0])
    assert np.isnan(dynshape.fuse(["abs", "mean"])(e))
    with pytest.raises(ShapeError, match="identity"):
        dynshape.fuse(["abs", "max"])(e)


# ---- the table: per tile, the sequence of kernel ids -------------------------------------
def test_explain_lists_the_kernel_ids_and_covers_the_plane():
    f = dynshape.fuse([("add", "bias"), "gelu", ("clip", {"min": 0, "max": 6}), "softmax"])
    t = dynshape.explain(f, (300, 77), bias=(77,))
    assert isinstance(t, FusedTable)
    cat = dynshape.CATALOG
    assert [(cat[k].family, cat[k].op) for k in t.kernel_ids()] == [
        ("binary", "add"), ("unary", "gelu"), ("unary", "clip"), ("rowwise", "softmax")]
    assert all(cat[k].dtype == "float32" for k in t.kernel_ids())
    assert "softmax" in t.describe() and "bias" in t.describe()
    counts = np.zeros((300, 77), np.int64)
    for o0, v0, o1, v1 in t.resolved(300, 77):
        counts[o0:o0 + v0, o1:o1 + v1] += 1
    assert (counts == 1).all()
    # a table serves its whole bucket, and a never-seen shape of the bucket hits the cache
    assert dynshape.explain(f, (301, 79), bias=(79,)) is t
    assert dynshape.explain(f, (0, 77), bias=(77,)) is None


# ---- no compilation -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def warm():
    for dt in ("float32", "float64", "int32", "int64"):
        x = np.ones((3, 4), dt)
        dynshape.fuse(["relu", ("add", "a"), ("sum", {"axis": -1})])(x, a=x)
        if dt.startswith("float"):
            dynshape.fuse(["exp", "softmax", ("mul", "a")])(x, a=x)
            dynshape.fuse(["exp", ("max", {"axis": None})])(x.T)


@given(cases(max_side=40))
@settings(max_examples=40)
def test_never_seen_chains_compile_nothing(warm, case):
    dtype, steps, x, sides = case
    f = dynshape.fuse(steps)
    with testing.count_compilations() as c, np.errstate(all="ignore"):
        f(x, **used(f, sides))
    assert c.count == 0, c.functions


# ---- memory: intermediates live in per-thread tiles ---------------------------------------
def test_no_full_size_intermediates():
    x = np.random.default_rng(3).standard_normal(4_000_000).astype(np.float32)   # 16 MB
    b = np.float32(0.5)
    out = np.empty_like(x)
    f = dynshape.fuse([("add", "b"), "relu", ("mul", 2.0), "exp", "tanh"])
    f(x, b=b, out=out)                                 # warm: driver loaded, table cached
    tracemalloc.start()
    try:
        f(x, b=b, out=out)
        fused_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        np.tanh(np.exp(np.maximum(x + b, 0) * np.float32(2)))
        numpy_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert fused_peak < x.nbytes / 100
    assert numpy_peak >= x.nbytes
    np.testing.assert_allclose(out, np.tanh(np.exp(np.maximum(x + b, 0) * 2)), rtol=2e-6)


# ---- errors -------------------------------------------------------------------------------
@pytest.mark.parametrize("steps, error, match", [
    (["relu", "frobnicate"], UnknownOpError, "frobnicate.*fusable ops"),
    ([], ArgumentError, "at least one step"),
    ("relu", ArgumentError, "list of steps"),
    ([("relu", "b")], ArgumentError, "unary"),
    ([("add",)], ArgumentError, "one operand"),
    ([("add", "_", "_")], ArgumentError, "exactly one operand"),
    ([("add", "a", "b")], ArgumentError, "exactly one operand"),
    ([("add", [1])], ArgumentError, "operand"),
    ([("clip", {"lo": 0})], OpAttributeError, "lo.*accepted: max, min"),
    ([("gelu", {"approximate": "fast"})], OpAttributeError, "approximate"),
    ([("leaky_relu", {"alpha": "x"})], OpAttributeError, "alpha"),
    ([("add", "b", {"alpha": 1})], OpAttributeError, "no attributes"),
    ([("softmax", {"axis": 0})], OpAttributeError, "last axis"),
    ([("layer_norm", {"epsilon": -1})], OpAttributeError, "epsilon"),
    ([("sum", {"axis": 0})], OpAttributeError, "axis=-1"),
    ([("sum", {"axis": -1}), "relu"], ArgumentError, "must be the last"),
    (["softmax", "log_softmax"], ArgumentError, "at most one"),
    ([("add", n) for n in "abcde"], ArgumentError, "at most 4 distinct"),
    ([("matmul", "w")], ArgumentError, "matmul may only be the first"),
    (["relu", "matmul"], ArgumentError, "matmul may only be the first"),
    (["matmul", "softmax"], ArgumentError, "only elementwise"),
    (["relu", "conv2d"], ArgumentError, "conv2d may only be the first"),
    ([("conv2d", "w")], ArgumentError, "conv2d may only be the first"),
    (["conv2d", ("sum", {"axis": -1})], ArgumentError, "after a leading conv2d only elementw"),
    (["conv2d", "softmax"], ArgumentError, "after a leading conv2d only elementwise"),
    ([("conv2d", {"activation": "relu"})], OpAttributeError, "write it as the steps"),
    ([("conv2d", {"residual": "r"})], OpAttributeError, "write it as the steps"),
    ([("conv2d", {"stride": 2})], OpAttributeError, "stride.*accepted:.*strides"),
    ([("conv2d", {"strides": 0})], OpAttributeError, "strides must be >= 1"),
    ([("conv2d", {"pads": (1, 2, 3)})], OpAttributeError, "pads"),
    ([("conv2d", {"group": 0})], OpAttributeError, "group"),
    ([("conv2d", {"auto_pad": "SAME"})], OpAttributeError, "auto_pad"),
    ([("conv2d", {"bias": 3})], OpAttributeError, "bias must name an input"),
    ([("gemm", {"transA": 2})], OpAttributeError, "transA"),
    ([("gemm", {"alpha": "x"})], OpAttributeError, "alpha"),
    ([("gemm", {"activation": "relu"})], OpAttributeError, "write it as the steps"),
    (["gemm", "log_softmax"], ArgumentError, "after a leading gemm only elementwise"),
])
def test_bad_steps(steps, error, match):
    with pytest.raises(error, match=match):
        dynshape.fuse(steps)


def test_bad_calls():
    x = np.ones((3, 4), np.float32)
    f = dynshape.fuse([("add", "bias"), "relu"])
    with pytest.raises(ArgumentError, match="missing side input.*bias"):
        f(x)
    with pytest.raises(ArgumentError, match="unknown side input 'bais'"):
        f(x, bias=x, bais=x)
    with pytest.raises(ArgumentError, match="1 side input.*got 2"):
        f(x, x, x)
    with pytest.raises(ArgumentError, match="given twice"):
        f(x, x, bias=x)
    with pytest.raises(ShapeError, match="do not broadcast.*bias \\(5,\\)"):
        f(x, bias=np.ones(5, np.float32))
    with pytest.raises(DtypeError, match="float64.*promote the float32 chain"):
        f(x, bias=np.ones(4))
    with pytest.raises(DtypeError, match="promote"):
        f(x.astype(np.int32), bias=0.5)
    with pytest.raises(DtypeError, match="accepted: float32"):
        f(x.astype(np.int16), bias=x)
    with pytest.raises(ShapeError, match="out has shape"):
        f(x, bias=x, out=np.empty((4, 3), np.float32))
    xi = x.astype(np.int64)
    with pytest.raises(DtypeError, match="exp needs a float input"):
        dynshape.fuse(["relu", "exp"])(xi)
    with pytest.raises(DtypeError, match="div"):
        dynshape.fuse([("div", 2)])(xi)
    with pytest.raises(DtypeError, match="softmax"):
        dynshape.fuse(["softmax"])(xi)
    with pytest.raises(ValueError, match="negative integer powers"):
        dynshape.fuse([("pow", "e")])(xi, e=-xi)
    with pytest.raises(ShapeError, match="rank >= 1"):
        dynshape.fuse(["softmax"])(np.float32(1))
    with pytest.raises(ArgumentError, match="needs the input"):
        dynshape.run(f)


# ---- a leading matmul: the chain is the GEMM driver's epilogue program ---------------------
def test_leading_matmul_runs_the_chain_as_its_epilogue():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 70, 45)).astype(np.float32)
    b = rng.standard_normal((45, 130)).astype(np.float32)[:, ::-1]      # strided operand
    bias = rng.standard_normal(130).astype(np.float32)
    res = rng.standard_normal((3, 1, 130)).astype(np.float32)
    f = dynshape.fuse(["matmul", ("add", "bias"), "gelu", ("mul", "res", "_"), "tanh"])
    assert f.side_names == ("bias", "res")
    y = dynshape.run(f, a, b, bias=bias, res=res)
    mm = dynshape.run("matmul", a, b)
    ref = reference([("add", "bias"), "gelu", ("mul", "res", "_"), "tanh"], mm,
                    {"bias": bias, "res": res})
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    out = np.empty_like(y)
    assert f(a, b, bias, res, out=out) is out
    np.testing.assert_array_equal(out, y)
    with pytest.raises(ShapeError, match="does not broadcast to the matmul"):
        f(a, b, bias=np.ones(7, np.float32), res=res)
    with testing.count_compilations() as c:
        g = dynshape.fuse(["matmul", "relu", ("sub", 1.0), ("maximum", "m")])
        z = g(a[:, :33], b[:, :17], m=np.float32(-0.5))
    assert c.count == 0, c.functions
    np.testing.assert_allclose(
        z, np.maximum(np.maximum(dynshape.run("matmul", a[:, :33], b[:, :17]), 0) - 1, -0.5),
        rtol=1e-5, atol=1e-5)


# ---- a leading conv2d: the chain is the conv driver's epilogue program ---------------------
CONV_SIDES = ("r", "s", "t", "u")


@st.composite
def conv_chains(draw):
    """Elementwise chains for a conv output: unary ops (attributed ones included) and binary
    ops with constants or side inputs (either operand order)."""
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            u = draw(st.sampled_from(FLOAT_UNARY))
            steps.append(u[0] if len(u) == 1 else u)
        else:
            op = draw(st.sampled_from(FLOAT_BINARY))
            other = draw(st.sampled_from(CONV_SIDES + (0.5, 2.0, -1.25, 3)))
            steps.append((op, other, "_") if draw(st.booleans()) else (op, other))
    return steps


@st.composite
def conv_fuse_cases(draw):
    """(dtype, conv step, chain, x, w, b, sides, conv attrs): random geometry (strides, pads,
    dilations, groups, depthwise), sides of the output's shape (any strides), per channel
    (1, M, 1, 1) / (M, 1, 1), per position (OH, OW) or scalars."""
    dtype = draw(st.sampled_from(["float32", "float64"]))
    depthwise = draw(st.booleans())
    if depthwise:
        C = draw(st.integers(1, 8))
        G, M, Cg = C, C * draw(st.sampled_from([1, 1, 2])), 1
        M = min(M, 8) // G * G or G
    else:
        G = draw(st.sampled_from([1, 1, 2]))
        Cg, Mg = draw(st.integers(1, 4)), draw(st.integers(1, 8 // G))
        C, M = Cg * G, Mg * G
    KH, KW = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sh, sw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    N = draw(st.integers(1, 2))
    H = draw(st.integers(max(1, (KH - 1) * dh + 1 - pads[0] - pads[2]), 20))
    W = draw(st.integers(max(1, (KW - 1) * dw + 1 - pads[1] - pads[3]), 24))
    OH = (H + pads[0] + pads[2] - ((KH - 1) * dh + 1)) // sh + 1
    OW = (W + pads[1] + pads[3] - ((KW - 1) * dw + 1)) // sw + 1
    oshape = (N, M, OH, OW)
    x = draw(testing.views((N, C, H, W), dtype=dtype))
    x = (x / 4).astype(dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    w = (rng.standard_normal((M, Cg, KH, KW)) / np.sqrt(Cg * KH * KW)).astype(dtype)
    b = rng.standard_normal(M).astype(dtype) if draw(st.booleans()) else None
    sides = {}
    for name in CONV_SIDES:
        kind = draw(st.sampled_from(["full", "channel", "channel3", "position", "scalar"]))
        if kind == "full":
            sides[name] = draw(testing.views(oshape, dtype=dtype))
        elif kind == "channel":
            sides[name] = rng.standard_normal((1, M, 1, 1)).astype(dtype)
        elif kind == "channel3":
            sides[name] = rng.standard_normal((M, 1, 1)).astype(dtype)[::-1]
        elif kind == "position":
            sides[name] = rng.standard_normal((OW, OH)).astype(dtype).T
        else:
            sides[name] = np.asarray(rng.standard_normal(), dtype=dtype)
    attrs = {"strides": (sh, sw), "pads": pads, "dilations": (dh, dw), "group": G}
    conv = ("conv2d", dict(attrs, bias="bias") if b is not None else attrs)
    return dtype, conv, draw(conv_chains()), x, w, b, sides, attrs


@given(conv_fuse_cases(), st.sampled_from([None, 0, 1, 2]))
@settings(max_examples=80, deadline=None)
def test_leading_conv2d_matches_conv_then_the_steps(driver_calls, case, forced):
    """conv2d then the chain, fused, equals dynshape.run("conv2d") then every step one by
    one, for every static kernel (forced slot: GEMM tiles and direct tiles)."""
    from dynshape.runtime import conv as conv_executor
    dtype, conv, chain, x, w, b, sides, attrs = case
    f = dynshape.fuse([conv] + chain)
    given_ = {k: sides[k] for k in f.prog_sides}
    if b is not None:
        given_["bias"] = b
    with conv_executor.forcing_slot(forced):
        with np.errstate(all="ignore"):
            n0 = len(driver_calls)
            got = f(x, w, **given_)
            assert len(driver_calls) - n0 == 1
            y = dynshape.run("conv2d", *((x, w) if b is None else (x, w, b)), **attrs)
            # the conv's sum of |terms| per output: its rounding bound in any order
            scale = dynshape.run("conv2d", *(np.abs(v) for v in ((x, w) if b is None
                                                                   else (x, w, b))), **attrs)
            ref, spread = rounding_spread(chain, y, scale, sides)
    assert_within_spread(got, ref, spread, dtype)


def test_leading_conv2d_with_residual_and_per_channel_sides():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 6, 19, 23)).astype(np.float32)
    w = rng.standard_normal((8, 6, 3, 3)).astype(np.float32) / 8
    b = rng.standard_normal(8).astype(np.float32)
    r = rng.standard_normal((2, 8, 19, 23)).astype(np.float32)
    scale = rng.standard_normal((1, 8, 1, 1)).astype(np.float32)
    f = dynshape.fuse([("conv2d", {"pads": (1, 1, 1, 1), "bias": "b"}), ("add", "res"),
                       "relu", ("mul", "scale"), ("leaky_relu", {"alpha": 0.1})])
    assert f.side_names == ("b", "res", "scale")
    y = f(x, w, b=b, res=r, scale=scale)
    c = dynshape.run("conv2d", x, w, b, pads=1)
    ref = np.maximum(c + r, 0) * scale
    ref = np.where(ref >= 0, ref, np.float32(0.1) * ref)
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)
    out = np.empty_like(y)
    assert dynshape.run(f, x, w, b, r, scale, out=out) is out        # positional sides
    np.testing.assert_array_equal(out, y)
    # out may be a strided view; the residual may be out itself (read before written)
    base = np.zeros((2, 8, 38, 23), np.float32)
    view = base[:, :, ::2]
    view[...] = r
    f(x, w, b=b, res=view, scale=scale, out=view)
    np.testing.assert_array_equal(view, y)
    # the example of the brief: conv2d -> relu -> abs -> exp with strides and dilations
    g = dynshape.fuse([("conv2d", {"strides": (2, 1), "dilations": 2, "pads": 2}), "relu",
                       "abs", "exp"])
    z = g(x, w)
    c2 = dynshape.run("conv2d", x, w, strides=(2, 1), dilations=2, pads=2)
    np.testing.assert_allclose(z, np.exp(np.abs(np.maximum(c2, 0))), rtol=2e-6)
    assert isinstance(dynshape.explain(g, x.shape, w.shape), type(dynshape.explain(
        "conv2d", x.shape, w.shape, strides=(2, 1), dilations=2, pads=2)))
    assert g(x[:0], w).shape == (0, 8, 10, 23)


@pytest.fixture(scope="module")
def warm_conv():
    for dt in ("float32", "float64"):
        x = np.ones((1, 2, 5, 5), dt)
        dynshape.fuse(["conv2d", "relu", ("add", "r")])(x, np.ones((2, 2, 3, 3), dt),
                                                       r=np.ones((1, 2, 1, 1), dt))
        dynshape.fuse([("conv2d", {"group": 2}), "exp", ("add", "r")])(
            x, np.ones((2, 1, 1, 1), dt), r=x)


@given(conv_fuse_cases())
@settings(max_examples=25, deadline=None)
def test_leading_conv2d_never_seen_chains_and_shapes_compile_nothing(warm_conv, case):
    dtype, conv, chain, x, w, b, sides, attrs = case
    f = dynshape.fuse([conv] + chain)
    given_ = {k: sides[k] for k in f.prog_sides}
    if b is not None:
        given_["bias"] = b
    with testing.count_compilations() as c, np.errstate(all="ignore"):
        f(x, w, **given_)
    assert c.count == 0, c.functions


def test_leading_conv2d_allocates_no_full_size_intermediate():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 8, 64, 64)).astype(np.float32)
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32) / 8
    r = rng.standard_normal((2, 8, 64, 64)).astype(np.float32)
    f = dynshape.fuse([("conv2d", {"pads": 1}), ("add", "r"), "relu", "abs", "exp"])
    out = np.empty_like(r)                                  # 256 KB
    f(x, w, r=r, out=out)                                   # warm: table cached
    dynshape.run("conv2d", x, w, pads=1, out=out)
    # tracemalloc counts every thread's allocations, and threads left by earlier tests can
    # allocate during a measurement: each peak is the least of three, since noise only adds
    peaks = {"conv_only": [], "into_out": [], "fresh": [], "unfused": []}
    tracemalloc.start()
    try:
        for _ in range(3):
            # the plain conv's peak: its per-thread packing workspace (freed when it returns)
            tracemalloc.reset_peak()
            dynshape.run("conv2d", x, w, pads=1, out=out)
            peaks["conv_only"].append(tracemalloc.get_traced_memory()[1])
            tracemalloc.reset_peak()
            f(x, w, r=r, out=out)
            peaks["into_out"].append(tracemalloc.get_traced_memory()[1])
            tracemalloc.reset_peak()
            y = f(x, w, r=r)
            peaks["fresh"].append(tracemalloc.get_traced_memory()[1])
            del y
            tracemalloc.reset_peak()
            z = dynshape.run("conv2d", x, w, pads=1)
            for op in ("relu", "abs", "exp"):
                z = dynshape.run(op, z)
            peaks["unfused"].append(tracemalloc.get_traced_memory()[1])
            del z
    finally:
        tracemalloc.stop()
    # the plain conv's peak holds one or both threads' packing workspaces (~21 KB each here),
    # as the threads' lifetimes happen to overlap: its largest is the bound for the chain
    conv_all = max(peaks["conv_only"])
    into_out, fresh, unfused = (min(peaks[k]) for k in ("into_out", "fresh", "unfused"))
    y = f(x, w, r=r)
    assert into_out < conv_all + out.nbytes / 20            # nothing besides the conv's
    assert fresh < conv_all + out.nbytes * 1.1              # ... and the result
    assert unfused >= 2 * out.nbytes
    np.testing.assert_array_equal(y, out)


def test_leading_conv2d_bad_calls():
    x = np.ones((1, 4, 6, 6), np.float32)
    w = np.ones((4, 4, 3, 3), np.float32)
    f = dynshape.fuse([("conv2d", {"pads": 1}), ("add", "r"), "relu"])
    with pytest.raises(ArgumentError, match="starts with conv2d: call it as f\\(x, w"):
        f(x)
    with pytest.raises(ArgumentError, match="missing side input.*r"):
        f(x, w)
    with pytest.raises(ShapeError, match="'r' of shape \\(4,\\) does not broadcast to the "
                                         "conv2d result's shape \\(1, 4, 6, 6\\)"):
        f(x, w, r=np.ones(4, np.float32))
    with pytest.raises(ShapeError, match="does not broadcast"):
        f(x, w, r=np.ones((2, 4, 6, 6), np.float32))          # would grow the output
    with pytest.raises(DtypeError, match="promote the float32 chain"):
        f(x, w, r=np.ones((4, 1, 1)))
    with pytest.raises(DtypeError, match="conv2d"):
        f(x.astype(np.int32), w.astype(np.int32), r=1)
    with pytest.raises(ShapeError, match="conv2d: w has 4 input channels per group"):
        dynshape.fuse([("conv2d", {"group": 2}), "relu"])(x, w)
    g = dynshape.fuse([("conv2d", {"bias": "b"}), "relu"])
    with pytest.raises(ShapeError, match="b must have shape \\(4,\\)"):
        g(x, w, b=np.ones(3, np.float32))


def test_leading_gemm_runs_the_chain_as_its_epilogue():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((40, 30))
    b = rng.standard_normal((25, 30))
    c = rng.standard_normal(25)
    s = rng.standard_normal((40, 1))
    f = dynshape.fuse([("gemm", {"transB": 1, "alpha": 0.5, "beta": 2.0, "C": "c"}), "relu",
                       ("sub", "s", "_"), "tanh"])
    assert f.side_names == ("c", "s")
    y = f(a, b, c=c, s=s)
    np.testing.assert_allclose(y, np.tanh(s - np.maximum(0.5 * a @ b.T + 2 * c, 0)),
                               rtol=1e-12, atol=1e-12)
    g = dynshape.fuse([("gemm", {"transA": 1}), "exp"])
    np.testing.assert_allclose(g(a.T, b.T), np.exp(a @ b.T), rtol=1e-12)


def test_elementwise_tiles_hold_the_planned_number_of_elements():
    """An elementwise chain's CPU tiles hold TILE_ELEMENTS elements (whole rows of the
    column bucket's width when a row is shorter); a device table keeps its own size (one
    thread block's share)."""
    from dynshape.planning import fused as plan
    f = dynshape.fuse([("add", "bias"), "relu"])
    t = f.explain(np.zeros((3000, 1000), np.float32), bias=np.zeros(1000, np.float32))
    assert t.tile == (plan.TILE_ELEMENTS // 1024, 1024)        # rows of 1000: bucket 1024
    t = f.explain(np.zeros((4, 100000), np.float32), bias=np.zeros(100000, np.float32))
    assert t.tile == (1, plan.TILE_ELEMENTS)
    prog = type("P", (), {"tail": 0})()
    p = type("Plane", (), {"strides": ((1000, 1), (1000, 1)), "m": 3000})()
    assert plan.tile_shape(prog, p, (2048, 4096), (961, 1024), "cuda") == (
        plan.DEVICE_TILE_ELEMENTS // 1024, 1024)
    assert plan.tile_shape(prog, p, (2048, 4096), (961, 1024)) == (
        plan.TILE_ELEMENTS // 1024, 1024)


def test_a_parallel_call_allocates_scratch_only_for_chunks_with_work():
    """The parallel driver deals its work items to N_CHUNKS chunks; a chunk with no item
    must neither run nor allocate its tile scratch (three arrays), so a call over a few
    tiles allocates three arrays per tile more than a one-tile call, not three per chunk."""
    from numba.core.runtime import _nrt_python as nrt_stats
    from numba.core.runtime import rtsys

    from dynshape_kernels.cpu.elementwise import SERIAL_ELEMENTS
    from dynshape_kernels.cpu.reduce_runs import N_CHUNKS
    rng = np.random.default_rng(3)
    b = rng.standard_normal(1000).astype(np.float32)
    f = dynshape.fuse([("add", "bias"), "relu"])

    def allocations(rows):
        x = rng.standard_normal((rows, 1000)).astype(np.float32)
        out = np.empty_like(x)
        f(x, bias=b, out=out)
        was = nrt_stats.memsys_stats_enabled()
        nrt_stats.memsys_enable_stats()
        try:
            before = rtsys.get_allocation_stats().alloc
            f(x, bias=b, out=out)
            count = rtsys.get_allocation_stats().alloc - before
        finally:
            if not was:
                nrt_stats.memsys_disable_stats()
        np.testing.assert_allclose(out, np.maximum(x + b, 0), rtol=1e-6)
        return count, f.explain(x, bias=b).entries.shape[0], x.size

    one, one_tile, small = allocations(8)             # the serial path: one chunk
    many, tiles, size = allocations(64)               # the parallel path
    assert one_tile == 1 and small < SERIAL_ELEMENTS <= size and 1 < tiles < N_CHUNKS // 4
    assert many <= one + 3 * (tiles - 1), (one, many, tiles)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("geometry", [(8, 8, 16, 61, 1), (4, 4, 7, 5, 1), (6, 6, 33, 29, 6),
                                      (3, 64, 20, 45, 1)])
def test_leading_ops_run_a_side_free_chain_over_their_accumulators_right(dtype, geometry):
    """Unary and constant steps after a conv2d (GEMM tiles, or direct tiles for depthwise)
    or a matmul run once over a tile's accumulators, the scratch between its rows
    included (``steps.scratch_span``): only the rows reach the output, each right; one
    more step reading a side input by position goes row by row and is right too."""
    C, M, H, W, G = geometry
    r = np.random.default_rng(C * H + W)
    x = r.standard_normal((2, C, H, W)).astype(dtype)
    w = (r.standard_normal((M, C // G, 3, 3)) / 3).astype(dtype)
    chain = ["relu", ("mul", 0.5), ("sub", 0.25, "_"), "tanh", "abs"]

    def steps(v):
        return np.abs(np.tanh(0.25 - np.maximum(v, 0) * 0.5))
    c = dynshape.run("conv2d", x, w, pads=1, group=G)
    f = dynshape.fuse([("conv2d", {"pads": 1, "group": G})] + chain)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-13)
    out = np.full(c.shape, 7, dtype)
    assert f(x, w, out=out) is out
    np.testing.assert_allclose(out, steps(c), **tol)
    side = r.standard_normal(c.shape).astype(dtype)
    g = dynshape.fuse([("conv2d", {"pads": 1, "group": G})] + chain + [("add", "s")])
    np.testing.assert_allclose(g(x, w, s=side), steps(c) + side, **tol)
    a = r.standard_normal((3, H * 5, W)).astype(dtype)
    b = r.standard_normal((W, C * 13)).astype(dtype)
    m = dynshape.run("matmul", a, b)
    np.testing.assert_allclose(dynshape.fuse(["matmul"] + chain)(a, b), steps(m), **tol)
