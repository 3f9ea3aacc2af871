"""The replay of exact calls (runtime/replay.py): a repeated call with the same layout runs
the recorded driver call, gives the same results as the full path on new data, and ends
whenever the table it ran changes (background swap, eviction, clear_cache), when ``out``
overlaps an input, or when a setting it depends on changes."""
import copy

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dynshape
from dynshape import testing
from dynshape.runtime import config, replay
from dynshape.runtime.conv import forcing_slot
from dynshape.runtime.layout import flat_buffer, flat_view, flattener, kernel_dtype
from dynshape.runtime.replay import REPLAY
from dynshape.runtime.targets import compiled_entry
from dynshape_kernels import drivers

rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _ref_conv(x, w, pads):
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    out = np.zeros((n, m, oh, ow))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,mc->nmhw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return out


# every family: (name, call on arrays, NumPy reference, arrays of one layout)
CASES = {
    "unary": (lambda a, out=None: dynshape.run("relu", a, out=out),
              lambda a: np.maximum(a, 0), lambda: (f32(33, 31),)),
    "binary": (lambda a, b, out=None: dynshape.run("add", a, b, out=out),
               lambda a, b: a + b, lambda: (f32(33, 31), f32(31))),
    # one-dimensional contiguous operands: the replay passes the arrays themselves
    "unary flat": (lambda a, out=None: dynshape.run("sigmoid", a, out=out),
                   lambda a: 1 / (1 + np.exp(-a.astype(np.float64))), lambda: (f32(1003),)),
    "binary flat": (lambda a, b, out=None: dynshape.run("sub", a, b, out=out),
                    lambda a, b: a - b, lambda: (f32(1003), f32(1003))),
    "binary flat broadcast": (lambda a, b, out=None: dynshape.run("mul", a, b, out=out),
                              lambda a, b: a * b, lambda: (f32(1003), f32(1))),
    # a number operand: converted by each call as the spec converts it (pow by 2: x * x)
    "binary number": (lambda a, out=None: dynshape.run("mul", a, 0.75, out=out),
                      lambda a: a * np.float32(0.75), lambda: (f32(33, 31).T,)),
    "binary number first": (lambda a, out=None: dynshape.run("sub", 2, a, out=out),
                            lambda a: 2 - a, lambda: (f32(1003),)),
    "pow by a number": (lambda a, out=None: dynshape.run("pow", a, 2.0, out=out),
                        lambda a: a * a, lambda: (f32(33, 31)[:, ::2],)),
    "reduce": (lambda a, out=None: dynshape.run("sum", a, axis=1, out=out),
               lambda a: a.astype(np.float64).sum(1), lambda: (f32(33, 31),)),
    "rowwise": (lambda a, out=None: dynshape.run("softmax", a, out=out),
                lambda a: np.exp(a - a.max(-1, keepdims=True))
                / np.exp(a - a.max(-1, keepdims=True)).sum(-1, keepdims=True),
                lambda: (f32(33, 31),)),
    "matmul": (lambda a, b, out=None: dynshape.run("matmul", a, b, out=out),
               lambda a, b: a.astype(np.float64) @ b, lambda: (f32(17, 40), f32(40, 9))),
    "pool": (lambda a, out=None: dynshape.run("max_pool2d", a, kernel_shape=(2, 2),
                                              strides=(2, 2), out=out),
             lambda a: a.reshape(1, 3, 6, 2, 5, 2).max(axis=(3, 5)),
             lambda: (f32(1, 3, 12, 10),)),
    "conv": (lambda x, w, out=None: dynshape.run("conv2d", x, w, pads=(1, 1, 1, 1), out=out),
             lambda x, w: _ref_conv(x, w, (1, 1, 1, 1)), lambda: (f32(1, 3, 9, 8), f32(4, 3, 3, 3))),
    # copy and transpose move unsigned items through views of the caller's memory
    "copy": (lambda a, out=None: dynshape.run("copy", a, out=out), lambda a: a.copy(),
             lambda: (f32(40, 66)[:, ::3],)),
    "transpose": (lambda a, out=None: dynshape.run("transpose", a, axes=(2, 0, 1), out=out),
                  lambda a: a.transpose(2, 0, 1), lambda: (f32(5, 7, 9),)),
    "copy float16": (lambda a, out=None: dynshape.run("copy", a, out=out), lambda a: a.copy(),
                     lambda: (f32(33, 31).astype(np.float16).T,)),
    "fused": (lambda a, b, out=None: _FUSED(a, b=b, out=out),
              lambda a, b: np.exp(np.maximum(a + b, 0) * 0.5), lambda: (f32(33, 31), f32(31))),
    # chains led by a conv2d or a matmul: the lead's driver with the chain as its epilogue;
    # the bias and the sides come from each call's arrays
    "fused conv": (lambda x, w, b, s, out=None: _FUSED_CONV(x, w, b, s, out=out),
                   lambda x, w, b, s: np.maximum(_ref_conv(x, w, (1, 1, 1, 1))
                                                 + b[:, None, None] + s, 0) * 0.5,
                   lambda: (f32(1, 3, 9, 8), f32(4, 3, 3, 3), f32(4), f32(1, 4, 1, 1))),
    "fused matmul": (lambda a, b, r, out=None: _FUSED_MATMUL(a, b, r=r, out=out),
                     lambda a, b, r: np.tanh((a.astype(np.float64) @ b + r) * 0.25),
                     lambda: (f32(17, 40), f32(40, 9)[:, ::-1], f32(17, 9))),
}
_FUSED = dynshape.fuse([("add", "b"), "relu", ("mul", 0.5), "exp"])
_FUSED_CONV = dynshape.fuse([("conv2d", {"pads": 1, "bias": "b"}), ("add", "s"), "relu",
                             ("mul", 0.5)])
