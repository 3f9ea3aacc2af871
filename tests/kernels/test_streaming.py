"""Streaming stores (``cpu.streaming``): outputs at least ``stream_bytes()`` long are written
as whole lines that skip the cache. The results must be those of normal stores, on every
alignment of the output, with heads and tails of partial lines, and nothing outside the
output may change. The threshold is forced to 0 here so small arrays take the path."""
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dynshape
from dynshape.errors import SettingError
from dynshape.runtime import streaming
from dynshape.runtime.plane import PLANE
from dynshape_kernels.abi.common_area import S_STREAM, common_size
from dynshape_kernels.cpu import elementwise


@pytest.fixture
def stream_all():
    """Every output streams (threshold 0); replays recorded before are dropped."""
    streaming.set_stream_bytes(0)
    dynshape.clear_cache()
    yield
    streaming.set_stream_bytes(None)
    dynshape.clear_cache()


def _values(rng, shape, dtype):
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-100, 100, size=shape).astype(dtype)


DTYPES = ("float32", "float64", "int32", "int64", "float16")
#: copies move items of any dtype of 1, 2, 4 or 8 bytes
COPY_DTYPES = DTYPES + ("int8", "uint16")


@given(n=st.integers(0, 3000), start=st.integers(0, 70), dtype=st.sampled_from(COPY_DTYPES),
       op=st.sampled_from(("relu", "clip", "copy")), seed=st.integers(0, 2**16))
def test_unary_streaming_matches_numpy_and_stays_inside(stream_all, n, start, dtype, op, seed):
    rng = np.random.default_rng(seed)
    if dtype not in DTYPES:
        op = "copy"
    x = _values(rng, n + 3, dtype)[3:]                 # an input not at its buffer's start
    sentinel = np.array(7, dtype=dtype)
    buf = np.full(start + n + 19, sentinel, dtype=dtype)
    out = buf[start:start + n]                         # every alignment of the output
    if op == "clip":
        dynshape.run("clip", x, out=out, min=-5, max=9)
        ref = np.clip(x, -5, 9)
    elif op == "relu":
        dynshape.run("relu", x, out=out)
        ref = np.maximum(x, 0)
    else:
        dynshape.run("copy", x, out=out)
        ref = x
    np.testing.assert_array_equal(out, ref)
    assert (buf[:start] == sentinel).all() and (buf[start + n:] == sentinel).all()


MATH_OPS = (("exp", {}), ("log", {}), ("sigmoid", {}), ("tanh", {}), ("gelu", {}),
            ("gelu", {"approximate": "tanh"}), ("silu", {}))


@given(n=st.integers(0, 3000), start=st.integers(0, 40),
       dtype=st.sampled_from(("float32", "float64", "float16")),
       op=st.sampled_from(MATH_OPS), seed=st.integers(0, 2**16))
def test_math_ops_stream_exactly_what_they_compute(n, start, dtype, op, seed):
    op, attrs = op
    """The math ops stream on float32 and float64 (``STREAM_UNARY_FLOAT``; float16 reads a
    lookup table): bit for bit what normal stores give, on every output alignment, and
    nothing around the output written."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n + 1) * 4).astype(dtype)[1:]
    if op == "log":
        x = np.abs(x)
    normal = np.empty_like(x)
    dynshape.run(op, x, out=normal, **attrs)
    sentinel = np.array(7, dtype=dtype)
    buf = np.full(start + n + 19, sentinel, dtype=dtype)
    out = buf[start:start + n]
    try:
        streaming.set_stream_bytes(0)
        dynshape.clear_cache()
        dynshape.run(op, x, out=out, **attrs)
    finally:
        streaming.set_stream_bytes(None)
        dynshape.clear_cache()
    np.testing.assert_array_equal(out, normal)
    assert (buf[:start] == sentinel).all() and (buf[start + n:] == sentinel).all()


def _stream_switch(kind):
    """(op codes named by its branches, number of op loops) of a kind's unary streaming
    switch, its wide part's included (the last branch of each is an ``else``)."""
    from dynshape_kernels.cpu.switches import generated_source
    src = generated_source(kind)
    codes, loops = set(), 0
    for name in ("map_stream", "map_stream_wide"):
        m = re.search(rf"\ndef {name}\(([^)]*)\):\n(.*?)(?=\ndef |\Z)", src, re.S)
        if m:
            codes |= {int(c) for c in re.findall(r"code == (\d+):", m.group(2))}
            loops += m.group(2).count("stream_block(buf, ov, s)")
    return codes, loops


@pytest.mark.parametrize("kind", ["float", "float16", "bfloat16", "integer"])
def test_the_unary_streaming_gate_is_the_switch_cases(kind):
    """The driver sends to ``map_stream`` only the ops of its cases (``STREAMS_UNARY``): a
    switch without an op's case would run another op's loop. The math ops stream through
    ``map_contig`` (``STREAMS_MATH``), which has every op."""
    from dynshape_kernels.cpu.switches import STREAM_UNARY
    codes, loops = _stream_switch(kind)
    assert codes <= set(STREAM_UNARY) and loops == len(STREAM_UNARY)
    assert set(np.flatnonzero(elementwise.STREAMS_UNARY)) == set(STREAM_UNARY)
    assert not set(np.flatnonzero(elementwise.STREAMS_MATH)) & set(STREAM_UNARY)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["exp", "gelu", "log"])
