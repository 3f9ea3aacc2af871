"""max_pool2d / avg_pool2d against a float64 NumPy reference and ONNX Runtime; tables, no
compilation on new shapes, one driver call, bad input."""
import importlib.util
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dynshape
from dynshape import testing
from dynshape.tables.pool_table import PoolTable
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.common_area import E_OFF0, E_OFF1
from dynshape_kernels.abi.pool_table import E_IH0, E_IW0
from dynshape_kernels.abi.tail_mode import VARIABLE_FULL

from oracles import ulps

BF16 = np.dtype(ml_dtypes.bfloat16)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture(scope="module", autouse=True)
def _warm():
    dynshape.warm(["pool"])


# ---- reference ---------------------------------------------------------------------------------
def resolve(n, k, s, d, pb, pe, auto_pad, ceil):
    """(out, pad_begin, pad_end) of one dimension, straight from the ONNX formulas."""
    dk = (k - 1) * d + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = -(-n // s)
        total = max(0, (out - 1) * s + dk - n)
        pb = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        return out, pb, total - pb
    if auto_pad == "VALID":
        return (n - dk) // s + 1, 0, 0
    span = n + pb + pe - dk
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= n + pb:      # the last window would start in the end padding
        out -= 1
    return out, pb, pe


def pool_ref(x, op, k, s, pads, auto_pad="NOTSET", d=(1, 1), ceil=False, cip=False):
    """Window by window in float64: taps that lie in x; avg divides by those taps, or with
    count_include_pad by the taps inside the padded input."""
    N, C, H, W = x.shape
    oh, pt, pb = resolve(H, k[0], s[0], d[0], pads[0], pads[2], auto_pad, ceil)
    ow, pl, pr = resolve(W, k[1], s[1], d[1], pads[1], pads[3], auto_pad, ceil)
    xd = x.astype(np.float64)
    y = np.empty((N, C, oh, ow))
    for i in range(oh):
        rows = i * s[0] - pt + d[0] * np.arange(k[0])
        rin = rows[(rows >= 0) & (rows < H)]
        rpad = np.count_nonzero((rows >= -pt) & (rows < H + pb))
        for j in range(ow):
            cols = j * s[1] - pl + d[1] * np.arange(k[1])
            cin = cols[(cols >= 0) & (cols < W)]
            cpad = np.count_nonzero((cols >= -pl) & (cols < W + pr))
            win = xd[:, :, rin][:, :, :, cin]
            if op == "max":
                y[:, :, i, j] = win.max(axis=(2, 3)) if win.size else -np.inf
            else:
                div = rpad * cpad if cip else len(rin) * len(cin)
                y[:, :, i, j] = win.sum(axis=(2, 3)) / div
    return y


def attrs_of(op, k, s, pads, auto_pad, d, ceil, cip):
    a = dict(kernel_shape=k, strides=s, pads=pads, auto_pad=auto_pad, ceil_mode=ceil)
    if op == "max":
        a["dilations"] = d
    else:
        a["count_include_pad"] = cip
    return a


def check(res, ref, op, dtype):
    assert res.shape == ref.shape
    assert res.dtype == dtype
    if np.dtype(dtype).itemsize == 2:
        # half precision: max exact; avg the float32 average rounded once, within 1 ulp of
        # the float64 average rounded to the format
        assert ulps(res, ref.astype(dtype)) <= (0 if op == "max" else 1)
    elif op == "max":          # exact: a max returns one of its inputs
        np.testing.assert_array_equal(res, ref.astype(dtype))
    else:
        tol = 2e-6 if dtype == np.float32 else 1e-13
        np.testing.assert_allclose(res, ref, rtol=tol, atol=tol * 8)


def fits(H, W, k, d, pads, auto_pad):
    """Whether the dilated window fits in the padded input (else the op raises ShapeError)."""
    if auto_pad.startswith("SAME"):
        return True
    p = (0, 0, 0, 0) if auto_pad == "VALID" else pads
    return (H + p[0] + p[2] >= (k[0] - 1) * d[0] + 1) and (W + p[1] + p[3] >= (k[1] - 1) * d[1] + 1)


@st.composite
def problems(draw, max_side=40):
    op = draw(st.sampled_from(["max", "avg"]))
    dtype = draw(st.sampled_from([np.float32, np.float64, np.float16, BF16]))
    side = st.one_of(st.sampled_from([1, 2, 3, 5, 7, 13, 17, 23, 31, 37]),
                     st.integers(1, max_side))
    N, C = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    H, W = draw(side), draw(side)
    k = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 3)), draw(st.integers(1, 3))) if op == "max" else (1, 1)
    auto_pad = draw(st.sampled_from(["NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER",
                                     "VALID"]))
    if auto_pad != "NOTSET":
        pads = (0, 0, 0, 0)
    elif draw(st.booleans()):
        pt, pl = draw(st.integers(0, k[0] - 1)), draw(st.integers(0, k[1] - 1))
        pads = (pt, pl, pt, pl)
    else:
        pads = tuple(draw(st.integers(0, k[i % 2] - 1)) for i in range(4))
    ceil, cip = draw(st.booleans()), draw(st.booleans())
    return op, dtype, (N, C, H, W), k, s, pads, auto_pad, d, ceil, cip