_FUSED_MATMUL = dynshape.fuse(["matmul", ("add", "r"), ("mul", 0.25), "tanh"])


@pytest.mark.parametrize("family", sorted(CASES))
@pytest.mark.parametrize("given_out", [False, True])
@pytest.mark.parametrize("wrapped", [False, True], ids=["entry point", "wrapped get"])
def test_repeated_calls_are_replayed_and_right(family, given_out, wrapped, request):
    """Replays enter the driver's compiled entry point; once ``drivers.get`` is wrapped (a
    tool counting calls), each replay goes through it instead. Both give NumPy's answer."""
    driver_calls = request.getfixturevalue("driver_calls") if wrapped else []
    call, ref, make = CASES[family]
    first = make()
    out = np.empty_like(call(*first)) if given_out else None
    call(*first, out=out)
    before, calls = REPLAY.replays, len(driver_calls)
    for _ in range(3):
        arrays = make()                     # new data, same layout
        res = call(*arrays, out=out)
        np.testing.assert_allclose(res, ref(*arrays), rtol=2e-5, atol=2e-5)
        if given_out:
            assert res is out
    assert REPLAY.replays - before == 3, "every repeated call is a replay"
    assert len(driver_calls) - calls == (3 if wrapped else 0), "a replay is one driver call"


def test_wrapping_drivers_get_ends_the_replays_recorded_before(monkeypatch):
    """A replay holds only while the target's ``drivers.get`` is the one it was recorded
    under: once a tool wraps ``get``, the next call takes the full path through the wrapper
    and records a replay that calls it; unwrapping ends that replay in turn."""
    call, ref, make = CASES["binary"]
    out = np.empty_like(call(*make()))
    call(*make(), out=out)
    before = REPLAY.replays
    call(*make(), out=out)
    assert REPLAY.replays == before + 1
    calls, real_get = [], drivers.get

    def counting_get(family, dtype):
        disp = real_get(family, dtype)

        def driver(*args):
            calls.append(family)
            return disp(*args)
        return driver
    monkeypatch.setattr(drivers, "get", counting_get)
    for k in range(3):
        arrays = make()
        np.testing.assert_allclose(call(*arrays, out=out), ref(*arrays), rtol=2e-5, atol=2e-5)
        assert len(calls) == k + 1, "every call enters the driver through the wrapper"
    assert REPLAY.replays == before + 3       # the first call after wrapping: full path
    monkeypatch.setattr(drivers, "get", real_get)
    call(*make(), out=out)
    assert REPLAY.replays == before + 3 and len(calls) == 3
    call(*make(), out=out)
    assert REPLAY.replays == before + 4 and len(calls) == 3


