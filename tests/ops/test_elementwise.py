"""Elementwise ops against NumPy: random shapes, dtypes, broadcasting, strided and negative-
stride views, out= (also aliasing an input) and attributes."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dynshape
from dynshape import testing
from dynshape.runtime import streaming

from oracles import UNARY_REF, check, gelu_tanh_ref, ulps  # noqa: E402

dtypes = st.sampled_from([np.float32, np.float64, np.int32, np.int64])
float_dtypes = st.sampled_from([np.float32, np.float64])


@given(st.sampled_from(sorted(UNARY_REF)), dtypes, st.data())
def test_unary_matches_numpy(op, dtype, data):
    if op == "reciprocal" and np.dtype(dtype).kind == "i":
        dtype = np.float64
    x = data.draw(testing.views(testing.shapes(max_rank=4, max_side=30), dtype))
    xr = x if op in ("relu", "abs", "neg") else x.astype(np.result_type(x.dtype, np.float16))
    with np.errstate(all="ignore"):
        want = UNARY_REF[op](xr)
        got = dynshape.run(op, x)
    check(op, got, want)


@given(float_dtypes)
def test_special_values(dtype):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e30, -1e30, 88.7, -104.0,
                  709.0, -745.0], dtype=dtype)
    with np.errstate(all="ignore"):
        for op, ref in UNARY_REF.items():
            check(op, dynshape.run(op, x), ref(x))


@given(float_dtypes, st.floats(-3, 3), st.data())
def test_leaky_relu_and_gelu_tanh(dtype, alpha, data):
    x = data.draw(testing.views(testing.shapes(max_rank=3, max_side=50), dtype))
    want = np.where(x >= 0, x, x * dtype(alpha))
    check("leaky_relu", dynshape.run("leaky_relu", x, alpha=alpha), want.astype(dtype))
    check("gelu", dynshape.run("gelu", x, approximate="tanh"), gelu_tanh_ref(x))


@given(dtypes, st.data())
def test_clip(dtype, data):
    x = data.draw(testing.views(testing.shapes(max_rank=3, max_side=50), dtype))
    lo = data.draw(st.none() | st.integers(-10, 5))
    hi = data.draw(st.none() | st.integers(-5, 10))
    want = np.clip(x, lo, hi) if (lo is not None or hi is not None) else x.copy()
    got = dynshape.run("clip", x, min=lo, max=hi)
    np.testing.assert_array_equal(got, want.astype(x.dtype))


@st.composite
def broadcast_pair(draw):
    shape = draw(testing.shapes(max_rank=4, max_side=12))
    def sub(shape):
        k = draw(st.integers(0, len(shape)))
        return tuple(1 if draw(st.booleans()) else n for n in shape[len(shape) - k:])
    a, b = sub(shape), sub(shape)
    if draw(st.booleans()):
        a, b = shape, b
    return a, b


from oracles import BINARY_REF  # noqa: E402


@given(st.sampled_from(sorted(BINARY_REF)), dtypes, broadcast_pair(), st.data())
def test_binary_broadcast_matches_numpy(op, dtype, shapes, data):
    a = data.draw(testing.views(shapes[0], dtype))
    b = data.draw(testing.views(shapes[1], dtype))
    if op == "pow":
        b = np.abs(b) % 4 if np.dtype(dtype).kind == "i" else b
        a = np.abs(a) if np.dtype(dtype).kind == "f" else a
    with np.errstate(all="ignore"):
        want = BINARY_REF[op](a, b)
        got = dynshape.run(op, a, b)
    if op in ("pow",) and got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6 if got.dtype == np.float32 else 1e-14,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16])
@pytest.mark.parametrize("layout", ["a.T", "b.T", "both.T", "a.T, b column", "out.T",
                                    "a reversed.T"])
def test_binary_on_transposed_operands_over_ragged_tiles(layout, dtype):
    """Transposed operands run through 2-D tiles (one operand gathered block by block,
    the other read in place, or both gathered, or a strided output written through a
    scratch tile): each op, over several tiles with ragged edges, against NumPy, and
    nothing written outside the output."""
    rng = np.random.default_rng(7)
    m, n = 131, 203                  # several square tiles, ragged edges

    def draw(shape):
        return (rng.standard_normal(shape) * 4 + 1).astype(dtype)
    a, b = draw((m, n)), draw((m, n))
    if "a" in layout or "both" in layout:
        a = draw((n, m)).T
    if "b.T" in layout or "both" in layout:
        b = draw((n, m)).T
    if "a reversed" in layout:
        a = draw((n, m))[::-1].T
    if "b column" in layout:
        b = draw((m, 1))
    for op in ("add", "sub", "mul", "maximum"):
        want = BINARY_REF[op](a, b)
        if layout == "out.T":
            root = np.full((n + 2, m), 99, dtype)
            out = root[1:-1].T
            got = dynshape.run(op, a, b, out=out)
            assert got is out
            assert (root[0] == 99).all() and (root[-1] == 99).all()
        else:
            got = dynshape.run(op, a, b)
        np.testing.assert_array_equal(got, want, err_msg=f"{op} {layout}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16])
@pytest.mark.parametrize("layout", ["x.T", "x reversed.T", "x.T into a view"])
def test_unary_on_transposed_views_over_ragged_tiles(layout, dtype):
    """A transposed input runs through 2-D tiles transposed straight into the output, the
    op then applied to the output's rows in place (a half-precision op reading its lookup
    table, ops with attributes): each op over several tiles with ragged edges gives the
    values of the same op on a contiguous copy, NumPy's within the documented tolerance,
    and nothing is written outside the output."""
    rng = np.random.default_rng(11)
    m, n = 131, 203                  # several square tiles, ragged edges
    base = (rng.standard_normal((n, m)) * 3 + 0.5).astype(dtype)
    x = base[::-1].T if "reversed" in layout else base.T
    ops = [(op, {}) for op in UNARY_REF] + [("clip", {"min": -1, "max": 2}),
                                            ("leaky_relu", {"alpha": 0.25})]
    if np.dtype(dtype).kind == "i":
        ops = [(op, kw) for op, kw in ops if op in ("relu", "abs", "neg", "clip")]
    for op, kw in ops:
        with np.errstate(all="ignore"):
            same = dynshape.run(op, np.ascontiguousarray(x), **kw)
            if layout == "x.T into a view":
                root = np.full((m + 2, n + 3), 7, same.dtype)
                got = dynshape.run(op, x, out=root[1:-1, 2:-1], **kw)
                assert got.base is root
                inner = np.full(root.shape, True)
                inner[1:-1, 2:-1] = False
                assert (root[inner] == 7).all(), op
            else:
                got = dynshape.run(op, x, **kw)
        np.testing.assert_array_equal(got, same, err_msg=f"{op} {layout}")
        if op in UNARY_REF and dtype != np.float16:
            with np.errstate(all="ignore"):
                check(op, got, UNARY_REF[op](x))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
@pytest.mark.parametrize("shapes", [
    ((4096, 64), (64,)), ((4096, 64), (4096, 1)), ((64,), (4096, 64)), ((4096, 1), (4096, 64)),
    ((9000, 7), (9000, 1)), ((3, 900, 5), (3, 1, 5)), ((700, 300), (700, 1)),
    ((2, 64, 30, 30), (1, 64, 1, 1)), ((1, 513), (2000, 513)), ((129, 70), (70,)),
    # both inputs repeat (an outer difference): short rows and long ones
    ((4096, 1), (1, 64)), ((1, 70), (500, 1)), ((300, 1), (1, 300)), ((2, 50, 1), (1, 1, 9))])
@pytest.mark.parametrize("strided", [False, True])
def test_binary_with_a_repeating_input_over_many_short_rows(shapes, strided, dtype):
    """One input or both repeat along the output's rows (one value per row, or one row for
    every row) while rows are short or long, read in place or from a strided view: sub (so that
    swapped operands show) against NumPy, and nothing written outside the output."""
    rng = np.random.default_rng(11)

    def draw(shape):
        full = (rng.standard_normal(shape[:-1] + (shape[-1] + 3,)) * 8).astype(dtype)
        return full[..., :shape[-1]] if strided else np.ascontiguousarray(full[..., :shape[-1]])
    a, b = draw(shapes[0]), draw(shapes[1])
    shape = np.broadcast_shapes(a.shape, b.shape)
    root = np.full((2,) + shape, 99, dtype)
    out = root[1:].reshape(shape) if len(shape) else root[1:]
    for r in (dynshape.run("sub", a, b), dynshape.run("sub", a, b, out=out)):
        np.testing.assert_array_equal(r, a - b)
    assert (root[0] == 99).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16])
@pytest.mark.parametrize("m, n", [(400, 77), (20000, 77), (70000, 16), (4000, 512),
                                  (4000, 513), (2000, 1000), (900, 31)])
@pytest.mark.parametrize("layout", ["padded out", "out with gaps", "in place", "batches"])
def test_a_bias_row_over_long_runs_of_rows(m, n, layout, dtype):
    """A row repeated for every row (a bias) over runs of rows long enough to take it from a
    tile of whole rows, filled once per run (``elementwise._repeated_row``: rows up to
    REPEAT_ROW_MAX long that follow each other in x and the output), on either side of
    sub (so that swapped operands show), serial and parallel sizes; the layouts it must
    leave to the row-by-row path (an output with gaps between rows, out= x itself) and
    batches whose rows do not follow across the batch. Both table variants (the optimized
    one may tile short rows by the square tile instead). Against NumPy, exactly; nothing
    written outside the output."""
    for policy in ("simplified", "optimized"):
        dynshape.set_policy(policy)
        dynshape.clear_cache()
        _bias_row_case(m, n, layout, dtype)


def _bias_row_case(m, n, layout, dtype):
    rng = np.random.default_rng(m + n)
    bias = (rng.standard_normal(n) * 8).astype(dtype)
    if layout == "batches":
        x = (rng.standard_normal((3, m // 3 + 5, n)) * 8).astype(dtype)[:, :m // 3]
    else:
        x = (rng.standard_normal((m, n)) * 8).astype(dtype)
    for left in (True, False):
        want = x - bias if left else bias - x
        args = (x, bias) if left else (bias, x)
        if layout == "in place":
            xc = x.copy()
            got = dynshape.run("sub", *((xc, bias) if left else (bias, xc)), out=xc)
            assert got is xc
        elif layout == "out with gaps":
            root = np.full((m, n + 3), 99, dtype)
            got = dynshape.run("sub", *args, out=root[:, :n])
            assert (root[:, n:] == 99).all()
        else:
            root = np.full((x.size // n + 2, n), 99, dtype)
            out = root[1:-1].reshape(x.shape)
            got = dynshape.run("sub", *args, out=out)
            assert got is out
            assert (root[0] == 99).all() and (root[-1] == 99).all()
        np.testing.assert_array_equal(got, want, err_msg=f"left={left}")


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
@pytest.mark.parametrize("shape, wide", [((4096, 64), 100), ((3000, 16), 40), ((50, 255), 300),
                                         ((7, 3, 9), 11)])
@pytest.mark.parametrize("layout", ["x strided", "out strided", "both strided", "in place"])
def test_unary_over_many_short_strided_rows(layout, shape, wide, dtype):
    """Short unit-stride rows that do not follow each other (a column slice of a wider
    array) run through a scratch tile many rows at a time: each op against NumPy, the
    half-precision lookup tables included, in place too, nothing written outside the
    output."""
    rng = np.random.default_rng(5)
    big = (rng.standard_normal(shape[:-1] + (wide,)) * 3).astype(dtype)
    x = big[..., :shape[-1]] if layout != "out strided" else np.ascontiguousarray(
        big[..., :shape[-1]])
    for op in ("neg", "relu", "abs") + (("exp",) if dtype != np.int32 else ()):
        with np.errstate(all="ignore"):
            want = UNARY_REF[op](x.astype(np.float32) if dtype == np.float16 else x)
            want16 = want.astype(dtype)
        if layout == "in place":
            y = big.copy()
            v = y[..., :shape[-1]]
            assert dynshape.run(op, v, out=v) is v
            got = v
            np.testing.assert_array_equal(y[..., shape[-1]:], big[..., shape[-1]:])
        elif layout == "x strided":
            got = dynshape.run(op, x)
        else:
            root = np.full(shape[:-1] + (wide,), 7, dtype)
            got = root[..., :shape[-1]]
            assert dynshape.run(op, x, out=got) is got
            assert (root[..., shape[-1]:] == 7).all()
        if dtype == np.float16:                 # rounded once from float32: within 1 ulp
            assert got.dtype == np.float16 and ulps(got, want16) <= 1, op
        else:
            check(op, got, want)


def test_binary_scalars_and_promotion():
    x = np.arange(10, dtype=np.float32)
    r = dynshape.run("add", x, 2.5)
    assert r.dtype == np.float32 and np.array_equal(r, x + 2.5)
    r = dynshape.run("mul", 3, np.arange(4, dtype=np.int32))
    assert r.dtype == np.int32 and r.tolist() == [0, 3, 6, 9]
    r = dynshape.run("add", np.ones(3, np.float32), np.ones(3, np.float64))
    assert r.dtype == np.float64
    r = dynshape.run("div", np.arange(4), 2)
    assert r.dtype == np.float64 and r.tolist() == [0, 0.5, 1, 1.5]
    r = dynshape.run("exp", np.arange(3, dtype=np.int32))
    assert r.dtype == np.float64


def test_nan_propagation_of_maximum_minimum():
    a = np.array([np.nan, 1, 2, np.nan], np.float32)
    b = np.array([0, np.nan, 1, np.nan], np.float32)
    np.testing.assert_array_equal(dynshape.run("maximum", a, b), np.maximum(a, b))
    np.testing.assert_array_equal(dynshape.run("minimum", a, b), np.minimum(a, b))


@given(st.sampled_from(["relu", "exp", "neg"]), float_dtypes, st.data())
def test_out_strided_and_in_place(op, dtype, data):
    shape = data.draw(testing.shapes(max_rank=3, max_side=40))
    x = data.draw(testing.views(shape, dtype))
    out = data.draw(testing.views(shape, dtype))
    with np.errstate(all="ignore"):
        want = UNARY_REF[op](x)
        r = dynshape.run(op, x, out=out)
    assert r is out
    check(op, out, want)
    # exact alias: in place
    y = x.copy()
    with np.errstate(all="ignore"):
        dynshape.run(op, y, out=y)
    check(op, y, want)


def test_out_partially_aliasing_an_input_is_resolved_like_numpy():
    base = np.arange(20, dtype=np.float64)
    want = base[:-1] + base[1:]
    dynshape.run("add", base[:-1], base[1:], out=base[1:])
    np.testing.assert_array_equal(base[1:], want)


@given(testing.shapes(max_rank=5, max_side=9), st.data())
def test_copy_and_transpose_materialise_views(shape, data):
    x = data.draw(testing.views(shape, np.float32))
    c = dynshape.run("copy", x)
    assert c.flags.c_contiguous and np.array_equal(c, x)
    axes = tuple(data.draw(st.permutations(range(len(shape)))))
    t = dynshape.run("transpose", x, axes=axes)
    assert t.flags.c_contiguous and np.array_equal(t, x.transpose(axes))


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.float16, np.uint16, np.complex64])
def test_copy_any_small_dtype(dtype):
    x = (np.arange(60).reshape(3, 4, 5) % 3).astype(dtype)[:, ::-1, ::2]
    np.testing.assert_array_equal(dynshape.run("copy", x), x)
    np.testing.assert_array_equal(dynshape.run("transpose", x), x.T)
    # out= a strided, reversed, transposed view inside a sentinel-filled buffer
    root = np.full((5, 4, 3), 7, dtype)
    out = root[::-1][:3].transpose(2, 1, 0)           # root[4:1:-1] seen as (3, 4, 3)
    assert out.shape == x.shape and not out.flags.c_contiguous
    r = dynshape.run("copy", x, out=out)
    assert r is out
    np.testing.assert_array_equal(out, x)
    assert (root[:2] == np.asarray(7, dtype)).all()  # the two rows outside out are untouched
    out2 = np.full((3, 4, 3), 7, dtype).transpose(2, 1, 0)
    dynshape.run("transpose", x, out=out2)
    np.testing.assert_array_equal(out2, x.T)


@pytest.mark.parametrize("bits", [np.uint32, np.uint64])
@pytest.mark.parametrize("as_dtype", ["float", "int", "uint"])
def test_copies_of_4_and_8_byte_items_keep_every_bit(bits, as_dtype):
    """4- and 8-byte items are copied by the float driver of that size: every bit pattern
    comes back unchanged (signalling and payload NaNs, subnormals, -0), contiguous,
    reversed, transposed and into a strided out= view, and through streaming stores."""
    rng = np.random.default_rng(3)
    n = 4099
    raw = rng.integers(0, np.iinfo(bits).max, size=n, dtype=bits, endpoint=True)
    size = np.dtype(bits).itemsize
    special = {4: [0x7F800001, 0xFFA00001, 0x7FC12345, 0x00000001, 0x80000000, 0x807FFFFF],
               8: [0x7FF0000000000001, 0xFFF4000000000001, 0x7FF8123456789ABC, 1,
                   0x8000000000000000, 0x800FFFFFFFFFFFFF]}[size]
    raw[:len(special)] = special
    x = raw.view({"float": f"float{8 * size}", "int": f"int{8 * size}", "uint": bits}[as_dtype])
    try:
        for stream in (None, 0):
            streaming.set_stream_bytes(stream)
            dynshape.clear_cache()
            for v in (x, x[::-1], x[1:].reshape(-1, 2)[:, ::-1]):
                assert dynshape.run("copy", v).tobytes() == np.ascontiguousarray(v).tobytes()
            m = x[:4096].reshape(64, 64)
            assert dynshape.run("transpose", m).tobytes() == np.ascontiguousarray(m.T).tobytes()
            out = np.zeros((64, 128), x.dtype)[:, ::2]
            dynshape.run("copy", m, out=out)
            assert out.tobytes() == m.tobytes()
    finally:
        streaming.set_stream_bytes(None)
        dynshape.clear_cache()


def test_large_odd_shapes():
    rng = np.random.default_rng(0)
    for shape in [(1000003,), (517, 1531), (3, 255, 257)]:
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(dynshape.run("relu", x), np.maximum(x, 0))
        y = rng.standard_normal(shape[-1:]).astype(np.float32)
        np.testing.assert_array_equal(dynshape.run("add", x, y), x + y)
    a = rng.standard_normal((1531, 517)).astype(np.float32)
    np.testing.assert_array_equal(dynshape.run("copy", a.T), a.T)


def test_out_with_byte_strides_that_are_not_whole_elements():
    """A field of a packed record array: no driver can address it, so a temporary is used."""
    rec = np.zeros((3, 4), dtype=[("a", np.int8), ("v", np.float32)])
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 6
    dynshape.run("relu", x, out=rec["v"])
    np.testing.assert_array_equal(rec["v"], np.maximum(x, 0))
    assert (rec["a"] == 0).all()
    red = np.zeros(3, dtype=[("a", np.int8), ("v", np.float32)])
    dynshape.run("sum", x, axis=1, out=red["v"])
    np.testing.assert_allclose(red["v"], x.sum(1))
    dynshape.run("softmax", x, out=rec["v"])
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(rec["v"], e / e.sum(1, keepdims=True), rtol=1e-6)


_POW_SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 2.5, -2.5,
                          np.inf, -np.inf, np.nan, 1e-40, -1e-40, 1e30, 0.999, 1.001, 88.0],
                         np.float32)


def test_float32_pow_special_values_follow_c99_and_powers_round_correctly():
    """float32 pow (exp(y log|x|) in float64, rounded once): every pair of special values
    (signed zeros, infinities, NaN, +-1, odd, even and non-integer exponents, subnormals)
    gives libm powf's value, NaN and sign included, up to 1 ulp; random powers are the
    correctly rounded ones (a float64 reference rounded once), squares, 1 and -1 exactly."""
    X, Y = (v.ravel().copy() for v in np.meshgrid(_POW_SPECIALS, _POW_SPECIALS))
    got = dynshape.run("pow", X, Y)
    with np.errstate(all="ignore"):
        ref = np.power(X.astype(np.float64), Y.astype(np.float64)).astype(np.float32)
    nan = np.isnan(ref)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(np.signbit(got[~nan]), np.signbit(ref[~nan]))
    np.testing.assert_allclose(got[~nan], ref[~nan], rtol=1.2e-7, atol=0)
    rng = np.random.default_rng(5)
    x = (rng.random(100_003) * 10).astype(np.float32)
    y = (rng.standard_normal(100_003) * 5).astype(np.float32)
    got = dynshape.run("pow", x, y)
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(got, ref)
    s = rng.standard_normal(1001).astype(np.float32)
    for e, want in ((2.0, s * s), (1.0, s), (-1.0, np.float32(1) / s)):
        np.testing.assert_array_equal(dynshape.run("pow", s, np.full_like(s, e)), want)
        np.testing.assert_array_equal(dynshape.run("pow", s, e), want)   # a Python number


def _pow_reference(x, e):
    """x ** e as the kernels compute it: float32 squares in float32, float32 cubes as the
    float64 cube rounded once, other float32 powers the float64 power rounded once, half
    precision through float32 (as NumPy does), the rest NumPy's."""
    with np.errstate(all="ignore"):
        if x.dtype == np.float16:
            return _pow_reference(x.astype(np.float32), e).astype(np.float16)
        if x.dtype == np.float32 and e == 2:
            return x * x
        if x.dtype == np.float32:
            w = x.astype(np.float64)
            return (w * w * w if e == 3 else np.power(w, np.float64(e))).astype(np.float32)
        if x.dtype == np.float64 and e == 2:
            return x * x
        return np.power(x, x.dtype.type(e))


