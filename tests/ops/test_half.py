"""Half precision (float16, bfloat16) on the elementwise families: every op against a float32
NumPy reference rounded to the storage format, within the documented ULP bound (0 for the
exact ops, 1 for the transcendental ones); special values; views and broadcasting; the
promotion table; the catalog; no compilation on new shapes (every family); fused sequences
led by matmul, gemm or conv2d, bit for bit the ops one by one. The reduce,
rowwise, pool, matmul, conv and fused families' property tests include the half formats in
their own modules."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dynshape
from dynshape import testing

from oracles import UNARY_REF, ulps

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
FORMATS = st.sampled_from([F16, BF16])
#: ops computed exactly in float32, so their one rounding gives the correctly rounded result
EXACT_UNARY = {"relu", "abs", "neg"}
EXACT_BINARY = {"add", "sub", "mul", "div", "maximum", "minimum"}
BINARY_F32 = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
              "maximum": np.maximum, "minimum": np.minimum, "pow": np.power}


#: absolute error accepted beside the ULP bound for the transcendental ops: results this
#: close to 0 lose their ULPs to cancellation in the float64 references themselves (gelu of
#: -9.3 is -5.8e-20; its reference, 0.5x(1 + erf(x/sqrt 2)) in float64, gives -0.0)
ATOL = 1e-6


def rounded(fn, fmt, *xs):
    """The float32 NumPy result of ``fn`` on the operands, rounded to ``fmt``."""
    with np.errstate(all="ignore"):
        return np.asarray(fn(*[np.asarray(x, np.float32) if isinstance(x, np.ndarray) else x
                                for x in xs])).astype(np.float32).astype(fmt)


def _half_views(fmt, max_rank=3):
    return testing.views(testing.shapes(max_rank=max_rank, max_side=40), fmt)


@given(st.sampled_from(sorted(UNARY_REF)), FORMATS, st.data())
def test_unary_within_one_ulp_of_float32_rounded(op, fmt, data):
    x = data.draw(_half_views(fmt))
    got = dynshape.run(op, x)
    want = rounded(UNARY_REF[op], fmt, x)
    assert got.dtype == fmt
    if op in EXACT_UNARY:
        assert ulps(got, want) == 0, op
    else:
        assert ulps(got, want, ATOL) <= 1, op


@given(st.sampled_from(sorted(BINARY_F32)), FORMATS, st.data())
def test_binary_broadcasting_and_views(op, fmt, data):
    shape = data.draw(testing.shapes(max_rank=3, max_side=20))
    cut = data.draw(st.integers(0, len(shape)))
    bshape = tuple(1 if data.draw(st.booleans()) else n for n in shape[cut:])
    a = data.draw(testing.views(shape, fmt))
    b = data.draw(testing.views(bshape, fmt))
    if op == "pow":          # positive bases, exponents in a range that stays finite
        a, b = np.abs(a), (np.abs(b.astype(np.float32)) % 3 + 0.5).astype(fmt)
    got = dynshape.run(op, a, b)
    want = rounded(BINARY_F32[op], fmt, a, b)
    assert ulps(got, want) <= (0 if op in EXACT_BINARY else 1), op
    # a Python scalar is weak: it takes the array's format
    got = dynshape.run(op, a, 2.0)
    assert got.dtype == fmt
    assert ulps(got, rounded(BINARY_F32[op], fmt, a, np.float32(2.0))) <= \
        (0 if op in EXACT_BINARY else 1)


@pytest.mark.parametrize("fmt", [F16, BF16], ids=str)
def test_special_values_and_rounding(fmt):
    big = float(ml_dtypes.finfo(fmt).max)
    tiny = float(ml_dtypes.finfo(fmt).smallest_subnormal)
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, tiny, -tiny, 3 * tiny, big, -big,
                  1.0, -2.5, 11.0], np.float32).astype(fmt)
    for op in ("relu", "abs", "neg", "exp", "tanh", "sigmoid", "sqrt", "log"):
        assert ulps(dynshape.run(op, x), rounded(UNARY_REF[op], fmt, x),
                    0 if op in EXACT_UNARY else ATOL) <= (0 if op in EXACT_UNARY else 1), op
    # overflow on rounding: big + big is inf; ties round to even (exact float32 sums, one
    # rounding to the format, bit for bit as NumPy/ml_dtypes round)
    rng = np.random.default_rng(4)
    a = rng.standard_normal(4099).astype(np.float32).astype(fmt)
    b = (rng.standard_normal(4099) * 1e-3).astype(np.float32).astype(fmt)
    for op in ("add", "sub", "mul", "div"):
        np.testing.assert_array_equal(
            dynshape.run(op, a, b).view(np.uint16),
            rounded(BINARY_F32[op], fmt, a, b).view(np.uint16), err_msg=op)
    s = dynshape.run("add", np.array([big, -big, tiny], np.float32).astype(fmt),
                     np.array([big, -big, -tiny], np.float32).astype(fmt))
    assert np.isposinf(s[0].astype(np.float32)) and np.isneginf(s[1].astype(np.float32))
    assert s[2].astype(np.float32) == 0


@pytest.mark.parametrize("fmt", [F16, BF16], ids=str)
def test_attributes_out_and_copies(fmt):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((33, 70)) * 3).astype(np.float32).astype(fmt)
    got = dynshape.run("clip", x, min=-1.5, max=0.25)
    assert ulps(got, rounded(lambda v: np.clip(v, -1.5, 0.25), fmt, x)) == 0
    got = dynshape.run("leaky_relu", x, alpha=0.1)
    assert ulps(got, rounded(lambda v: np.where(v >= 0, v, v * np.float32(0.1)), fmt, x)) == 0
    out = np.full((70, 33), np.nan, np.float32).astype(fmt)
    r = dynshape.run("exp", x.T, out=out)
    assert r is out and ulps(out, rounded(np.exp, fmt, x.T)) <= 1
    np.testing.assert_array_equal(dynshape.run("transpose", x).view(np.uint16),
                                  np.ascontiguousarray(x.T).view(np.uint16))
    big = np.zeros((40, 50), fmt)
    dynshape.run("relu", x[:20, ::2], out=big[::2, 5:40])
    assert not big[1::2].view(np.uint16).any() and not big[:, :5].view(np.uint16).any()


def test_promotion_table():
    f32, f64, i32 = np.float32, np.float64, np.int32
    cases = [(F16, F16, F16), (BF16, BF16, BF16), (F16, BF16, f32), (BF16, f32, f32),
             (F16, f32, f32), (BF16, f64, f64), (F16, i32, f64), (BF16, np.int64, f64)]
    for a, b, want in cases:
        got = dynshape.run("add", np.ones(3, a), np.ones(3, b))
        assert got.dtype == np.dtype(want), (a, b, got.dtype)
        np.testing.assert_array_equal(got.astype(np.float64), 2.0)
    assert dynshape.run("add", np.ones(3, BF16), 1).dtype == BF16
    assert dynshape.run("exp", np.ones(3, BF16)).dtype == BF16
    # booleans leave a format as it is; NumPy scalars count by their dtype (np.float64 is a
    # Python float too, but a strong one), as NumPy gives for float16
    for fmt in (F16, BF16):
        for other, want in ((True, fmt), (np.ones(3, bool), fmt), (np.bool_(True), fmt),
                            (np.float64(1), f64), (np.float32(1), f32), (1.0, fmt)):
            got = dynshape.run("add", np.ones(3, fmt), other)
            assert got.dtype == np.dtype(want), (fmt, other, got.dtype)
            if fmt is F16:
                assert got.dtype == np.add(np.ones(3, fmt), other).dtype


def test_kernels_are_in_the_catalog_and_explain_names_them():
    for fam in ("unary", "binary", "reduce", "rowwise", "pool", "matmul", "conv"):
        assert {"float16", "bfloat16"} <= set(dynshape.CATALOG.families[fam].dtypes)
    t = dynshape.explain("gelu", (37, 1999), dtype="bfloat16")
    kernels = {dynshape.CATALOG.kernels[int(k)] for k in np.unique(t.entries[:, 0])}
    assert {k.dtype for k in kernels} == {"bfloat16"} and {k.op for k in kernels} == {"gelu"}
    for op, shape in (("sum", (37, 1999)), ("softmax", (37, 1999))):
        t = dynshape.explain(op, shape, dtype="float16")
        kernels = {dynshape.CATALOG.kernels[int(k)] for k in np.unique(t.entries[:, 0])}
        assert {k.dtype for k in kernels} == {"float16"} and {k.op for k in kernels} == {op}


def test_a_new_shape_compiles_nothing():
    x = np.ones((5, 7), BF16)
    dynshape.run("sigmoid", x)
    dynshape.run("mul", x, x)
    dynshape.run("sum", x, axis=0)
    dynshape.run("layer_norm", x)
    dynshape.run("avg_pool2d", x[None, None], kernel_shape=(2, 2))
    dynshape.run("matmul", x, x.T)
    dynshape.run("conv2d", x[None, None], np.ones((2, 1, 1, 1), BF16))
    chain = dynshape.fuse([("add", "b"), "gelu", "softmax"])
    chain(x, b=x[:1])
    with testing.count_compilations() as c:
        for shape in [(13, 1001), (1, 3), (301, 3)]:
            y = np.ones(shape, BF16)
            dynshape.run("sigmoid", y)
            dynshape.run("mul", y, y[:1])
            dynshape.run("sum", y, axis=0)
            dynshape.run("argmax", y.T, axis=1)
            dynshape.run("layer_norm", y, np.ones(shape[-1], BF16))
            dynshape.run("softmax", y, axis=0)
            dynshape.run("max_pool2d", y[None, None], kernel_shape=(1, 2))
            dynshape.run("matmul", y, y.T)
            dynshape.run("conv2d", y[None, None], np.ones((2, 1, 1, 1), BF16))
            chain(y, b=y[:1])
    assert c.count == 0


HALF_STEPS = ["relu", "neg", "exp", "tanh", "sigmoid", "gelu", ("leaky_relu", {"alpha": 0.2}),
              ("clip", {"min": -1.5, "max": 2.0})]
HALF_BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]


@st.composite
def _lead_chain(draw, sides):
    """1-4 steps after a leading matmul/gemm/conv2d: unary ops, binary ops with a constant
    or a side input on either side."""
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            steps.append(draw(st.sampled_from(HALF_STEPS)))
        else:
            op = draw(st.sampled_from(HALF_BINARY))
            other = draw(st.sampled_from(sides + (0.5, -1.25, 3.0)))
            steps.append((op, other, "_") if draw(st.booleans()) else (op, other))
    return steps


def _one_by_one(first, steps, sides):
    """``first`` then every step with dynshape.run: the result fused chains must equal."""
    v = first
    with np.errstate(all="ignore"):
        for s in steps:
            name, rest = (s, ()) if isinstance(s, str) else (s[0], s[1:])
            if rest and isinstance(rest[-1], dict):
                v = dynshape.run(name, v, **rest[-1])
            elif not rest:
                v = dynshape.run(name, v)
            else:
                ops = rest if len(rest) == 2 else ("_", rest[0])
                a, b = (v if o == "_" else sides[o] if isinstance(o, str) else o for o in ops)
                v = dynshape.run(name, a, b)
    return v


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


@given(FORMATS, st.data())
def test_chains_led_by_matmul_or_gemm_round_as_the_ops_one_by_one(fmt, data):
    """A half-precision matmul/gemm with an epilogue chain equals the matmul, rounded to the
    format, then every step one by one (each rounds): bit for bit, NaNs included; side
    inputs of the output's shape (any view), per column, per row and scalars."""
    batch = data.draw(st.sampled_from([(), (2,)]))
    M, K, N = (data.draw(st.integers(1, 40)) for _ in range(3))
    a = data.draw(testing.views(batch + (M, K), fmt))
    b = data.draw(testing.views((K, N), fmt))
    kinds = {"full": batch + (M, N), "col": (N,), "row": (M, 1), "one": ()}
    sides = {k: (data.draw(testing.views(shp, fmt)) if shp else
                 np.asarray(data.draw(st.floats(-3, 3, width=16)), fmt))
             for k, shp in kinds.items()}
    steps = data.draw(_lead_chain(tuple(kinds)))
    f = dynshape.fuse(["matmul"] + steps)
    with np.errstate(all="ignore"):
        got = f(a, b, **{k: sides[k] for k in f.side_names})
    _same(got, _one_by_one(dynshape.run("matmul", a, b), steps, sides))
    if not batch:
        c = sides["col"]
        g = dynshape.fuse([("gemm", {"transB": 1, "alpha": 0.5, "beta": 2.0, "C": "c"})]
                          + steps)
        with np.errstate(all="ignore"):
            got = g(a, b.T, **{k: (c if k == "c" else sides[k]) for k in g.side_names})
        first = dynshape.run("gemm", a, b.T, c, transB=1, alpha=0.5, beta=2.0)
        _same(got, _one_by_one(first, steps, sides))