def test_drivers_have_one_compiled_entry_point():
    """What replays call: the single compiled signature's entry point of a driver; anything
    else (a wrapper, a dispatcher with several signatures) is called as it is."""
    disp = drivers.get("unary", "float32")
    entry = compiled_entry(disp)
    assert entry is not disp and entry is next(iter(disp.overloads.values())).entry_point

    def wrapper(*args):
        return disp(*args)
    assert compiled_entry(wrapper) is wrapper

    @numba.njit
    def twice(a):
        return a + 1
    twice(1)
    twice(1.0)
    assert compiled_entry(twice) is twice


def test_signature_separates_what_a_replay_depends_on():
    x, y = f32(4, 5), f32(4, 5)
    sig = replay.signature
    base = sig("add", (x, y), None, {})
    assert base == sig("add", (f32(4, 5), f32(4, 5)), None, {})       # data is not in it
    others = [sig("add", (x, y.T.copy().T), None, {}),                # strides
              sig("add", (x, f32(5, 4)), None, {}),                   # shape
              sig("add", (x, y.astype(np.float64)), None, {}),        # dtype
              sig("add", (x, y), y, {}),                              # out given, is y
              sig("add", (x, y), f32(4, 5), {}),                      # out given
              sig("add", (x,), None, {"y": 1}),                       # fewer arrays
              sig("sub", (x, y), None, {})]                           # op
    assert len({base, *others}) == len(others) + 1
    # 1, 1.0 and True hash alike and compare equal: the value's type tells them apart
    ones = {sig("sum", (x,), None, {"axis": v}) for v in (1, 1.0, True)}
    assert len(ones) == 3
    w = f32(5)
    assert sig("m", (x,), None, {"bias": w}) != sig("m", (x,), None, {"bias": w.copy()})
    assert sig("relu", (x,), np.zeros((4, 5), np.float32)[::-1][::-1], {}) is not None
    ro = np.zeros((4, 5), np.float32)
    ro.flags.writeable = False
    assert sig("relu", (x,), ro, {}) is None and sig("relu", ([1.0],), None, {}) is None
    # one array into out= (built apart, the commonest call), and three arrays
    o = f32(4, 5)
    one = sig("relu", (x,), o, {})
    assert one == sig("relu", (f32(4, 5),), f32(4, 5), {})
    ones = [sig("relu", (x.T.copy().T,), o, {}), sig("relu", (f32(5, 4),), o, {}),
            sig("relu", (x.astype(np.float64),), o, {}), sig("relu", (x,), o.T.copy().T, {}),
            sig("relu", (x,), f32(2, 10), {}), sig("relu", (x,), o.astype(np.float64), {}),
            sig("relu", (o,), o, {}), sig("relu", (x,), o, {"a": 1}), sig("abs", (x,), o, {}),
            sig("relu", (x,), None, {})]
    assert len({one, *ones}) == len(ones) + 1
    # the tuples built apart are the general layout (an attribute appends three items)
    assert sig("relu", (x,), o, {"a": 1})[:-3] == one
    assert sig("add", (x, y), o, {"a": 1})[:-3] == sig("add", (x, y), o, {})
    assert sig("relu", ([1.0],), o, {}) is None and sig("relu", (x,), ro, {}) is None
    # one array and one attribute into out= (a reduction or row-wise op): built apart too
    o1 = f32(4)
    assert sig("sum", (x,), o1, {"axis": 1}) == ("sum", 1, o1.dtype, o1.shape, o1.strides,
                                                 x.dtype, x.shape, x.strides, False,
                                                 "axis", int, 1)
    assert sig("sum", (x,), o1, {"axis": 1}) != sig("sum", (x,), o1, {"axis": 0})
    assert sig("sum", (x,), o1, {"axis": (1,)}) != sig("sum", (x,), o1, {"axis": 1})
    assert sig("m", (x,), o, {"bias": w})[-6:] == ("bias", "array", id(w), w.dtype, w.shape,
                                                   w.strides)
    assert sig("m", (x,), o, {"a": 1, "b": 2})[:-3] == sig("m", (x,), o, {"a": 1})
    assert sig("relu", ([1.0],), o, {"a": 1}) is None
    three = sig("where", (x, y, o), o, {})
    assert three == sig("where", (f32(4, 5), f32(4, 5), o), o, {})
    assert three != sig("where", (x, y, o), y, {}) != sig("where", (x, y, f32(5, 4)), y, {})
    assert sig("where", (x, y, [1]), None, {}) is None