def strided_out(shape, dtype, draw):
    """A writable view of ``shape``: gaps between elements (sometimes reversed), or a
    transposed layout (channels last)."""
    if draw(st.booleans()):
        return np.full((shape[0], shape[2], shape[3], shape[1]), 7.0, dtype).transpose(0, 3, 1, 2)
    step = draw(st.sampled_from([1, 2, -1, -2]))
    base = np.full(shape[:-1] + (shape[-1] * abs(step) + 1,), 7.0, dtype)
    return base[..., ::step][..., :shape[-1]]


# ---- results -------------------------------------------------------------------------------------
@settings(max_examples=120, deadline=None)
@given(problems(), st.data())
def test_matches_reference(prob, data):
    op, dtype, shape, k, s, pads, auto_pad, d, ceil, cip = prob
    assume(fits(shape[2], shape[3], k, d, pads, auto_pad))
    x = data.draw(testing.views(shape, dtype=dtype))
    ref = pool_ref(x, op, k, s, pads, auto_pad, d, ceil, cip)
    a = attrs_of(op, k, s, pads, auto_pad, d, ceil, cip)
    check(dynshape.run(f"{op}_pool2d", x, **a), ref, op, dtype)
    out = strided_out(ref.shape, dtype, data.draw)
    res = dynshape.run(f"{op}_pool2d", x, out=out, **a)
    assert res is out
    check(out, ref, op, dtype)


@settings(max_examples=40, deadline=None)
@given(problems(max_side=20), st.integers(1, 3), st.booleans())
def test_reads_only_inside_x(prob, guard, flip):
    """x is the middle of a NaN-filled buffer (optionally reversed): a single read outside
    x would make a NaN appear in the result."""
    op, dtype, shape, k, s, pads, auto_pad, d, ceil, cip = prob
    assume(fits(shape[2], shape[3], k, d, pads, auto_pad))
    N, C, H, W = shape
    base = np.full((N, C, H + 2 * guard, W + 2 * guard), np.nan, dtype)
    inner = np.random.default_rng(H * 131 + W).standard_normal((N, C, H, W)).astype(dtype)
    base[:, :, guard:guard + H, guard:guard + W] = inner
    x = base[:, :, guard:guard + H, guard:guard + W]
    if flip:
        x = x[:, :, ::-1, ::-1]
    a = attrs_of(op, k, s, pads, auto_pad, d, ceil, cip)
    res = dynshape.run(f"{op}_pool2d", x, **a)
    ref = pool_ref(x, op, k, s, pads, auto_pad, d, ceil, cip)
    assert not np.isnan(res.astype(np.float32)).any()
    check(res, ref, op, dtype)