@pytest.mark.parametrize("n, start", [(4096, 0), (5000, 3), (777, 1), (300, 0), (64, 0)])
def test_the_math_stream_computes_whole_blocks_from_a_line_start(dtype, op, n, start):
    """``elementwise._math_stream`` itself: the blocks from ``h`` (a line start) that fit
    before ``e`` hold the op's results, and nothing else of the output is written; it
    returns where its blocks end."""
    from dynshape_kernels.abi.vocabulary import UNARY_OPS
    code = UNARY_OPS.index(op)
    x = np.abs(np.random.default_rng(n).standard_normal(n + 5)).astype(dtype)[5:]
    want = np.empty_like(x)
    dynshape.run(op, x, out=want)
    buf = np.full(start + n + 16, 9, dtype=dtype)
    out = buf[start:start + n]
    g = (-out.ctypes.data) % 64 // x.itemsize           # the first line start
    x.flags.writeable = False
    w = elementwise.MATH_BLOCK_BYTES // x.itemsize
    zero = x.dtype.type(0)
    f = elementwise._math_stream(np.int64(code), x, out, np.int64(g), np.int64(n), zero, zero)
    assert f == g + (n - g) // w * w
    np.testing.assert_array_equal(out[g:f], want[g:f])
    assert (out[:g] == 9).all() and (out[f:] == 9).all() and (buf[:start] == 9).all()
    assert (buf[start + n:] == 9).all()


def test_streaming_loops_prefetch_their_inputs():
    """Every block of a streaming loop prefetches each input AHEAD_BYTES on (the hardware
    prefetcher fell behind the streaming stores)."""
    from dynshape_kernels.cpu.switches import generated_source
    src = generated_source("float")
    for name, arrays in (("map_stream", ("xv",)), ("zip_stream", ("av", "bv")),
                         ("zip_relu_period_stream", ("av",)), ("zip_period_blocks", ("av",))):
        m = re.search(rf"\ndef {name}\(([^)]*)\):\n(.*?)(?=\ndef |\Z)", src, re.S)
        assert m is not None, name
        body = m.group(2)
        assert "ahead = AHEAD_BYTES // buf.itemsize" in body, name
        # a one-op switch has no branches: its body is the op's
        cases = re.split(r"\n    (?:if code == \d+|elif code == \d+|else):", body)[1:] or [body]
        assert any("stream_block" in c for c in cases), name
        for case in cases:
            if "stream_block" in case:
                for a in arrays:
                    assert f"prefetch_on({a}, s + ahead, w)" in case, (name, a)


@given(rows=st.integers(1, 5), cols=st.integers(1, 6000), start=st.integers(0, 40),
       gap=st.integers(0, 33), dtype=st.sampled_from(DTYPES),
       op=st.sampled_from(("add", "sub", "mul")), bias=st.booleans(), seed=st.integers(0, 2**16))
def test_binary_streaming_matches_numpy_and_stays_inside(stream_all, rows, cols, start, gap,
                                                         dtype, op, bias, seed):
    """Rows that follow each other stream as one; rows with gaps between them (an output
    view, a bias row) stream one by one from 16 KB."""
    rng = np.random.default_rng(seed)
    a = _values(rng, (rows, cols), dtype)
    b = _values(rng, (cols,) if bias else (rows, cols), dtype)
    pitch = cols + gap
    sentinel = np.array(5, dtype=dtype)
    buf = np.full(start + rows * pitch + 7, sentinel, dtype=dtype)
    out = buf[start:start + rows * pitch].reshape(rows, pitch)[:, :cols]
    dynshape.run(op, a, b, out=out)
    with np.errstate(over="ignore"):
        ref = getattr(np, {"add": "add", "sub": "subtract", "mul": "multiply"}[op])(a, b)
    np.testing.assert_array_equal(out, ref)
    inside = np.zeros(buf.shape, dtype=bool)
    inside[start:start + rows * pitch].reshape(rows, pitch)[:, :cols] = True
    assert (buf[~inside] == sentinel).all()


def test_long_rows_with_gaps_stream_row_by_row(stream_all):
    """Rows of at least STREAM_ROW_BYTES with a gap between them in the output."""
    rng = np.random.default_rng(1)
    cols = elementwise.STREAM_ROW_BYTES // 4 + 37
    a = rng.standard_normal((6, cols)).astype(np.float32)
    bias = rng.standard_normal(cols).astype(np.float32)
    buf = np.full((6, cols + 21), -3.0, dtype=np.float32)
    out = buf[:, 5:5 + cols]
    dynshape.run("add", a, bias, out=out)
    np.testing.assert_array_equal(out, a + bias)
    assert (buf[:, :5] == -3).all() and (buf[:, 5 + cols:] == -3).all()