@pytest.mark.parametrize("family", sorted(CASES))
def test_replays_compile_nothing(family):
    call, _, make = CASES[family]
    call(*make())
    with testing.count_compilations() as c:
        for _ in range(5):
            call(*make())
    assert c.count == 0


def test_background_swap_ends_the_replay():
    dynshape.clear_cache()
    dynshape.set_policy("background")
    x = f32(517, 1531)
    dynshape.run("relu", x)
    assert dynshape.last_table().variant == "simplified"
    dynshape.wait_optimized()
    y = dynshape.run("relu", x)
    assert dynshape.last_table().variant == "optimized", "the swapped-in table runs next"
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    before = REPLAY.replays
    dynshape.run("relu", x)
    assert REPLAY.replays == before + 1 and dynshape.last_table().variant == "optimized"


def test_clear_cache_and_eviction_end_replays():
    x = f32(40, 7)
    dynshape.run("exp", x)
    assert len(REPLAY) > 0
    dynshape.clear_cache()
    assert len(REPLAY) == 0
    dynshape.run("exp", x)
    old = config.cache.max_tables
    try:
        dynshape.set_cache_limit(1)
        dynshape.run("exp", f32(3000, 3000)[:1, :1000])     # another bucket evicts exp's table
        before = REPLAY.replays
        np.testing.assert_allclose(dynshape.run("exp", x), np.exp(x), rtol=2e-6)
        assert REPLAY.replays == before, "an evicted table is not replayed"
    finally:
        dynshape.set_cache_limit(old)


def test_the_cache_epoch_moves_whenever_a_table_leaves_it():
    """Replays look their key up again only when the cache's epoch moved: every way a table
    leaves the cache or is replaced moves it, a hit or a new key does not."""
    from dynshape.tables.cache import TableCache
    cache = TableCache(max_tables=2)
    t1, t2, t3 = object(), object(), object()
    e = cache.epoch
    cache.put("a", t1)
    cache.put("b", t2)
    cache.put("a", t1)                                  # the same table again
    assert cache.get("a") is t1 and cache.epoch == e
    cache.put("a", t3)                                  # replaced
    assert cache.epoch == e + 1
    cache.put("c", t1)                                  # evicts "b"
    assert cache.epoch == e + 2 and cache.get("b") is None
    cache.optimize_later("a", lambda: t2).result()      # swapped
    assert cache.epoch == e + 3 and cache.get("a") is t2
    cache.clear()
    assert cache.epoch == e + 4


def test_a_replaced_table_ends_the_replay():
    """A table put in the place of a replay's table (not a swap: a second build stored over
    it) ends the replay, and a steady stream of calls is replayed without looking the key
    up again."""
    x = f32(29, 43)
    dynshape.run("tanh", x)
    dynshape.run("tanh", x)
    table = dynshape.last_table()
    key = next(k for k in config.cache.keys() if config.cache._tables[k] is table)
    lookups = []

    class Watched(type(config.cache._tables)):
        def get(self, k, default=None):
            lookups.append(k)
            return super().get(k, default)
    real = config.cache._tables
    config.cache._tables = Watched(real)
    try:
        before = REPLAY.replays
        for _ in range(3):
            dynshape.run("tanh", x)
        assert REPLAY.replays - before == 3 and lookups == []
        config.cache.put(key, copy.copy(table))
        before = REPLAY.replays
        np.testing.assert_allclose(dynshape.run("tanh", x), np.tanh(x), rtol=2e-6, atol=1e-7)
        assert REPLAY.replays == before, "a replaced table is not replayed"
        assert dynshape.last_table() is config.cache._tables[key]
    finally:
        config.cache._tables = type(real)(config.cache._tables)


def test_partial_overlap_takes_the_full_path():
    base = f32(1000)
    a, o = base[:999], base[1:]
    expect = np.exp(a)
    dynshape.run("exp", f32(999), out=f32(999))            # the same layouts, disjoint
    before = REPLAY.replays
    dynshape.run("exp", a, out=o)
    assert REPLAY.replays == before
    np.testing.assert_allclose(o, expect, rtol=2e-6)


