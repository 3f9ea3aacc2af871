"""conv2d against a float64 NumPy reference, table invariants, no compilation, errors."""
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dynshape
from dynshape_kernels.abi.vocabulary import UNARY
from dynshape import testing
from dynshape.runtime import conv as conv_executor
from dynshape.errors import ArgumentError, DtypeError, OpAttributeError, ShapeError
from dynshape_kernels.abi.tiles import CONV_DIRECT_SLOT as DIRECT_SLOT, CONV_TILES
from oracles import out_size, ref_conv
N_SLOTS = len(CONV_TILES)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")



@pytest.fixture(scope="module", autouse=True)
def _warm():
    dynshape.warm(["conv"])


@pytest.fixture
def slot():
    """Force a kernel slot for the tables built inside the test (reset afterwards)."""
    import contextlib
    stack = contextlib.ExitStack()

    def force(s):
        stack.enter_context(conv_executor.forcing_slot(s))
    with stack:
        yield force


# ---- reference ---------------------------------------------------------------------------------
def resolve_pads(H, W, KH, KW, strides, dilations, pads, auto_pad):
    if auto_pad == "VALID":
        return (0, 0, 0, 0)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        res = []
        for size, k, s, d in ((H, KH, strides[0], dilations[0]), (W, KW, strides[1],
                                                                  dilations[1])):
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            lo = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            res.append((lo, total - lo))
        return (res[0][0], res[1][0], res[0][1], res[1][1])
    return pads


def _erf(v):
    return np.vectorize(math.erf, otypes=[np.float64])(v)


# reference activations with a derivative bounded by 1.2 (for the tolerance)
ACTS = {
    None: lambda v: v,
    "relu": lambda v: np.maximum(v, 0),
    "abs": np.abs,
    "neg": np.negative,
    "tanh": np.tanh,
    "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
    "silu": lambda v: v / (1 + np.exp(-v)),
    "gelu": lambda v: 0.5 * v * (1 + _erf(v / math.sqrt(2))),
    ("leaky_relu", 0.2): lambda v: np.where(v >= 0, v, 0.2 * v),
    ("clip", -1.0, 2.5): lambda v: np.clip(v, -1.0, 2.5),
}


def _act_arg(a):
    if isinstance(a, tuple) and a[0] == "leaky_relu":
        return ("leaky_relu", {"alpha": a[1]})
    if isinstance(a, tuple):
        return ("clip", {"min": a[1], "max": a[2]})
    return a


def check_close(y, x, w, b, res, attrs, act=None):
    """The README's bound: |y - act(ref)| <= 1.2 * 4 sqrt(K) eps * S + activation error, with
    S = sum|x||w| + |b| + |res|, K the taps of one output (C/group x KH x KW, plus the bias
    and the residual) and 1.2 the largest derivative of the activations."""
    dt = y.dtype.type
    kw = dict(strides=attrs["strides"], pads=attrs["pads"], dilations=attrs["dilations"],
              group=attrs["group"])
    lin = ref_conv(x, w, b, **kw)
    scale = ref_conv(np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)),
                     None if b is None else np.abs(b.astype(np.float64)), **kw)
    if res is not None:
        lin = lin + np.asarray(res, np.float64)
        scale = scale + np.abs(res.astype(np.float64))
    ref = ACTS[act](lin)
    K = w.shape[1] * w.shape[2] * w.shape[3] + (b is not None) + (res is not None)
    if y.dtype.itemsize == 2:
        # half precision: float32 accumulation, then one rounding to the format (unit
        # roundoff u; float16's subnormal spacing near 0)
        u = 2.0 ** -11 if y.dtype == np.float16 else 2.0 ** -8
        acc = 1.2 * 4 * np.sqrt(K) * 2.0 ** -23 * scale + 4e-6 * np.abs(ref)
        tol = acc + u * (np.abs(ref) + acc) + 2.0 ** -24
    else:
        eps = np.finfo(dt).eps
        tol = 1.2 * 4 * np.sqrt(K) * eps * scale \
            + (4e-6 if dt == np.float32 else 1e-14) * (np.abs(ref) + 1e-30)
    err = np.abs(y.astype(np.float64) - ref)
    assert (err <= tol).all(), (f"max error {err.max():.3g}, tolerance there "
                                f"{tol.flat[np.argmax(err - tol)]:.3g}")