def _assert_pow(got, want, e):
    """Equal; float64 powers other than squares (libm's pow, as before, against NumPy's own
    pow) within 1 ulp, and any float64 power when ``e`` is None."""
    if got.dtype == np.float64 and e != 2:
        np.testing.assert_allclose(got, want, rtol=2.3e-16, atol=0)
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"{got.dtype} ** {e}")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64"])
def test_pow_with_one_exponent_squares_and_cubes_exactly(dtype):
    """An exponent that is one value for the whole loop (a Python number, a 0-d array, one
    value per row) runs squares and cubes without exp and log: every element as the
    reference computes it, special values (signed zeros, infinities, NaN, overflow,
    subnormals) included, rows of different exponents each by its own; other exponents
    take the general path."""
    rng = np.random.default_rng(11)
    if dtype.startswith("int"):
        x = rng.integers(-3000, 3000, (37, 101)).astype(dtype)
        x[0, :4] = [np.iinfo(dtype).max, np.iinfo(dtype).min, -1, 0]     # wrapping products
    else:
        x = (rng.standard_normal((37, 101)) * 4).astype(dtype)
        tiny = np.finfo(dtype).smallest_subnormal
        x[0, :9] = [0.0, -0.0, np.inf, -np.inf, np.nan, np.finfo(dtype).max, tiny, -tiny,
                    np.sqrt(np.finfo(dtype).max)]
    for e in (2, 3, 4) if dtype.startswith("int") else (2.0, 3.0, 2.5, -1.0):
        want = _pow_reference(x, e)
        for exponent in (e, np.array(e, dtype)):
            got = dynshape.run("pow", x, exponent)
            _assert_pow(got, want, e)
            real = ~np.isnan(want) if want.dtype.kind == "f" else np.ones(want.shape, bool)
            np.testing.assert_array_equal(np.signbit(got[real]), np.signbit(want[real]))
        got = dynshape.run("pow", x[:, ::3], np.array([e], dtype))    # strided rows
        _assert_pow(got, _pow_reference(x[:, ::3], e), e)
    exps = (2, 3, 4, 2) if dtype.startswith("int") else (2.0, 3.0, 2.5, -1.0)
    column = np.array([exps[r % 4] for r in range(x.shape[0])], dtype)[:, None]
    got = dynshape.run("pow", x, column)                           # one exponent per row
    for r in range(x.shape[0]):
        # (float64 rows of squares may take libm's pow too: within 1 ulp of x * x)
        _assert_pow(got[r], _pow_reference(x[r], exps[r % 4]),
                    None if dtype == "float64" else exps[r % 4])


@pytest.mark.parametrize("e", [2.0, 3.0])
def test_a_fused_pow_by_a_constant_squares_and_cubes_exactly(e):
    x = (np.random.default_rng(12).standard_normal((19, 333)) * 4).astype(np.float32)
    got = dynshape.fuse([("add", "b"), ("pow", e)])(x, b=x[0])
    np.testing.assert_array_equal(got, _pow_reference(x + x[0], e))