def test_a_copy_whose_input_was_copied_first_is_not_replayed_from_it():
    """A copy into an ``out`` that partly overlaps its input reads a copy of the input (as
    NumPy does); no replay is made from that call, and later calls of the same layout,
    overlapping or not, give NumPy's results."""
    base = f32(1000)
    a, o = base[:999], base[1:]
    expect = a.copy()
    before = REPLAY.replays
    dynshape.run("copy", a, out=o)
    np.testing.assert_array_equal(o, expect)
    for _ in range(3):
        x, y = f32(999), f32(999)
        dynshape.run("copy", x, out=y)
        np.testing.assert_array_equal(y, x)
    assert REPLAY.replays - before == 2            # the first disjoint call records
    base = f32(1000)
    a, o = base[:999], base[1:]
    expect = a.copy()
    dynshape.run("copy", a, out=o)                   # overlapping again: the full path
    np.testing.assert_array_equal(o, expect)
    assert REPLAY.replays - before == 2


def test_in_place_is_its_own_signature():
    x = f32(64, 65)
    y = x.copy()
    dynshape.run("relu", f32(64, 65), out=f32(64, 65))      # not in place
    for _ in range(2):
        dynshape.run("relu", x, out=x)                      # in place: exact alias
    np.testing.assert_array_equal(x, np.maximum(y, 0))


def test_forced_conv_slot_and_thread_count_are_respected():
    call, ref, make = CASES["conv"]
    x, w = make()
    call(x, w)
    with forcing_slot(0):
        before = REPLAY.replays
        np.testing.assert_allclose(call(x, w), ref(x, w), rtol=1e-4, atol=1e-4)
        assert REPLAY.replays == before
    a, b = CASES["matmul"][2]()
    dynshape.run("matmul", a, b)
    n = numba.get_num_threads()
    if n > 1:
        numba.set_num_threads(1)
        try:
            before = REPLAY.replays
            np.testing.assert_allclose(dynshape.run("matmul", a, b), a.astype(np.float64) @ b,
                                       rtol=1e-4, atol=1e-4)
            assert REPLAY.replays == before
        finally:
            numba.set_num_threads(n)


def test_data_dependent_checks_still_run():
    a = np.arange(6, dtype=np.int64)
    dynshape.run("pow", a, np.ones(6, np.int64))
    with pytest.raises(dynshape.DomainError):
        dynshape.run("pow", a, -np.ones(6, np.int64))


def test_attributes_are_part_of_the_signature():
    x = f32(20, 30)
    np.testing.assert_allclose(dynshape.run("sum", x, axis=0), x.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dynshape.run("sum", x, axis=1), x.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dynshape.run("leaky_relu", x, alpha=0.5),
                               np.where(x > 0, x, 0.5 * x), rtol=1e-6)
    np.testing.assert_allclose(dynshape.run("leaky_relu", x, alpha=0.25),
                               np.where(x > 0, x, 0.25 * x), rtol=1e-6)


@settings(max_examples=25, deadline=None)
@given(testing.shapes(max_rank=3, max_side=20).filter(lambda s: 0 not in s), st.data())
def test_views_replayed_against_numpy(shape, data):
    """Strided and negative-stride views of one layout, called twice with new data."""
    for _ in range(2):
        x = data.draw(testing.views(shape, dtype="float32"))
        np.testing.assert_allclose(dynshape.run("tanh", x), np.tanh(x), rtol=2e-6, atol=1e-6)


def _same_layout(v, rng):
    """A new array with ``v``'s dtype, shape and strides over a buffer of new data."""
    buf, off = flat_view(v)
    raw = rng.integers(0, 255, buf.nbytes, dtype=np.uint8)
    return np.ndarray(v.shape, v.dtype, buffer=raw, offset=off * v.itemsize,
                      strides=v.strides)


@st.composite
def _layouts(draw):
    """Views made from a C-contiguous array by steps along axes (gaps), reversed axes and a
    permutation, or drawn by testing.views; with whether they have no gaps."""
    if draw(st.booleans()):
        shape = draw(testing.shapes(max_rank=4, max_side=9).filter(lambda s: 0 not in s))
        dtype = draw(st.sampled_from(["float32", "float64", "int8", "float16", "bfloat16"]))
        return draw(testing.views(shape, dtype=dtype)), False
    shape = draw(st.lists(st.integers(1, 6), min_size=1, max_size=4))
    dtype = draw(st.sampled_from(["float32", "float64", "int8"]))
    steps = [draw(st.sampled_from([1, 1, 1, 2])) for _ in shape]
    full = np.arange(int(np.prod([n * s for n, s in zip(shape, steps)]))).astype(dtype)
    v = full.reshape([n * s for n, s in zip(shape, steps)])[tuple(slice(None, None, s)
                                                                for s in steps)]
    v = v[tuple(slice(None, None, -1) if draw(st.booleans()) else slice(None) for _ in shape)]
    v = v.transpose(draw(st.permutations(range(len(shape)))))
    return v, all(s == 1 for s in steps)