@given(FORMATS, st.data())
def test_chains_led_by_conv2d_round_as_the_ops_one_by_one(fmt, data):
    """The same for a leading conv2d (with and without its bias; strides, pads, groups;
    every static kernel): per-channel, per-position and full-shape sides, any views."""
    from dynshape.runtime import conv as conv_executor
    G = data.draw(st.sampled_from([1, 2]))
    Cg, Mg = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    KH, KW = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    N, H, W = data.draw(st.integers(1, 2)), data.draw(st.integers(3, 12)), \
        data.draw(st.integers(3, 14))
    attrs = {"strides": (data.draw(st.integers(1, 2)),) * 2,
             "pads": tuple(data.draw(st.integers(0, 1)) for _ in range(4)), "group": G}
    x = data.draw(testing.views((N, Cg * G, H, W), fmt))
    w = data.draw(testing.views((Mg * G, Cg, KH, KW), fmt))
    bias = data.draw(testing.views((Mg * G,), fmt)) if data.draw(st.booleans()) else None
    # the chain and its lone conv2d on the same static kernel: two kernels may sum K in
    # another order, and a float32 sum that differs in its last bit can round to another
    # half-precision value
    slot = data.draw(st.sampled_from([None, 0, 1, 2]))
    with conv_executor.forcing_slot(slot):
        y0 = dynshape.run("conv2d", x, w, **attrs) if bias is None else \
            dynshape.run("conv2d", x, w, bias, **attrs)
    kinds = {"full": y0.shape, "chan": (Mg * G, 1, 1), "pos": y0.shape[-2:], "one": ()}
    sides = {k: (data.draw(testing.views(shp, fmt)) if shp else
                 np.asarray(data.draw(st.floats(-3, 3, width=16)), fmt))
             for k, shp in kinds.items()}
    steps = data.draw(_lead_chain(tuple(kinds)))
    lead = ("conv2d", dict(attrs, bias="bias") if bias is not None else attrs)
    f = dynshape.fuse([lead] + steps)
    given_ = {k: sides[k] for k in f.prog_sides}
    if bias is not None:
        given_["bias"] = bias
    with conv_executor.forcing_slot(slot):
        with np.errstate(all="ignore"):
            got = f(x, w, **given_)
    _same(got, _one_by_one(y0, steps, sides))