_NP = {"add": "add", "sub": "subtract", "mul": "multiply"}


@given(rows=st.integers(60, 300), cols=st.integers(60, 300), gap=st.integers(0, 40),
       dtype=st.sampled_from(COPY_DTYPES),
       which=st.sampled_from(("a", "b", "both", "copy", "exp", "relu")),
       op=st.sampled_from(("add", "sub", "mul", "maximum")), seed=st.integers(0, 2**16))
def test_transposed_tiles_prefetching_the_next_tile_stay_right(stream_all, rows, cols, gap,
                                                               dtype, which, op, seed):
    """A large output (here: every output) has its transposed tiles prefetch the next
    tile's rows: of the output and of the operands read in place (``_zip_tiles``'s,
    ``transpose_tile``'s and ``scatter_tile``'s ``pf`` / ``dst_ahead``), past the output's
    last tile too. The results are NumPy's and nothing outside the output view changes."""
    rng = np.random.default_rng(seed)
    if dtype not in DTYPES or (which == "exp" and np.dtype(dtype).kind != "f"):
        which = "copy"
    base_a = _values(rng, (cols, rows), dtype)
    base_b = _values(rng, (cols, rows), dtype)
    a = (base_a.T if which in ("a", "both", "copy", "exp", "relu")
         else np.ascontiguousarray(base_a.T))
    b = base_b.T if which in ("b", "both") else np.ascontiguousarray(base_b.T)
    sentinel = np.array(3, dtype=dtype)
    buf = np.full((rows, cols + gap), sentinel, dtype=dtype)
    out = buf[:, :cols]
    if which in ("copy", "relu"):
        dynshape.run(which, a, out=out)
        ref = a if which == "copy" else np.maximum(a, 0)
    elif which == "exp":
        dynshape.run("exp", a, out=out)
        ref = out.copy()                          # the op's own values, computed unfused
        dynshape.run("exp", np.ascontiguousarray(a), out=ref)
    else:
        dynshape.run(op, a, b, out=out)
        with np.errstate(over="ignore"):
            ref = getattr(np, _NP.get(op, op))(a, b)
    np.testing.assert_array_equal(out, ref)
    assert (buf[:, cols:] == sentinel).all()



@given(rows=st.integers(2, 300), cols=st.integers(1, 1200), start=st.integers(0, 40),
       dtype=st.sampled_from(DTYPES), op=st.sampled_from(("add", "sub", "mul")),
       left=st.booleans(), seed=st.integers(0, 2**16))
def test_a_bias_row_over_rows_that_follow_each_other_streams_right(stream_all, rows, cols, start,
                                                                   dtype, op, left, seed):
    """A bias row added to rows that follow each other in x and the output (``x + row`` or
    ``row + x``) streams as one loop whose row repeats with a period: the row itself, or a
    scratch tile of whole rows for rows up to REPEAT_ROW_MAX; sub and mul take the other
    paths. NumPy's result on every output alignment, the memory around the output
    untouched."""
    rng = np.random.default_rng(seed)
    x = _values(rng, (rows, cols), dtype)
    row = _values(rng, (cols,), dtype)
    sentinel = np.array(5, dtype=dtype)
    buf = np.full(start + rows * cols + 7, sentinel, dtype=dtype)
    out = buf[start:start + rows * cols].reshape(rows, cols)
    args = (row, x) if left else (x, row)
    dynshape.run(op, *args, out=out)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, getattr(np, _NP[op])(*args))
    assert (buf[:start] == sentinel).all() and (buf[start + rows * cols:] == sentinel).all()