def test_nan_propagates_and_all_padding_window_is_minus_inf():
    x = np.arange(2 * 1 * 5 * 6, dtype=np.float64).reshape(2, 1, 5, 6)
    x[0, 0, 2, 3] = np.nan
    y = dynshape.run("max_pool2d", x, kernel_shape=(2, 2))
    np.testing.assert_array_equal(y, pool_ref(x, "max", (2, 2), (1, 1), (0,) * 4))
    assert np.isnan(y[0, 0, 1:3, 2:4]).all() and np.isnan(y).sum() == 4
    # a dilated window whose taps all fall in the padding: rows -1 and 1 of a 1-row image
    x1 = np.ones((1, 1, 1, 3), np.float32)
    y1 = dynshape.run("max_pool2d", x1, kernel_shape=(2, 1), dilations=(2, 1),
                      pads=(1, 0, 1, 0))
    assert y1.shape == (1, 1, 1, 3) and (y1 == -np.inf).all()


def test_ceil_mode_and_count_include_pad_divisors():
    """ceil_mode drops windows starting in the end padding; count_include_pad counts the
    padding but not the taps past it (PyTorch's rule)."""
    x = np.arange(1 * 1 * 6 * 6, dtype=np.float64).reshape(1, 1, 6, 6)
    a = dict(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), ceil_mode=True)
    y = dynshape.run("avg_pool2d", x, count_include_pad=True, **a)
    assert y.shape == (1, 1, 4, 4)          # ceil(5/2)+1 = 4; start 6 < 6+1 is kept
    # last window rows 5..7: row 5 in x, row 6 padding, row 7 beyond the padded input
    assert y[0, 0, 3, 3] == pytest.approx(x[0, 0, 5, 5] / 4)
    y0 = dynshape.run("avg_pool2d", x, count_include_pad=False, **a)
    assert y0[0, 0, 3, 3] == x[0, 0, 5, 5]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="PyTorch is not installed (the bench extra installs it)")
def test_ceil_mode_and_count_include_pad_match_pytorch():
    import torch
    x = np.arange(1 * 1 * 6 * 6, dtype=np.float64).reshape(1, 1, 6, 6)
    a = dict(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), ceil_mode=True)
    for cip in (False, True):
        t = torch.nn.functional.avg_pool2d(torch.from_numpy(x), 3, 2, 1, ceil_mode=True,
                                           count_include_pad=cip).numpy()
        np.testing.assert_allclose(dynshape.run("avg_pool2d", x, count_include_pad=cip, **a),
                                   t, rtol=1e-13)


def test_out_aliasing_x_and_empty_batch(driver_calls):
    x = np.random.default_rng(0).standard_normal((2, 3, 9, 9)).astype(np.float32)
    ref = pool_ref(x, "max", (1, 1), (1, 1), (0,) * 4)
    dynshape.run("max_pool2d", x, kernel_shape=(1, 1), out=x[:, :, ::-1, :][:, :, ::-1, :])
    np.testing.assert_array_equal(x, ref.astype(np.float32))
    big = np.random.default_rng(1).standard_normal((1, 1, 8, 8))
    expect = pool_ref(big, "avg", (2, 2), (1, 1), (0,) * 4)
    dynshape.run("avg_pool2d", big, kernel_shape=(2, 2), out=big[:, :, :7, :7])
    np.testing.assert_allclose(big[:, :, :7, :7], expect, rtol=1e-13)
    calls = len(driver_calls)
    y = dynshape.run("max_pool2d", np.zeros((0, 3, 5, 5), np.float32), kernel_shape=(2, 2))
    assert y.shape == (0, 3, 4, 4) and len(driver_calls) == calls