@settings(max_examples=120, deadline=None)
@given(_layouts(), st.integers(0, 99))
def test_flattener_is_flat_view_for_every_array_of_the_layout(layout, seed):
    """A replay flattens its arrays with the function chosen for the recorded layout: for
    any other array of that layout it gives flat_view's buffer (same memory, same items),
    without flat_view's general path for transposed and reversed contiguous arrays, nor its
    span arithmetic per call for arrays with gaps (only half-precision carriers take it)."""
    v, no_gaps = layout
    flat = flattener(v)
    if no_gaps:
        assert flat is not flat_buffer, "a permuted or reversed contiguous array: a view"
    if kernel_dtype(v.dtype) is None:
        assert flat is not flat_buffer, "gaps: the span is computed once for the layout"
    w = _same_layout(v, np.random.default_rng(seed))
    got, (want, off) = flat(w), flat_view(w)
    assert got.ndim == 1 and got.shape == want.shape and got.dtype == want.dtype
    assert got.__array_interface__["data"][0] == want.__array_interface__["data"][0]
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    assert got[off:off + 1].view(w.dtype)[0].tobytes() == w[(0,) * w.ndim].tobytes()


def test_layer_norm_weights_are_read_from_each_call():
    x = f32(20, 16)
    for _ in range(3):
        w, b = f32(16), f32(16)
        y = dynshape.run("layer_norm", x, w, b)
        mu = x.astype(np.float64).mean(-1, keepdims=True)
        ref = (x - mu) / np.sqrt(x.astype(np.float64).var(-1, keepdims=True) + 1e-5) * w + b
        np.testing.assert_allclose(y, ref, rtol=2e-5, atol=2e-5)
    before = REPLAY.replays
    w[:] = 2.0                                        # changed in place: read live
    y = dynshape.run("layer_norm", x, w, b)
    assert REPLAY.replays == before + 1
    np.testing.assert_allclose(y, (x - mu) / np.sqrt(x.astype(np.float64).var(
        -1, keepdims=True) + 1e-5) * 2.0 + b, rtol=2e-5, atol=2e-5)


def _norm_ref(op, x, w=None):
    x = x.astype(np.float64)
    if op == "rms_norm":
        y = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5)
    else:
        y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    return y if w is None else y * w


@pytest.mark.parametrize("op, weighted", [("layer_norm", True), ("rms_norm", True),
                                          ("rms_norm", False), ("layer_norm", False)])
def test_row_norms_with_and_without_weight_are_replayed_right(op, weighted):
    """A weight without a bias: the replay reads the weight of each call and the bias
    placeholder; neither: both placeholders."""
    x = f32(9, 37)
    before = REPLAY.replays
    for _ in range(4):
        x[:] = f32(9, 37)
        w = (f32(37),) if weighted else ()
        np.testing.assert_allclose(dynshape.run(op, x, *w), _norm_ref(op, x, *w), rtol=2e-5,
                                   atol=2e-5)
    assert REPLAY.replays - before == 3


def test_matmul_bias_is_read_live_and_keyed_by_identity():
    a, b = f32(9, 12), f32(12, 5)
    bias = f32(5)
    for _ in range(2):
        np.testing.assert_allclose(dynshape.run("matmul", a, b, bias=bias),
                                   a.astype(np.float64) @ b + bias, rtol=1e-4, atol=1e-4)
    bias[:] = 7.0
    np.testing.assert_allclose(dynshape.run("matmul", a, b, bias=bias),
                               a.astype(np.float64) @ b + 7.0, rtol=1e-4, atol=1e-4)
    other = f32(5)                                    # another array: another signature
    np.testing.assert_allclose(dynshape.run("matmul", a, b, bias=other),
                               a.astype(np.float64) @ b + other, rtol=1e-4, atol=1e-4)
    b64 = f32(5).astype(np.float64)                   # converted by the spec: never replayed
    before = REPLAY.replays
    for _ in range(2):
        np.testing.assert_allclose(dynshape.run("matmul", a, b, bias=b64),
                                   a.astype(np.float64) @ b + b64, rtol=1e-4, atol=1e-4)
    assert REPLAY.replays == before


