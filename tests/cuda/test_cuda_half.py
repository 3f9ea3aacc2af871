"""Half precision (float16, bfloat16) on the CUDA target, elementwise side: the device
conversions (``cuda.half``) against NumPy/ml_dtypes on every carrier, the unary and binary
ops and copies against a float64 reference rounded to the format (exact ops bit for bit,
transcendental ones within 1 ulp) and against the CPU's results, special values, fused
elementwise chains bit for bit the ops one by one, the catalog and ``explain``."""
import numpy as np
import pytest

import dynshape
from dynshape.fusion.parse import RUNNING
from halfcases import BF16, F16, FORMATS, bits, sample, specials, to_format, wide
from oracles import UNARY_REF, ulps

#: the ops whose float32 result is exact, so that one rounding gives the correctly rounded
#: result: their CUDA result must equal the reference bit for bit (NaN against NaN)
EXACT = {"relu", "abs", "neg", "add", "sub", "mul", "div", "maximum", "minimum", "clip",
         "leaky_relu", "copy"}
#: results this close to 0 lose their ulps to cancellation in the float64 references
ATOL = 1e-6
REF = UNARY_REF
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "pow": np.power, "maximum": np.maximum, "minimum": np.minimum}
FMT_IDS = [str(f) for f in FORMATS]


def reference(fn, fmt, *xs):
    with np.errstate(all="ignore"):
        return to_format(fn(*[wide(x) if isinstance(x, np.ndarray) else x for x in xs]), fmt)


def bound(op):
    return 0 if op in EXACT else 1


# ---- the device conversions, on the simulator ----------------------------------------------
def test_widen_is_exact_on_every_carrier(cuda):
    from dynshape_kernels.cuda import half
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    for fmt, widen, carrier in ((F16, half.widen16, np.uint16), (BF16, half.widenbf, np.int16)):
        got = np.array([widen(h) for h in every.view(carrier)], np.float32)
        np.testing.assert_array_equal(got.view(np.uint32),
                                      every.view(fmt).astype(np.float32).view(np.uint32),
                                      err_msg=str(fmt))


