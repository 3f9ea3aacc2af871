"""Half precision (float16, bfloat16) on the elementwise families: every op against a float32
NumPy reference rounded to the storage format, within the documented ULP bound (0 for the
exact ops, 1 for the transcendental ones); special values; views and broadcasting; the
promotion table; the catalog; no compilation on new shapes (every family); fused sequences
led by matmul or conv2d, which do not take half precision yet, refuse it by name. The reduce,
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


@pytest.mark.parametrize("call", [
    lambda x: dynshape.fuse(["matmul", "relu"])(x, x.T),
], ids=["fused-matmul"])
@pytest.mark.parametrize("fmt", [F16, BF16], ids=str)
def test_chains_led_by_matmul_refuse_half_precision_by_name(call, fmt):
    with pytest.raises(dynshape.DtypeError, match=f"{fmt}.*accepted: .*float32"):
        call(np.ones((4, 6), fmt))