def test_replays_stay_bounded(monkeypatch):
    monkeypatch.setattr(REPLAY, "max_entries", 8)
    REPLAY.clear()
    for n in range(1, 30):
        dynshape.run("relu", f32(n, 3))
        assert len(REPLAY) <= 8
    np.testing.assert_array_equal(dynshape.run("relu", f32(5, 3) * 0), np.zeros((5, 3)))


def test_fused_integer_pow_checks_every_call():
    f = dynshape.fuse([("pow", "e")])
    a = np.arange(6, dtype=np.int64)
    f(a, e=np.ones(6, np.int64))
    f(a, e=np.ones(6, np.int64))
    with pytest.raises(dynshape.DomainError):
        f(a, e=-np.ones(6, np.int64))


def test_a_leading_op_whose_side_is_copied_is_not_replayed_from_the_copy():
    """A chain led by a conv2d whose side input is ``out`` itself reads a copy of it (the
    driver stores tiles while later tiles still read the side): such a call is never
    replayed, so every call reads the side's current values; the same chain with a side of
    its own is replayed on the next call."""
    f = dynshape.fuse([("conv2d", {"pads": 1}), ("add", "r"), "relu"])
    x, w = f32(1, 3, 9, 8), f32(4, 3, 3, 3)
    conv = _ref_conv(x, w, (1, 1, 1, 1))
    out = f32(1, 4, 9, 8)
    before = REPLAY.replays
    for _ in range(3):
        want = np.maximum(conv + out, 0)
        f(x, w, r=out, out=out)
        np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-5)
    assert REPLAY.replays == before
    side = f32(1, 4, 9, 8)
    other = np.empty_like(side)
    f(x, w, r=side, out=other)
    side += 1
    f(x, w, r=side, out=other)
    assert REPLAY.replays == before + 1
    np.testing.assert_allclose(other, np.maximum(conv + side, 0), rtol=2e-5, atol=2e-5)


_NUMBER_TYPES = [int, float, bool, np.float32, np.float64, np.int64, np.int32]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["float32", "float64", "int32", "int64", "float16"]),
       st.sampled_from(["add", "sub", "mul", "div", "maximum", "minimum"]),
       st.sampled_from(_NUMBER_TYPES), st.booleans(), st.data())
def test_number_operands_are_converted_by_every_replayed_call(dtype, op, kind, first, data):
    """A call with a number operand is replayed (the number's type is in the signature,
    not its value), and every call, with any value, gives NumPy's dtype and values: the
    replay converts each number as the full path does."""
    x = (rng.standard_normal(37) * 50).astype(dtype)
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
           "maximum": np.maximum, "minimum": np.minimum}[op]
    if kind is bool:
        values = data.draw(st.lists(st.booleans(), min_size=3, max_size=6))
    elif kind in (float, np.float32, np.float64):
        values = data.draw(st.lists(st.sampled_from([0.0, -0.0, 1.5, -2.25, 1e30, np.inf,
                                                     -np.inf, np.nan, 3.0]),
                                    min_size=3, max_size=6))
    else:
        values = data.draw(st.lists(st.integers(-100, 100), min_size=3, max_size=6))
    before = REPLAY.replays
    with np.errstate(all="ignore"):
        for v in values:
            v = kind(v)
            args = (v, x) if first else (x, v)
            if op == "div" and dtype.startswith("int") and kind in (int, bool, np.int64,
                                                                      np.int32):
                want = np.true_divide(*(np.asarray(a, np.float64) for a in args))
            else:
                want = ref(*args)
            got = dynshape.run(op, *args)
            assert got.dtype == want.dtype, (args, got.dtype, want.dtype)
            np.testing.assert_array_equal(got, want)
            if op not in ("maximum", "minimum"):    # of two zeros, either is right (IEEE)
                np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    # the first call may be followed by the background swap of its table (a new record); a
    # call that converts the array too (float32 + np.float64 gives float64) is not replayed
    if want.dtype == x.dtype:
        assert REPLAY.replays - before >= len(values) - 2