@pytest.mark.parametrize("k, v1", [(2, 5000), (3, 700), (40, 513), (60, 512), (100, 77),
                                   (1000, 5), (2000, 1), (200, 64)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32"])
def test_the_period_stream_runs_rows_with_their_row(k, v1, dtype):
    """The driver's path itself (``elementwise._period_stream``), so that a change of
    table or threshold cannot leave it untested: True and every element right for rows
    longer than REPEAT_ROW_MAX (the row is the period) and shorter (a tile of whole rows
    is), at an offset into x, the row and the output; the output's other elements kept."""
    from dynshape_kernels.abi.storage import carrier
    from dynshape_kernels.abi.vocabulary import ADD
    rng = np.random.default_rng(k * v1)
    st_dt = np.dtype(carrier(dtype))
    x = _values(rng, 3 + k * v1, dtype)
    r = _values(rng, 9 + v1, dtype)
    o = np.full(11 + k * v1 + 6, 3, dtype=dtype)
    x.flags.writeable = r.flags.writeable = False      # the driver's own argument types
    done = elementwise._period_stream(np.int64(ADD), x.view(st_dt), np.int64(3), r.view(st_dt),
                                      np.int64(9), o.view(st_dt), np.int64(11), np.int64(k),
                                      np.int64(v1))
    assert done
    with np.errstate(over="ignore"):
        want = x[3:].reshape(k, v1) + r[9:]
    np.testing.assert_array_equal(o[11:11 + k * v1].reshape(k, v1), want)
    assert (o[:11] == 3).all() and (o[11 + k * v1:] == 3).all()


def test_only_the_period_ops_take_the_period_stream():
    """The periodic switch holds add alone (each op costs compile time), and so does the
    driver's gate to it (``STREAMS_PERIOD``): a single-case switch runs its one op for any
    code, so an op gated in but not generated would silently add."""
    from dynshape_kernels.abi.vocabulary import BINARY_OPS
    from dynshape_kernels.cpu.switches import STREAM_PERIOD_BINARY
    assert [BINARY_OPS[c] for c in np.flatnonzero(elementwise.STREAMS_PERIOD)] == ["add"]
    assert [BINARY_OPS[c] for c in sorted(STREAM_PERIOD_BINARY)] == ["add"]


def test_the_period_stream_declines_what_it_cannot_stream():
    """Too short an output (under STREAM_MIN_BLOCKS blocks): False, nothing written."""
    from dynshape_kernels.abi.vocabulary import ADD
    x = np.ones(4 * 3, np.float32)
    r = np.ones(3, np.float32)
    o = np.zeros(12, np.float32)
    x.flags.writeable = r.flags.writeable = False
    assert not elementwise._period_stream(np.int64(ADD), x, np.int64(0), r, np.int64(0), o,
                                          np.int64(0), np.int64(4), np.int64(3))
    assert (o == 0).all()


def test_in_place_calls_do_not_stream_and_stay_right(stream_all):
    x = np.random.default_rng(2).standard_normal(5000).astype(np.float32)
    ref = np.maximum(x, 0)
    dynshape.run("relu", x, out=x)
    np.testing.assert_array_equal(x, ref)
    y = np.arange(5000, dtype=np.float32)
    z = np.ones(5000, dtype=np.float32)
    dynshape.run("add", y, z, out=y)
    np.testing.assert_array_equal(y, np.arange(5000, dtype=np.float32) + 1)


def _stream_flag(op, *arrays):
    """The bound common area of a call and where its streaming flag is."""
    launch = dynshape.ops.get(op).prepare(arrays, None, {})
    geo = PLANE.geometry(launch)
    table = PLANE.lookup(launch, geo, PLANE.key(launch, geo, "cpu"))
    return PLANE.bind(launch, geo, table), common_size(len(arrays) + 1) + S_STREAM


def test_the_executor_asks_for_streaming_from_the_threshold():
    x = np.ones((64, 64), dtype=np.float32)              # 16 KB
    try:
        streaming.set_stream_bytes(16384)
        common, at = _stream_flag("relu", x)
        assert common[at] == 1
        streaming.set_stream_bytes(16385)
        common, at = _stream_flag("relu", x)
        assert common[at] == 0
        streaming.set_stream_bytes("off")
        common, at = _stream_flag("add", x, x)
        assert common[at] == 0 and streaming.stream_bytes() is None
    finally:
        streaming.set_stream_bytes(None)


def test_threshold_settings(monkeypatch):
    monkeypatch.setenv(streaming.ENV, "12345")
    assert streaming.stream_bytes() == 12345 and streaming.streams(12345)
    assert not streaming.streams(12344)
    monkeypatch.setenv(streaming.ENV, "off")
    assert streaming.stream_bytes() is None and not streaming.streams(1 << 40)
    monkeypatch.setenv(streaming.ENV, "lots")
    with pytest.raises(SettingError, match="DYNSHAPE_STREAM_BYTES.*byte count"):
        streaming.stream_bytes()
    monkeypatch.delenv(streaming.ENV)
    assert streaming.stream_bytes() == streaming.default_bytes() > 0
    for bad in (-1, 1.5, True, "x"):
        with pytest.raises(SettingError, match="set_stream_bytes"):
            streaming.set_stream_bytes(bad)
    assert streaming.stream_bytes() == streaming.default_bytes()


def test_default_threshold_is_the_cache_size_at_most_32_mib(monkeypatch):
    """A last-level cache larger than 32 MiB (shared by many cores; a virtual machine's
    share is small) does not raise the threshold past 32 MiB; a smaller one sets it."""
    monkeypatch.delenv(streaming.ENV, raising=False)
    for llc, want in ((480 << 20, 32 << 20), (32 << 20, 32 << 20), (8 << 20, 8 << 20)):
        monkeypatch.setattr(streaming, "last_level_cache_bytes", lambda llc=llc: llc)
        assert streaming.default_bytes() == want
        assert streaming.stream_bytes() == want
        assert streaming.streams(want) and not streaming.streams(want - 1)


FUSED = ("float32", "float64", "float16")


@given(rows=st.integers(1, 12), cols=st.integers(1, 2100), start=st.integers(0, 40),
       dtype=st.sampled_from(FUSED), op=st.sampled_from(("add", "sub", "mul")),
       bias=st.booleans(), seed=st.integers(0, 2**16))
def test_fused_side_then_relu_streams_as_the_interpreter_computes(stream_all, rows, cols, start,
                                                                  dtype, op, bias, seed):
    """``x op side, then relu`` (the fused bias + relu) runs as one streaming loop over rows
    that follow each other: bit for bit the interpreter's result (normal stores), every
    output alignment, the memory around the output untouched."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(dtype)
    side = rng.standard_normal((cols,) if bias else (rows, cols)).astype(dtype)
    f = dynshape.fuse([(op, "side"), "relu"])
    streaming.set_stream_bytes(0)          # every example (the fixture runs once per test)
    dynshape.clear_cache()
    sentinel = np.array(9, dtype=dtype)
    buf = np.full(start + rows * cols + 11, sentinel, dtype=dtype)
    out = buf[start:start + rows * cols].reshape(rows, cols)
    f(x, side=side, out=out)
    streaming.set_stream_bytes("off")
    dynshape.clear_cache()
    want = f(x, side=side)
    np.testing.assert_array_equal(out, want)
    with np.errstate(over="ignore"):
        ref = np.maximum(getattr(np, {"add": "add", "sub": "subtract", "mul": "multiply"}[op])(
            x, side), 0)
    np.testing.assert_array_equal(out, ref)
    assert (buf[:start] == sentinel).all() and (buf[start + rows * cols:] == sentinel).all()


#: steps of the chains below: (step, needs the side)
CHAIN_STEPS = ((("add", "side"), True), (("mul", "side"), True), (("mul", 2.0), False),
               ("relu", False), ("exp", False), ("tanh", False), ("abs", False),
               (("sub", 0.5), False), ("sigmoid", False), (("sub", 0.5, "_"), False))


@given(steps=st.lists(st.integers(0, len(CHAIN_STEPS) - 1), min_size=1, max_size=5),
       rows=st.integers(1, 30), cols=st.integers(1, 3000), long_rows=st.booleans(),
       start=st.integers(0, 40), gap=st.sampled_from((0, 0, 3, 16)),
       dtype=st.sampled_from(FUSED), bias=st.booleans(), seed=st.integers(0, 2**16))
def test_fused_chains_stream_block_by_block_as_the_interpreter_computes(
        steps, rows, cols, long_rows, start, gap, dtype, bias, seed):
    """Any other elementwise chain whose output streams runs block by block through a small
    buffer (``fused._chain_stream``: blocks of whole rows, or of a long row's columns, the
    first step reading x; a last step that is unary or has a constant operand, on either
    side, runs piece by piece as the block streams out, ``_last_stream``, and a one-step
    chain reads x itself): bit for bit the result of the chain run in the output tile
    (normal stores), on every output alignment, with and without gaps between the output's
    rows, and nothing around the output written."""
    from dynshape_kernels.cpu.fused import STREAM_CHAIN_BYTES
    rng = np.random.default_rng(seed)
    if long_rows:          # rows longer than a block: blocks of columns
        rows, cols = 1 + rows % 3, STREAM_CHAIN_BYTES // np.dtype(dtype).itemsize + cols
    chain = [CHAIN_STEPS[i][0] for i in steps]
    x = rng.standard_normal((rows, cols)).astype(dtype)
    side = rng.standard_normal((cols,) if bias else (rows, cols)).astype(dtype)
    kw = {"side": side} if any(CHAIN_STEPS[i][1] for i in steps) else {}
    f = dynshape.fuse(chain)
    sentinel = np.array(9, dtype=dtype)
    width = cols + gap
    buf = np.full(start + rows * width + 11, sentinel, dtype=dtype)
    out = buf[start:start + rows * width].reshape(rows, width)[:, :cols]
    try:
        streaming.set_stream_bytes(0)
        dynshape.clear_cache()
        with np.errstate(all="ignore"):
            f(x, out=out, **kw)
        streaming.set_stream_bytes("off")
        dynshape.clear_cache()
        with np.errstate(all="ignore"):
            want = f(x, **kw)
    finally:
        streaming.set_stream_bytes(None)
        dynshape.clear_cache()
    np.testing.assert_array_equal(out, want)
    inside = np.zeros(buf.size, bool)
    inside[start:start + rows * width] = (np.arange(rows * width) % width) < cols
    assert (buf[~inside] == sentinel).all()


def test_other_fused_chains_and_layouts_stream_right(stream_all):
    """Chains that are not ``x op side, then relu`` (another activation, three steps, the
    side first), and output rows with gaps, stream (block by block) to the right result."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((50, 700)).astype(np.float32)
    b = rng.standard_normal(700).astype(np.float32)
    for chain, ref in (([("add", "b"), "sigmoid"], 1 / (1 + np.exp(-(x + b)))),
                       ([("add", "b"), "relu", ("mul", 2.0)], np.maximum(x + b, 0) * 2),
                       ([("sub", "b"), "abs"], np.abs(x - b))):
        np.testing.assert_allclose(dynshape.fuse(chain)(x, b=b), ref, rtol=2e-6, atol=1e-7)
    buf = np.full((50, 720), -1.0, np.float32)
    dynshape.fuse([("add", "b"), "relu"])(x, b=b, out=buf[:, 10:710])
    np.testing.assert_array_equal(buf[:, 10:710], np.maximum(x + b, 0))
    assert (buf[:, :10] == -1).all() and (buf[:, 710:] == -1).all()
    y = x.copy()                                      # in place: the output is x itself
    dynshape.fuse([("add", "b"), "relu"])(y, b=b, out=y)
    np.testing.assert_array_equal(y, np.maximum(x + b, 0))


# ---- rowwise: the last pass of log_softmax and the norms ------------------------------------
ROW_OPS = ("log_softmax", "layer_norm", "layer_norm_wb", "rms_norm", "rms_norm_w", "softmax")


def _rowwise_call(op, x, rng, out):
    """Run ``op`` (``_w``/``_wb``: with weight, and bias) into ``out``; its float64 reference."""
    cols = x.shape[-1]
    x64 = x.astype(np.float64)
    w = rng.standard_normal(cols).astype(x.dtype) if op.endswith(("_w", "_wb")) else None
    b = rng.standard_normal(cols).astype(x.dtype) if op.endswith("_wb") else None
    name = op.split("_w")[0] if "_w" in op else op
    if name in ("softmax", "log_softmax"):
        dynshape.run(name, x, out=out, axis=-1)
        m = x64.max(-1, keepdims=True)
        ls = (x64 - m) - np.log(np.exp(x64 - m).sum(-1, keepdims=True))
        return np.exp(ls) if name == "softmax" else ls
    args = [x] + [a for a in (w, b) if a is not None]
    dynshape.run(name, *args, out=out)
    if name == "layer_norm":
        y = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    else:
        y = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-5)
    y = y if w is None else y * w
    return y if b is None else y + b


@given(rows=st.integers(1, 4), extra=st.integers(-40, 300), start=st.integers(0, 40),
       gap=st.sampled_from((0, 0, 3, 17)), dtype=st.sampled_from(FUSED),
       op=st.sampled_from(ROW_OPS), seed=st.integers(0, 2**16))
def test_rowwise_last_pass_streams_as_normal_stores_compute(rows, extra, start, gap, dtype, op,
                                                            seed):
    """Rows of at least STREAM_ROW_BYTES (a few just shorter, which keep normal stores):
    bit for bit the normal stores' result on every output alignment, rows following each
    other (their blocks continue across the row end) or with gaps, the memory around
    the output untouched; and right against a float64 reference."""
    rng = np.random.default_rng(seed)
    cols = elementwise.STREAM_ROW_BYTES // np.dtype(dtype).itemsize + extra
    x = rng.standard_normal((rows, cols)).astype(dtype)
    pitch = cols + gap
    sentinel = np.array(3, dtype=dtype)
    results = []
    for threshold in (0, "off"):
        streaming.set_stream_bytes(threshold)   # per example (a fixture runs once per test)
        dynshape.clear_cache()
        buf = np.full(start + rows * pitch + 9, sentinel, dtype=dtype)
        out = buf[start:start + rows * pitch].reshape(rows, pitch)[:, :cols]
        ref = _rowwise_call(op, x, np.random.default_rng(seed + 1), out)
        inside = np.zeros(buf.shape, dtype=bool)
        inside[start:start + rows * pitch].reshape(rows, pitch)[:, :cols] = True
        assert (buf[~inside] == sentinel).all()
        results.append(out.copy())
    streaming.set_stream_bytes(None)
    dynshape.clear_cache()
    np.testing.assert_array_equal(results[0], results[1])
    tol = {"float32": 2e-5, "float64": 1e-11, "float16": 4e-3}[dtype]
    np.testing.assert_allclose(results[0].astype(np.float64), ref, rtol=tol,
                               atol=tol * np.abs(ref).max())


def test_rowwise_in_place_keeps_normal_stores(stream_all):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 5000)).astype(np.float32)
    want = dynshape.run("layer_norm", x)
    y = x.copy()
    dynshape.run("layer_norm", y, out=y)
    np.testing.assert_array_equal(y, want)