# ---- ONNX Runtime ----------------------------------------------------------------------------------
def _ort_pool(x, op, a):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper
    attrs = dict(kernel_shape=list(a["kernel_shape"]), strides=list(a["strides"]),
                 ceil_mode=int(a["ceil_mode"]))
    if a["auto_pad"] == "NOTSET":
        attrs["pads"] = list(a["pads"])
    else:
        attrs["auto_pad"] = a["auto_pad"]
    if op == "max":
        attrs["dilations"] = list(a["dilations"])
    else:
        attrs["count_include_pad"] = int(a["count_include_pad"])
    node = helper.make_node("MaxPool" if op == "max" else "AveragePool", ["x"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def test_matches_onnxruntime():
    """Every attribute combination ONNX Runtime implements as the ONNX spec states (it sizes
    SAME padding without dilations and applies ceil_mode to VALID; those are left out)."""
    pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(0)
    n = 0
    for H, W in ((7, 9), (11, 5), (13, 10)):
        x = rng.standard_normal((2, 3, H, W)).astype(np.float32)
        for op in ("max", "avg"):
            for k in ((3, 3), (2, 3)):
                for s in ((1, 1), (2, 2), (3, 2)):
                    for pads in ((0, 0, 0, 0), (1, 1, 1, 1), (1, 0, 0, 2)):
                        if any(p >= kk for p, kk in zip(pads, k + k)):
                            continue
                        for ap in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
                            if ap != "NOTSET" and any(pads):
                                continue
                            for ceil in (False, True):
                                if ap == "VALID" and ceil:
                                    continue
                                for d in ((1, 1), (2, 1)) if op == "max" else ((1, 1),):
                                    if ap.startswith("SAME") and d != (1, 1):
                                        continue
                                    for cip in (False, True) if op == "avg" else (False,):
                                        a = attrs_of(op, k, s, pads, ap, d, ceil, cip)
                                        res = dynshape.run(f"{op}_pool2d", x, **a)
                                        np.testing.assert_allclose(res, _ort_pool(x, op, a),
                                                                   rtol=1e-5, atol=1e-6)
                                        n += 1
    assert n > 300


# ---- tables ------------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
def onnx_output_size(n, k, s, d, pad_begin, pad_end, auto_pad, ceil_mode):
    """(output size, begin pad, end pad) of one dimension, written from the ONNX MaxPool /
    AveragePool specification (independent of dynshape's own helper): explicit pads give
    floor or ceil of (n + pads - dilated kernel) / stride + 1, where a ceil window must start
    inside the input or its begin padding; SAME_* pad so that the output is ceil(n / s), the
    odd pad at the end (UPPER) or the begin (LOWER); VALID pads nothing."""
    eff = d * (k - 1) + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = math.ceil(n / s)
        total = max((out - 1) * s + eff - n, 0)
        lo = total // 2 if auto_pad == "SAME_UPPER" else (total + 1) // 2
        return out, lo, total - lo
    if auto_pad == "VALID":
        return math.floor((n - eff) / s) + 1, 0, 0
    exact = (n + pad_begin + pad_end - eff) / s
    out = (math.ceil(exact) if ceil_mode else math.floor(exact)) + 1
    if ceil_mode and (out - 1) * s >= n + pad_begin:
        out -= 1
    return out, pad_begin, pad_end


@given(problems(max_side=300), st.data())
def test_table_covers_every_shape_of_its_bucket(prob, data):
    """Every output element exactly once; entries' input offsets are their first window's
    corner; every tile's windows meet x and the clipped rows/columns read lie inside x; and
    the table serves any input whose output falls in its bucket."""
    op, dtype, shape, k, s, pads, auto_pad, d, ceil, cip = prob
    assume(fits(shape[2], shape[3], k, d, pads, auto_pad))
    dt = np.dtype(dtype).name
    a = attrs_of(op, k, s, pads, auto_pad, d, ceil, cip)
    t = dynshape.explain(f"{op}_pool2d", shape, dtype=dt, **a)
    assert isinstance(t, PoolTable) and (t.entries[:, 1:3] == VARIABLE_FULL).all()
    H, W = shape[2:]
    oh, pt, pb = onnx_output_size(H, k[0], s[0], d[0], pads[0], pads[2], auto_pad, ceil)
    ow, pl, pr = onnx_output_size(W, k[1], s[1], d[1], pads[1], pads[3], auto_pad, ceil)
    e = t.entries
    assert (e[:, E_IH0] == e[:, E_OFF0] * s[0] - pt).all()
    assert (e[:, E_IW0] == e[:, E_OFF1] * s[1] - pl).all()
    (lo0, hi0), (lo1, hi1) = t.bucket
    m = data.draw(st.integers(lo0 + 1, hi0))
    n = data.draw(st.integers(lo1 + 1, hi1))
    for (mm, nn) in ((oh, ow), (m, n)):
        testing.check_coverage(t, (mm, nn))
    res = t.resolved(oh, ow, CATALOG)
    dk = ((k[0] - 1) * d[0] + 1, (k[1] - 1) * d[1] + 1)
    for (kid, o0, v0, o1, v1), ih0, iw0 in zip(res, e[:, E_IH0], e[:, E_IW0]):
        if v0 == 0 or v1 == 0:
            continue
        for lo, v, st_, dkk, size in ((ih0, v0, s[0], dk[0], H), (iw0, v1, s[1], dk[1], W)):
            first, last = lo, lo + (v - 1) * st_ + dkk - 1          # window span of the tile
            assert last >= 0 and first < size, "a tile's windows miss x entirely"
            assert 0 <= max(first, 0) <= min(last, size - 1) < size


def test_bucket_reuses_table_and_explain_describes_it():
    a = dict(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))
    t1 = dynshape.explain("max_pool2d", (1, 64, 113, 115), **a)
    t2 = dynshape.explain("max_pool2d", (2, 8, 115, 117), **a)     # output 58x59 vs 57x58
    assert t1 is t2
    text = t1.describe()
    assert "input offsets (ih0, iw0)" in text and "(-1, -1)" in text
    t3 = dynshape.explain("max_pool2d", (1, 64, 113, 115), kernel_shape=(3, 3),
                          strides=(2, 2), pads=(0, 0, 0, 0))
    assert t3 is not t1          # other begin pads: other input offsets


def test_table_save_load_roundtrip(tmp_path):
    t = dynshape.explain("avg_pool2d", (1, 3, 40, 41), kernel_shape=(2, 3), strides=(2, 1))
    path = t.save(str(tmp_path / "pool.npz"))
    back = PoolTable.load(path)
    np.testing.assert_array_equal(back.entries, t.entries)


def test_new_shapes_compile_nothing_and_call_the_driver_once(driver_calls):
    rng = np.random.default_rng(3)
    dynshape.run("max_pool2d", rng.standard_normal((1, 1, 5, 5)).astype(np.float32),
                 kernel_shape=(2, 2))
    for op, shape, dt in (("max_pool2d", (3, 5, 41, 37), np.float32),
                          ("avg_pool2d", (2, 7, 29, 53), np.float64),
                          ("max_pool2d", (1, 64, 113, 115), np.float32)):
        x = rng.standard_normal(shape).astype(dt)
        a = dict(kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))
        calls = len(driver_calls)
        with testing.count_compilations() as c:
            y = dynshape.run(op, x, **a)
        assert c.count == 0, c.functions
        assert len(driver_calls) == calls + 1
        check(y, pool_ref(x, op[:3], (3, 3), (2, 2), (1, 1, 1, 1)), op[:3], dt)