# ---- random cases ------------------------------------------------------------------------------
@st.composite
def conv_cases(draw, max_side=40, dtypes=(np.float32, np.float64)):
    dtype = draw(st.sampled_from(dtypes))
    N = draw(st.integers(1, 3))
    depthwise = draw(st.booleans())
    group = draw(st.sampled_from([1, 1, 2, 3]))
    Cg = 1 if depthwise else draw(st.integers(1, 5))
    C = draw(st.integers(1, 6)) if depthwise else Cg * group
    if depthwise:
        group = C
    Mg = draw(st.sampled_from([1, 2, 3, 5, 7, 13]))
    M = Mg * group
    KH, KW = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    H = draw(st.sampled_from([1, 2, 3, 5, 7, 11, 13, 17, 23, 31, 37, max_side]))
    W = draw(st.sampled_from([1, 2, 3, 5, 7, 11, 13, 19, 29, 31, 39]))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilations = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    auto_pad = draw(st.sampled_from(["NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER",
                                     "VALID"]))
    if auto_pad == "NOTSET":
        if draw(st.booleans()):
            p = draw(st.integers(0, 3))
            pads = (p, p, p, p)
        else:
            pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    else:
        pads = (0, 0, 0, 0)
    real = resolve_pads(H, W, KH, KW, strides, dilations, pads, auto_pad)
    assume((KH - 1) * dilations[0] + 1 <= H + real[0] + real[2])
    assume((KW - 1) * dilations[1] + 1 <= W + real[1] + real[3])
    x = draw(testing.views((N, C, H, W), dtype=dtype))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((M, Cg, KH, KW)).astype(dtype)
    b = rng.standard_normal(M).astype(dtype) if draw(st.booleans()) else None
    oshape = (N, M, out_size(H, real[0], real[2], KH, strides[0], dilations[0]),
              out_size(W, real[1], real[3], KW, strides[1], dilations[1]))
    res = rng.standard_normal(oshape).astype(dtype) if draw(st.booleans()) else None
    act = draw(st.sampled_from(list(ACTS)))
    attrs = dict(strides=strides, pads=pads, auto_pad=auto_pad, dilations=dilations,
                 group=group)
    return x, w, b, res, act, attrs, real


@given(conv_cases(), st.sampled_from([None, None, 0, 1, DIRECT_SLOT]))
@settings(max_examples=80)
def test_matches_reference(case, forced):
    x, w, b, res, act, attrs, real = case
    with conv_executor.forcing_slot(forced):
        args = (x, w) if b is None else (x, w, b)
        y = dynshape.run("conv2d", *args, activation=_act_arg(act), residual=res, **attrs)
    check_close(y, x, w, b, res, dict(attrs, pads=real), act)


@given(conv_cases(max_side=23, dtypes=(np.float16, ml_dtypes.bfloat16)),
       st.sampled_from([None, 0, 1, DIRECT_SLOT]))
@settings(max_examples=40)
def test_half_precision_matches_reference(case, forced):
    """float16/bfloat16 through every slot: widened when packed (or loaded by the direct
    kernel), accumulated in float32, the epilogue in float32, one rounding to the format."""
    x, w, b, res, act, attrs, real = case
    with conv_executor.forcing_slot(forced):
        args = (x, w) if b is None else (x, w, b)
        y = dynshape.run("conv2d", *args, activation=_act_arg(act), residual=res, **attrs)
    assert y.dtype == x.dtype
    check_close(y, x, w, b, res, dict(attrs, pads=real), act)


@given(conv_cases(max_side=19), st.sampled_from(range(N_SLOTS)))
@settings(max_examples=30)
def test_padding_is_never_read(case, forced):
    """x is a window of a NaN-filled buffer: reading anything outside x poisons the result."""
    x, w, b, res, act, attrs, real = case
    N, C, H, W = x.shape
    big = np.full((N + 2, C + 2, H + 6, W + 6), np.nan, x.dtype)
    big[1:-1, 1:-1, 3:-3, 3:-3] = x
    xv = big[1:-1, 1:-1, 3:-3, 3:-3]
    with conv_executor.forcing_slot(forced):
        y = dynshape.run("conv2d", xv, w, residual=res, **attrs)
    assert not np.isnan(y).any()
    check_close(y, x, w, None, res, dict(attrs, pads=real))