def test_the_rowwise_executor_binds_the_store_block():
    from dynshape.runtime.walk import ROWWISE
    from dynshape_kernels.abi.common_area import reduce_block_size
    x = np.ones((4, 4096), dtype=np.float32)                  # 64 KB
    at = common_size(4) + reduce_block_size(4) + S_STREAM
    try:
        for threshold, want in ((65536, 1), (65537, 0), ("off", 0)):
            streaming.set_stream_bytes(threshold)
            launch = dynshape.ops.get("layer_norm").prepare((x,), None, {})
            ROWWISE.operands(launch)
            geo = ROWWISE.geometry(launch)
            table = ROWWISE.lookup(launch, geo, ROWWISE.key(launch, geo, "cpu"))
            common = ROWWISE.bind(launch, geo, table)
            assert common.size == at + 1 and common[at] == want
    finally:
        streaming.set_stream_bytes(None)


_BINARY_NP = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
              "pow": np.power, "maximum": np.maximum, "minimum": np.minimum}


@given(rows=st.integers(1, 4), cols=st.integers(1, 5000), start=st.integers(0, 40),
       dtype=st.sampled_from(DTYPES), op=st.sampled_from(sorted(_BINARY_NP)),
       left=st.booleans(), number=st.booleans(), seed=st.integers(0, 2**16))