def test_narrow_rounds_to_nearest_even_like_numpy(cuda):
    """Random float32 bit patterns (every exponent), the ties, the overflow threshold and the
    subnormal range, from float32 and from float64 (rounded once, through rounding to odd);
    NaN stays NaN (float16: quiet, its sign kept)."""
    from dynshape_kernels.cuda import half
    rng = np.random.default_rng(7)
    f = rng.integers(0, 1 << 32, 3000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    edges = np.array([65504, 65519.996, 65520, 65536, 2.0 ** -14, 2.0 ** -24, 2.0 ** -25,
                      1.0000001 * 2.0 ** -25, 3 * 2.0 ** -25, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11,
                      1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 3.3961776e38, 3.4e38, 1e-45, np.inf,
                      0.0], np.float32)
    f = np.concatenate([f, edges, -edges, [np.nan, -np.nan]]).astype(np.float32)
    d = np.concatenate([rng.standard_normal(600) * 10.0 ** rng.integers(-9, 6, 600),
                        [1e300, 65519.999999999, 65520.000000001, 2.0 ** -25 + 1e-40,
                         1 + 2.0 ** -9 + 1e-15, 1 + 2.0 ** -9 - 1e-15]])
    for fmt, narrow, carrier in ((F16, half.narrow16, np.uint16), (BF16, half.narrowbf, np.int16)):
        got = np.array([narrow(v) for v in f], carrier)
        want = f.astype(fmt)
        nan = np.isnan(f)
        np.testing.assert_array_equal(bits(got)[~nan], bits(want)[~nan], err_msg=str(fmt))
        assert np.isnan(got.view(fmt)[nan].astype(np.float32)).all()
        if fmt == F16:
            assert (bits(got)[nan] & 0x7E00 == 0x7E00).all()           # quiet
            assert bits(got)[np.isnan(f) & np.signbit(f)][0] & 0x8000  # sign kept
        wide_store = half.access(str(fmt), None).store_wide
        got = np.array([wide_store(v) for v in d], carrier)
        np.testing.assert_array_equal(bits(got), bits(to_format(d, fmt)), err_msg=str(fmt))


# ---- elementwise ops -----------------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS, ids=FMT_IDS)
def test_unary_ops_against_reference_and_cpu(cuda, fmt):
    x = sample(fmt, (3, 9), seed=1)
    d = cuda.to_device(x)
    for op in sorted(REF):
        got = dynshape.run(op, d).copy_to_host()
        assert got.dtype == fmt, op
        assert ulps(got, reference(REF[op], fmt, x), ATOL) <= bound(op), op
        assert ulps(got, dynshape.run(op, x), ATOL) <= bound(op), op
    for op, kw, fn in (("clip", dict(min=-1.5, max=0.25), lambda v: np.clip(v, -1.5, 0.25)),
                       ("leaky_relu", dict(alpha=0.1),
                        lambda v: np.where(v >= 0, v, v * np.float32(0.1)))):
        got = dynshape.run(op, d, **kw).copy_to_host()
        want = reference(lambda v: fn(v.astype(np.float32)).astype(np.float64), fmt, x)
        assert ulps(got, want) == 0, op
        np.testing.assert_array_equal(bits(got), bits(dynshape.run(op, x, **kw)), err_msg=op)


@pytest.mark.parametrize("fmt", FORMATS, ids=FMT_IDS)
def test_binary_ops_broadcast_and_scalars(cuda, fmt):
    a = sample(fmt, (4, 6), seed=2)
    b = sample(fmt, (6,), seed=3)[::-1].copy()
    da, db = cuda.to_device(a), cuda.to_device(b)
    for op, fn in BINARY.items():
        got = dynshape.run(op, da, db).copy_to_host()
        assert got.dtype == fmt
        assert ulps(got, reference(fn, fmt, a, b), ATOL) <= bound(op), op
        assert ulps(got, dynshape.run(op, a, b), ATOL) <= bound(op), op
        got = dynshape.run(op, da, 2.0).copy_to_host()     # a Python scalar is weak
        assert got.dtype == fmt
        assert ulps(got, reference(fn, fmt, a, 2.0), ATOL) <= bound(op), op
    # overflow on rounding, exact cancellation, the largest finite values
    big = specials(fmt)[8]
    s = dynshape.run("add", cuda.to_device(np.array([big, -big, big], fmt)),
                     cuda.to_device(np.array([big, -big, -big], fmt))).copy_to_host()
    assert np.isposinf(s[0].astype(np.float32)) and np.isneginf(s[1].astype(np.float32))
    assert bits(s)[2] == 0


@pytest.mark.parametrize("fmt", FORMATS, ids=FMT_IDS)
def test_views_out_and_copies_keep_the_bits(cuda, fmt):
    x = sample(fmt, (6, 10), seed=4)
    d = cuda.to_device(x)
    np.testing.assert_array_equal(bits(dynshape.run("transpose", d).copy_to_host()),
                                  bits(x.T))
    got = dynshape.run("exp", d[::-2, 1::3]).copy_to_host()
    assert ulps(got, reference(np.exp, fmt, x[::-2, 1::3])) <= 1
    out = cuda.to_device(np.zeros((6, 20), fmt))
    dynshape.run("neg", d, out=out[:, ::2])
    host = out.copy_to_host()
    assert ulps(host[:, ::2], reference(np.negative, fmt, x)) == 0
    assert not bits(host[:, 1::2]).any()                  # nothing written outside out


@pytest.mark.parametrize("fmt", FORMATS, ids=FMT_IDS)
def test_fused_chains_round_every_step_like_the_ops_one_by_one(cuda, fmt):
    x = sample(fmt, (5, 8), seed=5)
    side = sample(fmt, (8,), seed=6, with_specials=False)
    dx, ds = cuda.to_device(x), cuda.to_device(side)
    f = dynshape.fuse(["abs", ("mul", 0.3), "exp", ("sub", "b"),
                       ("clip", {"min": -2.0, "max": 40.0}), ("div", 3.0, RUNNING),
                       ("leaky_relu", {"alpha": 0.2})])
    got = f(dx, b=ds).copy_to_host()
    assert got.dtype == fmt
    one = dynshape.run("mul", dynshape.run("abs", dx), 0.3)
    one = dynshape.run("sub", dynshape.run("exp", one), ds)
    one = dynshape.run("div", 3.0, dynshape.run("clip", one, min=-2.0, max=40.0))
    one = dynshape.run("leaky_relu", one, alpha=0.2).copy_to_host()
    np.testing.assert_array_equal(bits(got), bits(one))
    np.testing.assert_array_equal(bits(got), bits(f(x, b=side)))      # the CPU's, too


def test_kernels_are_in_the_cuda_catalog_packages_and_explain():
    from dynshape.cuda.package import pairs
    from dynshape_kernels.catalog import CATALOG
    fams = CATALOG.by_target["cuda"]
    for fam in ("unary", "binary", "reduce", "rowwise", "matmul", "pool", "conv"):
        assert {"float16", "bfloat16"} <= set(fams[fam].dtypes), fam
    assert {("fused", "float16"), ("fused", "bfloat16"), ("conv", "bfloat16")} <= set(pairs())
    for op, shape, fmt in (("gelu", (37, 1999), "bfloat16"), ("sum", (9, 300), "float16"),
                           ("softmax", (9, 300), "bfloat16")):
        t = dynshape.explain(op, shape, dtype=fmt, target="cuda")
        assert t.target == "cuda"
        kernels = {CATALOG[int(k)] for k in np.unique(t.entries[:, 0])}
        assert {(k.target, k.dtype, k.op) for k in kernels} == {("cuda", fmt, op)}