def test_new_number_values_make_no_new_records():
    """Calls that differ in a number's value share one replay: none of them records anew
    (the memo does not grow), and each is right."""
    x, o = f32(1000), np.empty(1000, np.float32)
    dynshape.run("add", x, 0.5, out=o)
    dynshape.wait_optimized()
    dynshape.run("add", x, 0.5, out=o)
    n, before = len(REPLAY), REPLAY.replays
    for i in range(50):
        v = i * 0.37 - 9
        np.testing.assert_array_equal(dynshape.run("add", x, v, out=o), x + np.float32(v))
    assert len(REPLAY) == n and REPLAY.replays - before == 50


def test_pow_replays_are_keyed_by_the_exponent():
    """pow's spec reads the exponent (2 runs as x * x): its value is in the signature, so
    exponents taking different paths never share a replay."""
    x = np.abs(f32(500)) + 0.5
    for _ in range(3):
        for e in (2.0, 2.5, 3, 2):
            with np.errstate(all="ignore"):
                want = np.power(x, np.float32(e) if isinstance(e, float) else e)
            got = dynshape.run("pow", x, e)
            if e == 2:
                np.testing.assert_array_equal(got, x * x)
            else:
                np.testing.assert_allclose(got, want, rtol=3e-7)
    sig = replay.signature
    assert sig("pow", (x, 2.0), None, {}) != sig("pow", (x, 2.5), None, {})
    assert sig("add", (x, 2.0), None, {}) == sig("add", (x, 2.5), None, {})
    assert sig("add", (x, 2.0), None, {}) != sig("add", (x, 2), None, {})
    assert sig("add", (x, 2.0), None, {}) != sig("add", (x, np.float64(2.0)), None, {})


def test_integer_overflow_of_a_number_raises_on_a_replayed_call_too():
    x = np.arange(10, dtype=np.int32)
    for v in (5, 6, 7):
        np.testing.assert_array_equal(dynshape.run("add", x, v), x + v)
    for _ in range(2):
        with pytest.raises(OverflowError, match="out of bounds for int32"):
            dynshape.run("add", x, 2 ** 40)


def test_float_zero_attributes_are_keyed_by_their_sign():
    """``-0.0 == 0.0`` in a dict: the signature keys a zero attribute by its sign."""
    x, o = f32(4, 5), f32(4, 5)
    sig = replay.signature
    for out in (None, o):
        assert sig("leaky_relu", (x,), out, {"alpha": -0.0}) != \
            sig("leaky_relu", (x,), out, {"alpha": 0.0})
    neg = -np.abs(f32(300)) - 1
    for alpha in (0.0, -0.0, 0.0, -0.0):
        got = dynshape.run("leaky_relu", neg, alpha=alpha)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(neg * np.float32(alpha)))


def test_a_call_with_one_array_twice_is_no_replay_for_two_arrays():
    """``op(x, x)`` and ``op(p, q)`` have one signature. A replay recorded from the first
    must read each operand from its own position in the second: matmul, fused sequences
    and elementwise ops (a mapping taken by identity from ``x, x`` read ``p`` twice)."""
    r = np.random.default_rng(11)
    x = r.standard_normal((20, 20)).astype(np.float32)
    p, q = r.standard_normal((2, 20, 20)).astype(np.float32)
    f = dynshape.fuse([("add", "b"), "relu"])
    for _ in range(3):
        dynshape.run("matmul", x, x)
        dynshape.run("mul", x, x)
        f(x, b=x)
    np.testing.assert_allclose(dynshape.run("matmul", p, q), p.astype(np.float64) @ q,
                               rtol=2e-5, atol=2e-5)
    np.testing.assert_array_equal(dynshape.run("mul", p, q), p * q)
    np.testing.assert_array_equal(f(p, b=q), np.maximum(p + q, 0))
    # and the other way round: recorded from p, q, replayed for x, x
    for _ in range(3):
        dynshape.run("matmul", p, q)
        f(p, b=q)
    np.testing.assert_allclose(dynshape.run("matmul", x, x), x.astype(np.float64) @ x,
                               rtol=2e-5, atol=2e-5)
    np.testing.assert_array_equal(f(x, b=x), np.maximum(x + x, 0))
    # x ** 2 by a number runs as x * x, replayed from x alone
    before = REPLAY.replays
    for _ in range(3):
        np.testing.assert_array_equal(dynshape.run("pow", p, 2.0), p * p)
    assert REPLAY.replays - before >= 2