@given(conv_cases(max_side=23))
@settings(max_examples=40)
def test_table_invariants(case):
    """Exactly-once coverage, no split K, consistent input offsets, reads inside x: for the
    table's own shape and for other shapes of its bucket."""
    x, w, b, res, act, attrs, real = case
    for forced in (None, 0, DIRECT_SLOT):
        with conv_executor.forcing_slot(forced):
            t = dynshape.explain("conv2d", x.shape, w.shape, dtype=x.dtype, **attrs)
        g = t.geo
        testing.check_conv_table(t, g["N"], g["H"], g["W"], g["OH"], g["OW"])
        (n0, n1), (h0, h1), (w0, w1) = t.bucket
        for N, OH, OW in ((n1, h1, w1), (n0 + 1, h0 + 1, w0 + 1)):
            cover = testing.conv_coverage(t, N, OH, OW)
            assert (cover == 1).all()


@pytest.mark.parametrize("forced", [0, 1, DIRECT_SLOT])
def test_output_layouts_and_aliasing(forced, slot):
    slot(forced)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 15, 17)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    attrs = dict(pads=(1, 1, 1, 1), group=2, strides=(1, 1), dilations=(1, 1))
    ref = dynshape.run("conv2d", x, w, b, **attrs)
    check_close(ref, x, w, b, None, attrs)
    # strided, transposed and negative-stride outputs
    for make in (lambda: np.empty((2, 4, 15, 34), np.float32)[..., ::2],
                 lambda: np.empty((17, 15, 4, 2), np.float32).transpose(3, 2, 1, 0),
                 lambda: np.empty((2, 4, 15, 17), np.float32)[:, ::-1, ::-1][:, ::-1, ::-1]):
        out = make()
        r = dynshape.run("conv2d", x, w, b, out=out, **attrs)
        assert r is out
        np.testing.assert_array_equal(out, ref)
    # the residual may be out itself: y = conv + y
    out = rng.standard_normal(ref.shape).astype(np.float32)
    expect = ref + out
    dynshape.run("conv2d", x, w, b, out=out, residual=out, **attrs)
    np.testing.assert_allclose(out, expect, rtol=1e-6, atol=1e-5)
    # out overlapping x: x is read before anything is written (like NumPy)
    buf = rng.standard_normal((2, 6, 15, 17)).astype(np.float32)
    xx = buf.copy()
    y = dynshape.run("conv2d", xx, w, b, out=xx[:, :4], **attrs)
    np.testing.assert_allclose(y, dynshape.run("conv2d", buf, w, b, **attrs), rtol=1e-6)


@pytest.mark.parametrize("act, attrs", [(u.name, {}) for u in UNARY if u.public]
                         + [("gelu", {"approximate": "tanh"}), ("leaky_relu", {"alpha": 0.3}),
                            ("clip", {"min": -0.5, "max": 0.7})])