# ---- errors --------------------------------------------------------------------------------------------
X = np.zeros((1, 2, 6, 6), np.float32)


@pytest.mark.parametrize("op, x, attrs, exc, words", [
    ("max_pool2d", X, dict(kernel_shape=(7, 3)), dynshape.ShapeError, "larger than the padded"),
    ("max_pool2d", X, dict(kernel_shape=(3, 3), dilations=(3, 1)), dynshape.ShapeError,
     "larger than the padded"),
    ("avg_pool2d", X, dict(kernel_shape=(3, 3), pads=(1, -1, 0, 0)), dynshape.OpAttributeError,
     "non-negative"),
    ("max_pool2d", X, dict(kernel_shape=(3, 3), pads=(0, 3, 0, 0)), dynshape.OpAttributeError,
     "smaller than the kernel"),
    ("max_pool2d", X, dict(kernel_shape=(3, 3), strides=(0, 1)), dynshape.OpAttributeError,
     "positive"),
    ("max_pool2d", X, dict(kernel_shape=(3, 3), dilations=(1, 0)), dynshape.OpAttributeError,
     "positive"),
    ("max_pool2d", X, dict(kernel_shape=(0, 3)), dynshape.OpAttributeError, "positive"),
    ("max_pool2d", X, dict(kernel_shape=3), dynshape.OpAttributeError, "2 integers"),
    ("max_pool2d", X, dict(), dynshape.OpAttributeError, "kernel_shape is required"),
    ("max_pool2d", X, dict(kernel_shape=(2, 2), pads=(1, 1)), dynshape.OpAttributeError,
     "4 integers"),
    ("max_pool2d", X, dict(kernel_shape=(2, 2), auto_pad="SAME"), dynshape.OpAttributeError,
     "SAME_UPPER"),
    ("max_pool2d", X, dict(kernel_shape=(2, 2), auto_pad="VALID", pads=(1, 1, 1, 1)),
     dynshape.OpAttributeError, "cannot be combined"),
    ("max_pool2d", X, dict(kernel_shape=(2, 2), ceil_mode="yes"), dynshape.OpAttributeError,
     "ceil_mode"),
    ("avg_pool2d", X, dict(kernel_shape=(2, 2), dilations=(1, 1)), dynshape.OpAttributeError,
     "dilations are not supported"),
    ("max_pool2d", X, dict(kernel_shape=(2, 2), count_include_pad=True),
     dynshape.OpAttributeError, "unknown attribute"),
    ("max_pool2d", X[0], dict(kernel_shape=(2, 2)), dynshape.ShapeError, "rank 4"),
    ("max_pool2d", X.astype(np.int32), dict(kernel_shape=(2, 2)), dynshape.DtypeError,
     "float32"),
    ("max_pool2d", np.zeros((1, 1, 0, 4), np.float32), dict(kernel_shape=(1, 1)),
     dynshape.ShapeError, ">= 1"),
])
def test_bad_input(op, x, attrs, exc, words):
    with pytest.raises(exc, match=words):
        dynshape.run(op, x, **attrs)