def test_an_op_by_one_value_streams_as_it_stores(rows, cols, start, dtype, op, left, number,
                                                seed):
    """x op c and c op x (c a number or a one-element array) give, streaming, the very
    results of normal stores, NumPy's, and write nothing outside the output."""
    if op == "div" and dtype.startswith("int"):
        return                                       # float64 results: another output dtype
    rng = np.random.default_rng(seed)
    x = _values(rng, (rows, cols), dtype)
    if op == "pow":
        x = np.abs(x) + (0 if dtype.startswith("int") else 0.5)
    c = 2 if op == "pow" and dtype.startswith("int") else 1.75 if op == "pow" else 3
    if not number:
        c = np.full((1, 1), c, dtype=dtype)
    args = (c, x) if left else (x, c)
    sentinel = np.array(5, dtype=dtype)
    buf = np.full(start + rows * cols + 7, sentinel, dtype=dtype)
    out = buf[start:start + rows * cols].reshape(rows, cols)
    normal = np.empty_like(out)
    streaming.set_stream_bytes("off")
    dynshape.clear_cache()
    with np.errstate(all="ignore"):
        try:
            dynshape.run(op, *args, out=normal)
            streaming.set_stream_bytes(0)
            dynshape.clear_cache()
            dynshape.run(op, *args, out=out)
        finally:
            streaming.set_stream_bytes(None)
            dynshape.clear_cache()
        want = _BINARY_NP[op](*args)
    np.testing.assert_array_equal(out, normal)
    if op == "pow" and dtype == "float64":
        np.testing.assert_array_max_ulp(out, want, 1)       # libm's pow against NumPy's
    elif op == "pow" and not dtype.startswith("int"):
        np.testing.assert_allclose(out, want, rtol=2e-3 if dtype == "float16" else 2e-6)
    else:
        np.testing.assert_array_equal(out, want)
    assert (buf[:start] == sentinel).all() and (buf[start + rows * cols:] == sentinel).all()