def test_every_activation_equals_the_unary_op(act, attrs):
    """The epilogue runs the unary kernels' own loops: bit-identical to run(act, conv)."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 8, 13, 11))
    w = rng.standard_normal((6, 8, 3, 3)) * 0.2
    y = dynshape.run("conv2d", x, w, pads=1, activation=(act, attrs) if attrs else act)
    lin = dynshape.run("conv2d", x, w, pads=1)
    np.testing.assert_array_equal(y, dynshape.run(act, lin, **attrs))


def test_gelu_tanh_attribute_and_kernel_shape():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 3, 9, 9)).astype(np.float32)
    w = rng.standard_normal((5, 3, 2, 4)).astype(np.float32)
    y = dynshape.run("conv2d", x, w, kernel_shape=(2, 4),
                     activation=("gelu", {"approximate": "tanh"}))
    np.testing.assert_array_equal(y, dynshape.run("gelu", dynshape.run("conv2d", x, w),
                                                  approximate="tanh"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("dilations, strides", [((1, 1), (1, 1)), ((2, 3), (1, 1)),
                                                ((1, 1), (2, 2)), ((2, 1), (3, 2))])
@pytest.mark.parametrize("C, M, group", [(16, 16, 16), (6, 4, 2), (5, 10, 5)])
@pytest.mark.parametrize("form", ["residual", "bias", "none", "strided out"])
def test_direct_kernel_3x3(slot, dtype, dilations, strides, C, M, group, form):
    """The direct kernel's 3x3 paths, with depthwise and grouped channels, dilations,
    strides, padding and tiles over several rows and columns, against the reference:
    through the accumulators and the epilogue (a residual, or an output of column stride 2;
    at unit strides all nine taps in one loop), or with one input channel per group and
    nothing after the bias, from the window split into the strides' phases straight into y;
    y written only inside its NaN frame."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, C, 37, 41)).astype(dtype)
    w = rng.standard_normal((M, C // group, 3, 3)).astype(dtype)
    b = rng.standard_normal(M).astype(dtype) if form != "none" else None
    attrs = dict(pads=(1, 2, 2, 0), group=group, strides=strides, dilations=dilations)
    OH = out_size(37, 1, 2, 3, strides[0], dilations[0])
    OW = out_size(41, 2, 0, 3, strides[1], dilations[1])
    res = rng.standard_normal((2, M, OH, OW)).astype(dtype) if form == "residual" else None
    frame = np.full((2, M + 2, OH + 2, 2 * OW + 3), np.nan, dtype)
    out = frame[:, 1:-1, 1:-1, 1:2 * OW + 1:2 if form == "strided out" else 1]
    out = out[..., :OW]
    slot(DIRECT_SLOT)
    args = (x, w) if b is None else (x, w, b)
    y = dynshape.run("conv2d", *args, residual=res, out=out, **attrs)
    assert y is out
    check_close(y, x, w, b, res, attrs)
    inside = np.zeros(frame.shape, bool)
    inside[:, 1:-1, 1:-1, 1:2 * OW + 1:2 if form == "strided out" else 1][..., :OW] = True
    assert np.isnan(frame[~inside].astype(np.float64)).all(), "written outside the output"


def test_larger_problems_every_slot(slot):
    """Several channel blocks and tiles per image, each kernel slot."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 20, 45, 50)).astype(np.float32)
    w = rng.standard_normal((200, 10, 3, 3)).astype(np.float32)
    b = rng.standard_normal(200).astype(np.float32)
    attrs = dict(pads=(1, 2, 0, 1), group=2, strides=(1, 2), dilations=(2, 1))
    for s in (None, 0, 1, DIRECT_SLOT):
        slot(s)
        y = dynshape.run("conv2d", x, w, b, activation="relu", **attrs)
        check_close(y, x, w, b, None, attrs, "relu")


@pytest.mark.parametrize("case", [
    dict(strides=[2, 2], auto_pad="SAME_LOWER", dilations=[1, 1], group=1),
    dict(strides=[2, 3], auto_pad="SAME_UPPER", dilations=[1, 1], group=3),
    dict(strides=[1, 3], pads=[2, 0, 1, 3], dilations=[1, 1], group=6),
    dict(strides=[1, 1], auto_pad="VALID", dilations=[3, 2], group=2),
])
def test_matches_onnxruntime(case):
    """ONNX Conv semantics (padding conventions in particular) as onnxruntime computes them."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 6, 19, 17)).astype(np.float32)
    w = rng.standard_normal((12, 6 // case["group"], 3, 4)).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **case)
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                         for n in ("x", "w", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expect = sess.run(None, {"x": x, "w": w, "b": b})[0]
    y = dynshape.run("conv2d", x, w, b, **case)
    assert y.shape == expect.shape
    # each side within the README's 4 sqrt(K) eps of |x| * |w| (+ |b|), computed by ORT too
    scale = sess.run(None, {"x": np.abs(x), "w": np.abs(w), "b": np.abs(b)})[0]
    K = w.shape[1] * w.shape[2] * w.shape[3] + 1
    tol = 2 * 4 * np.sqrt(K) * np.finfo(np.float32).eps * scale.astype(np.float64)
    err = np.abs(y.astype(np.float64) - expect)
    assert (err <= tol).all(), f"max error {err.max():.3g}, max error / bound {(err / tol).max():.3g}"


# ---- tables, cache, compilation --------------------------------------------------------------
def test_new_shapes_compile_nothing_and_call_the_driver_once(driver_calls):
    rng = np.random.default_rng(5)
    shapes = [(1, 4, 31, 29), (3, 4, 7, 53), (2, 4, 64, 5), (1, 4, 101, 97)]
    with testing.count_compilations() as c:
        for shape in shapes:
            for dt in (np.float32, np.float64):
                x = rng.standard_normal(shape).astype(dt)
                w = rng.standard_normal((6, 2, 3, 3)).astype(dt)
                before = len(driver_calls)
                dynshape.run("conv2d", x, w, group=2, pads=1, activation="tanh")
                assert len(driver_calls) == before + 1
    assert c.count == 0, c.functions


def test_a_bucket_shares_its_table():
    dynshape.clear_cache()
    rng = np.random.default_rng(6)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    t1 = dynshape.explain("conv2d", (2, 3, 57, 61), w.shape, pads=1)
    t2 = dynshape.explain("conv2d", (2, 3, 58, 63), w.shape, pads=1)
    assert t1 is t2 and t1.bucket[1][0] < 57 and t1.bucket[1][1] >= 58
    x = rng.standard_normal((2, 3, 58, 63)).astype(np.float32)
    stats = dynshape.cache_stats()
    y = dynshape.run("conv2d", x, w, pads=1)
    assert dynshape.cache_stats()["hits"] == stats["hits"] + 1
    check_close(y, x, w, None, None, dict(strides=(1, 1), pads=(1, 1, 1, 1),
                                          dilations=(1, 1), group=1))


def test_cost_model_prices_row_segments():
    """Every GEMM tile packs, per K row, one input segment per tile row: at equal positions
    a tile of fewer, longer rows is cheaper (6x64 against 12x32), and the optimized table of
    64->64 3x3 on 57x61 takes whole-row tiles (measured about 12% faster than 12x32 on 2
    threads)."""
    from dynshape.planning import conv as planner
    K = 64 * 9
    halves = planner._tile_cost(0, "float32", K, np.array([64]), np.array([12]),
                                np.array([32]))
    rows = planner._tile_cost(0, "float32", K, np.array([64]), np.array([6]), np.array([64]))
    assert rows[0] < halves[0]
    t = dynshape.explain("conv2d", (1, 64, 57, 61), (64, 64, 3, 3), pads=1)   # optimized
    from dynshape_kernels.abi.conv_table import T_VW
    vw = {int(r[T_VW]) for r in t.entries}
    assert vw == {64}, vw


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("forced", [0, 1])
def test_weights_packed_once_per_channel_block_are_the_right_ones(slot, forced, dtype):
    """A thread packs a channel block's weights once for consecutive tiles of that block and
    packs again when the group or block changes (float16: packed tiles; float32: window
    tiles, which read the weights in place): several groups, channel blocks of unequal
    size (the last is short), two K blocks, several images and tiles per image, each thread
    seeing blocks alternate, against the reference."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 2 * 32, 29, 70)).astype(dtype)
    w = (rng.standard_normal((2 * 200, 32, 3, 3)) / 4).astype(dtype)    # K = 288: 2 blocks
    b = rng.standard_normal(400).astype(dtype)
    attrs = dict(pads=(1, 1, 1, 1), group=2, strides=(1, 1), dilations=(1, 1))
    slot(forced)
    t = dynshape.explain("conv2d", x.shape, w.shape, dtype=dtype, **attrs)
    from dynshape_kernels.abi.conv_table import T_G, T_M0, T_N
    blocks = {(int(r[T_G]), int(r[T_M0])) for r in t.entries}
    assert len(blocks) >= 4 and len({int(r[T_N]) for r in t.entries}) == 3
    assert len(t.entries) > 2 * len(blocks) * 3      # several spatial tiles per block
    y = dynshape.run("conv2d", x, w, b, **attrs)
    check_close(y, x, w, b, None, attrs)


def test_explain_describes_the_table():
    t = dynshape.explain("conv2d", (1, 64, 57, 61), (64, 64, 3, 3), pads=(1, 1, 1, 1))
    text = t.describe()
    assert "conv2d table float32" in text and "ih0" in text and "K = 64x3x3 = 576" in text
    assert len(t) >= 2 and t.slot in (0, 1)
    dw = dynshape.explain("conv2d", (1, 128, 113, 115), (128, 1, 3, 3), pads=1, group=128)
    assert dw.slot == DIRECT_SLOT
    assert dynshape.explain("conv2d", (0, 3, 5, 5), (4, 3, 3, 3)) is None


def test_empty_and_degenerate():
    w = np.ones((4, 0, 1, 1), np.float32)
    x = np.ones((2, 0, 3, 3), np.float32)
    b = np.arange(4, dtype=np.float32)
    y = dynshape.run("conv2d", x, w, b)                    # C = 0: only the bias
    np.testing.assert_array_equal(y, np.broadcast_to(b[None, :, None, None], (2, 4, 3, 3)))
    assert dynshape.run("conv2d", np.ones((0, 3, 5, 5)), np.ones((4, 3, 3, 3))).shape == \
        (0, 4, 3, 3)
    assert dynshape.run("conv2d", np.ones((1, 3, 5, 5)), np.ones((0, 3, 3, 3))).shape == \
        (1, 0, 3, 3)


# ---- errors ------------------------------------------------------------------------------------
X = np.ones((1, 4, 8, 8), np.float32)
Wt = np.ones((6, 2, 3, 3), np.float32)


@pytest.mark.parametrize("args, kw, err, match", [
    ((X, np.ones((6, 3, 3, 3), np.float32)), {}, ShapeError, "per group"),
    ((X, Wt), {"group": 3}, ShapeError, "not divisible by group=3"),
    ((X, np.ones((5, 2, 3, 3), np.float32)), {"group": 2}, ShapeError, "output channels"),
    ((X, Wt), {"group": 0}, OpAttributeError, "group must be"),
    ((X, np.ones((6, 4, 9, 3), np.float32)), {}, ShapeError, "larger than the padded input"),
    ((X, np.ones((6, 4, 3, 3), np.float32)), {"dilations": (5, 1)}, ShapeError,
     "larger than the padded"),
    ((X, Wt), {"group": 2, "pads": (1, -1, 0, 0)}, OpAttributeError, "pads must be >= 0"),
    ((X, Wt), {"group": 2, "pads": (1, 1, 1)}, OpAttributeError, "2 or 4 integers"),
    ((X, Wt), {"group": 2, "strides": (0, 1)}, OpAttributeError, "strides must be >= 1"),
    ((X, Wt), {"group": 2, "dilations": 0}, OpAttributeError, "dilations must be >= 1"),
    ((X, Wt), {"group": 2, "strides": 1.5}, OpAttributeError, "integer"),
    ((X, Wt), {"group": 2, "auto_pad": "SAME"}, OpAttributeError, "SAME_UPPER"),
    ((X, Wt), {"group": 2, "auto_pad": "VALID", "pads": 1}, OpAttributeError,
     "cannot be combined"),
    ((X, Wt), {"group": 2, "kernel_shape": (3, 2)}, OpAttributeError, "does not match"),
    ((X, Wt, np.ones(5, np.float32)), {"group": 2}, ShapeError, r"b must have shape \(6,\)"),
    ((X, Wt, np.ones(6)), {"group": 2}, DtypeError, "b has dtype float64"),
    ((X, Wt.astype(np.float64)), {"group": 2}, DtypeError, "w has dtype float64"),
    ((X.astype(np.int32), Wt), {"group": 2}, DtypeError, "accepted: float32, float64"),
    ((X[0], Wt), {"group": 2}, ShapeError, "rank 4"),
    ((X, Wt[0]), {"group": 2}, ShapeError, "rank 4"),
    ((X,), {}, ArgumentError, r"\(x, w, b=None\)"),
    ((X, Wt), {"group": 2, "activation": "softmax"}, OpAttributeError, "accepted names"),
    ((X, Wt), {"group": 2, "activation": ("relu", {"alpha": 1})}, OpAttributeError,
     "attributes"),
    ((X, Wt), {"group": 2, "residual": np.ones((1, 6, 8, 8), np.float32)}, ShapeError,
     "residual must have"),
    ((X, Wt), {"group": 2, "residual": np.ones((1, 6, 6, 6))}, DtypeError, "residual has"),
    ((X, Wt), {"group": 2, "padding": 1}, OpAttributeError, "unknown attribute"),
])
def test_bad_input(args, kw, err, match):
    with pytest.raises(err, match=match):
        dynshape.run("conv2d", *args, **kw)


def test_bad_out_is_not_written():
    out = np.zeros((1, 6, 7, 6), np.float32)
    with pytest.raises(ShapeError, match="out has shape"):
        dynshape.run("conv2d", X, Wt, group=2, out=out)
    assert not out.any()