def test_bad_out_and_arguments():
    x = np.zeros((1, 2, 6, 6), np.float32)
    with pytest.raises(dynshape.ShapeError, match="out has shape"):
        dynshape.run("max_pool2d", x, kernel_shape=(2, 2), out=np.zeros((1, 2, 6, 6),
                                                                          np.float32))
    with pytest.raises(dynshape.DtypeError, match="out has dtype"):
        dynshape.run("max_pool2d", x, kernel_shape=(2, 2), out=np.zeros((1, 2, 5, 5)))
    with pytest.raises(dynshape.DtypeError, match="NumPy array"):
        dynshape.run("max_pool2d", x, kernel_shape=(2, 2), out=[0.0])
    with pytest.raises(dynshape.ArgumentError, match="1 input"):
        dynshape.run("max_pool2d", x, x, kernel_shape=(2, 2))


def test_pool_tables_persist_and_load_as_pool_tables(tmp_path):
    """A saved pool table (entries with input-offset columns) loads back as a PoolTable."""
    import warnings
    from dynshape.tables.pool_table import PoolTable
    dynshape.set_table_dir(str(tmp_path))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            t = dynshape.warmup("max_pool2d", (1, 3, 40, 41), kernel_shape=(3, 3),
                                strides=(2, 2))
            dynshape.clear_cache()
            before = dynshape.cache_stats()["tables_loaded"]
            t2 = dynshape.warmup("max_pool2d", (1, 3, 40, 41), kernel_shape=(3, 3),
                                 strides=(2, 2))
        assert dynshape.cache_stats()["tables_loaded"] == before + 1
        assert isinstance(t2, PoolTable)
        np.testing.assert_array_equal(t2.entries, t.entries)
    finally:
        dynshape.set_table_dir(None)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("blen", [3, 513, 1000])
def test_chunk_scratch_parts_are_disjoint_aligned_and_whole(dt, blen):
    """The driver makes every chunk's scratch in one allocation: part c's four buffers have
    their lengths, start a whole number of 64-byte lines into the allocation, stay inside
    part c and never overlap."""
    from dynshape_kernels.cpu import pool as P
    o = np.empty(1, dt)
    span = P.scratch_span(o, blen)
    ws = np.empty(3 * span, dt)
    line = 64 // ws.itemsize
    half = (blen >> 1) + 2
    for c in range(3):
        parts = P._scratch(ws, c, blen)
        assert [len(p) for p in parts] == [blen + 2, half, half, P.MAX_T1]
        starts = [(p.ctypes.data - ws.ctypes.data) // ws.itemsize for p in parts]
        assert all(s % line == 0 for s in starts)
        ends = [s + len(p) for s, p in zip(starts, parts)]
        assert min(starts) >= c * span and max(ends) <= (c + 1) * span
        assert all(ends[i] <= starts[i + 1] for i in range(3))