@given(rows=st.integers(2, 4), extra=st.integers(0, 600), gap=st.integers(0, 40),
       dtype=st.sampled_from(("float32", "float64", "float16", "int64")),
       op=st.sampled_from(("sub", "mul", "pow", "maximum")), left=st.booleans(),
       seed=st.integers(0, 2**16))
def test_one_value_per_row_streams_long_rows_one_by_one(stream_all, rows, extra, gap, dtype,
                                                        op, left, seed):
    """x op c[:, None] (and c[:, None] op x) over rows of at least STREAM_ROW_BYTES, the
    output's rows apart (a view): NumPy's results, nothing written between the rows."""
    rng = np.random.default_rng(seed)
    cols = elementwise.STREAM_ROW_BYTES // np.dtype(dtype).itemsize + extra
    x = _values(rng, (rows, cols), dtype)
    c = _values(rng, (rows, 1), dtype)
    if op == "pow":
        x = np.abs(x) % 3 + np.array(1, dtype=dtype)
        c = np.abs(c) % 3 + np.array(1, dtype=dtype)
    args = (c, x) if left else (x, c)
    sentinel = np.array(7, dtype=dtype)
    buf = np.full((rows, cols + gap), sentinel, dtype=dtype)
    out = buf[:, :cols]
    dynshape.run(op, *args, out=out)
    with np.errstate(all="ignore"):
        want = _BINARY_NP[op](*args)
    if op == "pow" and dtype == "float64":
        np.testing.assert_array_max_ulp(out, want, 1)
    elif op == "pow" and dtype in ("float32", "float16"):
        np.testing.assert_allclose(out, want, rtol=2e-3 if dtype == "float16" else 2e-6)
    else:
        np.testing.assert_array_equal(out, want)
    assert (buf[:, cols:] == sentinel).all()