# ---- lookup tables: unary ops on the formats read from tables (dynshape/ops/lookup.py) -----
LOOKUP_CASES = [("exp", {}), ("log", {}), ("sigmoid", {}), ("tanh", {}), ("silu", {}),
                ("gelu", {}), ("gelu", {"approximate": "tanh"})]


def _kernel_op(op, kw):
    from dynshape.ops import get
    return get(op).kernel_op(get(op).check_attrs(kw)) if kw else op


def test_lookup_cases_cover_the_table_ops():
    from dynshape_kernels.abi.storage import LOOKUP_OPS
    assert set(LOOKUP_OPS) == {"float16", "bfloat16"}
    assert set().union(*LOOKUP_OPS.values()) <= {_kernel_op(op, kw) for op, kw in LOOKUP_CASES}


@pytest.mark.parametrize("fmt", [F16, BF16], ids=str)
@pytest.mark.parametrize("op,kw", LOOKUP_CASES, ids=lambda v: str(v) if v else "")
def test_table_reads_give_the_computed_results_for_every_value(op, kw, fmt):
    """Every one of the 65,536 inputs, through contiguous rows, strided rows and strided 2-D
    tiles: the table read is bit for bit the computed kernel (NaN payloads included)."""
    from dynshape.ops import get, lookup
    from dynshape_kernels.abi.storage import LOOKUP_OPS, LOOKUP_SIZE
    every = np.arange(1 << 16, dtype=np.uint16).view(fmt)
    launch = get(op).prepare([every], None, dict(kw))
    reads = _kernel_op(op, kw) in LOOKUP_OPS[fmt.name]
    assert (launch.fattrs.size == LOOKUP_SIZE) == reads   # the call reads a table or not
    for x in (every, every[::-3], every.reshape(256, 256).T[1::2, ::3]):
        with lookup.computing():
            want = dynshape.run(op, x, target="cpu", **kw)
        got = dynshape.run(op, x, **kw)
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_the_unary_driver_reads_the_table_it_is_given(monkeypatch):
    """A table that maps every value to itself makes sigmoid (a table op in both formats) the
    identity: the driver reads the table on every path (rows, strided rows, DISCARD and 2-D
    tiles, out=)."""
    from dynshape.ops import lookup
    from dynshape_kernels.abi.storage import LOOKUP_BASE, LOOKUP_SIZE

    def identity(name, dtype_name, fattrs, attrs):
        t = np.zeros(LOOKUP_SIZE, np.float32)
        t[LOOKUP_BASE:].view(np.uint16)[:] = np.arange(1 << 16, dtype=np.uint16)
        return t
    dynshape.clear_cache()
    monkeypatch.setattr(lookup, "_build", identity)
    try:
        rng = np.random.default_rng(3)
        x = rng.standard_normal((67, 301)).astype(BF16)
        for v in (x, x[:, ::2], x.T, x[5:9, 7:300]):
            np.testing.assert_array_equal(dynshape.run("sigmoid", v).view(np.uint16),
                                          np.ascontiguousarray(v).view(np.uint16))
        out = np.zeros((301, 67), BF16)
        dynshape.run("sigmoid", x.T, out=out)
        np.testing.assert_array_equal(out.view(np.uint16), x.T.view(np.uint16))
    finally:
        dynshape.clear_cache()          # no identity table outlives the test


def test_tables_are_bounded_and_cleared():
    from dynshape.ops import lookup
    dynshape.clear_cache()
    assert lookup.cached_tables() == 0
    x = np.ones((3, 5), F16)
    for _ in range(3):
        for fmt in (F16, BF16):
            for op, kw in LOOKUP_CASES:
                dynshape.run(op, x.astype(fmt), **kw)
            dynshape.run("relu", x.astype(fmt))            # computed: no table
            dynshape.run("leaky_relu", x.astype(fmt), alpha=0.3)
    from dynshape_kernels.abi.storage import LOOKUP_OPS
    assert lookup.cached_tables() == sum(len(v) for v in LOOKUP_OPS.values())
    dynshape.explain("gelu", (4, 4), dtype="bfloat16")      # planning builds no table
    dynshape.clear_cache()
    dynshape.explain("gelu", (4, 4), dtype="bfloat16")
    assert lookup.cached_tables() == 0