@pytest.mark.parametrize("n, start", [(4096, 0), (5000, 3), (777, 1), (300, 0), (64, 0),
                                      (20000, 13)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32"])
@pytest.mark.parametrize("op, left", [("sub", True), ("sub", False), ("pow", False),
                                      ("mul", True)])
def test_the_buffered_stream_by_one_value_computes_every_element(n, start, dtype, op, left):
    """The driver's path itself (``elementwise._buffered_stream`` by one value), so that a
    change of table or threshold cannot leave it untested: heads before the first line
    start, whole streamed blocks, tails stored normally, on either side of the op; nothing
    else written."""
    from dynshape_kernels.abi.storage import carrier
    from dynshape_kernels.abi.vocabulary import BINARY_OPS
    rng = np.random.default_rng(n + start)
    st_dt = np.dtype(carrier(dtype))
    x = np.abs(_values(rng, n + 5, dtype))[5:] + np.array(1, dtype=dtype)
    c = np.array(2 if op == "pow" else 3, dtype=dtype)
    want = np.empty_like(x)
    streaming.set_stream_bytes("off")
    try:
        dynshape.run(op, *((c, x) if left else (x, c)), out=want)
    finally:
        streaming.set_stream_bytes(None)
    buf = np.full(start + n + 16, 9, dtype=dtype)
    out = buf[start:start + n]
    x.flags.writeable = False
    mode = elementwise.ONE_LEFT if left else elementwise.ONE_RIGHT
    elementwise._buffered_stream(np.int64(BINARY_OPS.index(op)), mode, x.view(st_dt),
                                 x.view(st_dt), c.view(st_dt)[()], out.view(st_dt))
    np.testing.assert_array_equal(out, want)
    assert (buf[:start] == 9).all() and (buf[start + n:] == 9).all()


@given(rows=st.integers(1, 4), cols=st.integers(1, 5000), start=st.integers(0, 40),
       dtype=st.sampled_from(DTYPES), op=st.sampled_from(("div", "pow", "maximum", "minimum")),
       seed=st.integers(0, 2**16))
def test_ops_without_a_streaming_loop_stream_through_a_buffer(rows, cols, start, dtype, op,
                                                             seed):
    """Two-array div, maximum and minimum over rows that follow each other stream through
    a buffer (``elementwise._buffered_stream``), pow stores normally: with the threshold
    at 0 every one gives the results of normal stores, and nothing outside the output is
    written."""
    if op == "div" and dtype.startswith("int"):
        return
    rng = np.random.default_rng(seed)
    a, b = (_values(rng, (rows, cols), dtype) for _ in range(2))
    if op == "pow":
        a = np.abs(a) % 4 + np.array(1, dtype=dtype)
        b = np.abs(b) % 3
    sentinel = np.array(5, dtype=dtype)
    buf = np.full(start + rows * cols + 7, sentinel, dtype=dtype)
    out = buf[start:start + rows * cols].reshape(rows, cols)
    normal = np.empty_like(out)
    with np.errstate(all="ignore"):
        try:
            streaming.set_stream_bytes("off")
            dynshape.clear_cache()
            dynshape.run(op, a, b, out=normal)
            streaming.set_stream_bytes(0)
            dynshape.clear_cache()
            dynshape.run(op, a, b, out=out)
        finally:
            streaming.set_stream_bytes(None)
            dynshape.clear_cache()
        want = _BINARY_NP[op](a, b)
    np.testing.assert_array_equal(out, normal)
    if op != "pow" or dtype.startswith("int"):
        np.testing.assert_array_equal(out, want)
    assert (buf[:start] == sentinel).all() and (buf[start + rows * cols:] == sentinel).all()


@pytest.mark.parametrize("n, start", [(4096, 0), (5000, 3), (777, 1), (64, 0), (20000, 13)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32"])
def test_the_buffered_stream_of_two_arrays_computes_every_element(n, start, dtype):
    """``elementwise._buffered_stream`` of two arrays itself: every element, nothing else
    written."""
    from dynshape_kernels.abi.storage import carrier
    from dynshape_kernels.abi.vocabulary import BINARY_OPS
    rng = np.random.default_rng(n + start)
    st_dt = np.dtype(carrier(dtype))
    a, b = (_values(rng, n + 3, dtype)[3:] for _ in range(2))
    buf = np.full(start + n + 16, 9, dtype=dtype)
    out = buf[start:start + n]
    a.flags.writeable = b.flags.writeable = False
    elementwise._buffered_stream(np.int64(BINARY_OPS.index("maximum")), elementwise.ZIP_BOTH,
                                 a.view(st_dt), b.view(st_dt), a.view(st_dt)[0],
                                 out.view(st_dt))
    np.testing.assert_array_equal(out, np.maximum(a, b))
    assert (buf[:start] == 9).all() and (buf[start + n:] == 9).all()


def test_the_buffered_stream_gate_is_div_maximum_minimum():
    """The ops that stream through a buffer: the ones without a loop of their own that were
    measured faster so (pow, bound by its compute, was slower)."""
    from dynshape_kernels.abi.vocabulary import BINARY_OPS
    from dynshape_kernels.cpu.switches import STREAM_BINARY
    gated = [BINARY_OPS[c] for c in np.flatnonzero(elementwise.STREAMS_BUFFERED)]
    assert gated == ["div", "maximum", "minimum"]
    assert not set(np.flatnonzero(elementwise.STREAMS_BUFFERED)) & set(STREAM_BINARY)
