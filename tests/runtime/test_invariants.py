"""DESIGN.md invariants checked by counting, never by timing: no compilation on the run
path, no Python per tile, bucketed and bounded cache, in-bounds writes, thread safety."""
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dynshape
from dynshape import testing
from dynshape.runtime import config
from dynshape_kernels import drivers
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.cpu.elementwise import SERIAL_ELEMENTS


@pytest.fixture
def fresh_cache():
    dynshape.clear_cache()
    yield config.cache
    dynshape.clear_cache()


def _warm():
    for op, args in (("relu", (np.ones(3, np.float32),)), ("exp", (np.ones(3),)),
                     ("add", (np.ones(3, np.float32), np.ones(3, np.float32))),
                     ("copy", (np.ones((2, 2), np.float32).T,))):
        dynshape.run(op, *args)


def test_never_seen_shapes_compile_nothing(fresh_cache):
    """Counted across the background optimizations the calls start, until they are done."""
    _warm()
    dynshape.set_policy("background")
    rng = np.random.default_rng(0)
    with testing.count_compilations() as c:
        for shape in [(7,), (1000003,), (517, 1531), (3, 255, 257), (2, 3, 5, 7, 11),
                      (1, 1, 1), (0, 5), ()]:
            x = rng.standard_normal(shape).astype(np.float32)
            dynshape.run("relu", x)
            dynshape.run("add", x, x[..., :1] if x.ndim else x)
            dynshape.run("copy", x.T)
            dynshape.run("exp", x.astype(np.float64)[::-1] if x.ndim else x.astype(np.float64))
        dynshape.wait_optimized()
    assert config.cache.stats()["optimized_swaps"] > 0
    assert c.count == 0, c.functions


def test_unexpected_argument_types_raise_instead_of_compiling():
    d = drivers.get("unary", "float32")
    with pytest.raises(TypeError):
        d(np.ones(3), np.ones(3), np.zeros(40, np.int64), np.zeros((1, 7), np.int64),
          np.zeros(2))


class _PythonWork:
    """Counts Python function calls and executed lines (all frames of this thread) during a
    block: a Python loop over tiles, even one whose body only calls NumPy ufuncs or slices
    (which ``sys.setprofile`` does not report), adds lines per tile."""

    def __init__(self):
        self.calls = self.lines = 0

    def _local(self, frame, event, arg):
        if event == "line":
            self.lines += 1
        return self._local

    def _global(self, frame, event, arg):
        self.calls += 1
        return self._local

    def __enter__(self):
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc):
        sys.settrace(None)


def test_python_work_per_call_does_not_grow_with_tiles(fresh_cache, driver_calls):
    """A 10-tile and a 2,500-tile call (square tiles of a transposed copy) enter the compiled
    driver once each and run the same Python lines."""
    from dynshape_kernels.abi.tiles import square_tile
    t0, t1 = square_tile()
    dynshape.set_policy("simplified")
    small = np.ones((5 * t1, 2 * t0), np.float32).T       # 2 x 5 tiles
    big = np.ones((100 * t1, 25 * t0), np.float32).T      # 25 x 100 tiles
    assert len(dynshape.explain("copy", small)) == 10
    assert len(dynshape.explain("copy", big)) >= 2_500    # bucket-wide: a few empty tiles
    work = []
    for x in (small, big):
        out = np.empty(x.shape, x.dtype)
        dynshape.run("copy", x, out=out)                # tables cached, drivers loaded
        del driver_calls[:]
        with _PythonWork() as w:
            dynshape.run("copy", x, out=out)
        assert driver_calls == [("unary", "float32")]     # 4-byte items: the float driver
        work.append((w.calls, w.lines))
        np.testing.assert_array_equal(out, 1)
    assert work[0] == work[1]


def test_two_shapes_in_one_bucket_share_one_table(fresh_cache):
    a = dynshape.explain("relu", (1000, 70001))
    b = dynshape.explain("relu", (1000, 70010))
    assert a is b
    assert config.cache.stats()["tables"] == 1
    x = np.random.default_rng(1).standard_normal((3, 70010)).astype(np.float32)
    np.testing.assert_array_equal(dynshape.run("relu", x), np.maximum(x, 0))


def _bucket_edges(q, w, limit):
    """Upper edges of the documented buckets of sizes 1..limit, written out independently of
    ``dynshape.tables.bucket``: width q up to 16q, then the width doubles every octave (16q..32q:
    2q, 32q..64q: 4q, ...); a bucket wider than w is split below its top w sizes."""
    edges = list(range(q, 16 * q + 1, q))
    width, top = 2 * q, 32 * q
    while edges[-1] < limit:
        edges += list(range(edges[-1] + width, top + 1, width))
        width, top = 2 * width, 2 * top
    if w:
        widths = np.diff([0] + edges)
        edges = sorted(edges + [e - w for e, d in zip(edges, widths) if d > w])
    return np.array(edges)


def test_bucket_edges_oracle_matches_hand_computed_buckets():
    e = _bucket_edges(32, 8, 4000).tolist()
    assert e[:4] == [24, 32, 56, 64]                        # (0, 32] splits at 24
    assert 512 in e and 544 not in e                        # width 64 from 512
    assert {568, 576, 632, 640} <= set(e)                   # (512, 576] splits at 568
    assert {1144, 1152} <= set(e) and 1088 not in e         # width 128 from 1024


def test_ten_thousand_shapes_are_bounded_by_bucket_count(fresh_cache):
    dynshape.set_policy("simplified")
    rng = np.random.default_rng(2)
    fam = CATALOG.families["unary"]
    q = fam.quanta[1]
    w = min(t[2] for t in fam.tiles if t[1] > t[2])     # the narrowest partial window
    sizes = []
    for _ in range(10_000):
        # sides below 600 keep every table small (at most 2e8 elements: ~13k entries), so
        # the test holds a few hundred tables in tens of MB
        shape = tuple(int(s) for s in rng.integers(1, 600, size=rng.integers(1, 4)))
        dynshape.explain("relu", shape)
        sizes.append(int(np.prod(shape)))
    sizes = np.array(sizes)
    edges = _bucket_edges(q, w, sizes.max())
    # contiguous: one long row per size; size 1 is a rank-0 layout of its own
    expected = len(set(zip(sizes == 1, np.searchsorted(edges, sizes))))
    assert len(set(sizes.tolist())) > 5 * expected
    assert config.cache.stats()["tables"] == expected


def test_cache_limit_evicts_least_recently_used(fresh_cache):
    dynshape.set_cache_limit(4)
    try:
        sizes = (10, 600, 1300, 2600, 5200, 11000)
        for n in sizes[:4]:
            dynshape.explain("relu", (n,))
        dynshape.explain("relu", (sizes[0],))          # the oldest is now the most recent
        for n in sizes[4:]:
            dynshape.explain("relu", (n,))
        s = dynshape.cache_stats()
        assert s["tables"] == 4 and s["evictions"] == 2
        # 600 and 1300 were least recently used; 10 survived because it was used again
        misses = s["misses"]
        for n in (10, 2600, 5200, 11000):
            dynshape.explain("relu", (n,))
        assert dynshape.cache_stats()["misses"] == misses
        dynshape.explain("relu", (600,))
        assert dynshape.cache_stats()["misses"] == misses + 1
    finally:
        dynshape.set_cache_limit(1024)


def test_hits_and_misses_are_counted(fresh_cache):
    x = np.ones(100, np.float32)
    dynshape.run("relu", x)
    dynshape.run("relu", x[:99])
    s = dynshape.cache_stats()
    assert s["misses"] == 1 and s["hits"] == 1


@pytest.mark.parametrize("family", ["plane", "reduce", "rowwise", "pool", "conv", "fused"])
def test_clear_cache_clears_the_layout_memo_and_a_call_counts_one_miss(family):
    """After a call on a layout, ``clear_cache()`` and the same call again: one miss, no hit
    (the exact-layout memo in front of the cache must not outlive it, nor count a miss of its
    own)."""
    x = np.ones((2, 3, 6, 7), np.float32)
    f = dynshape.fuse(["relu", ("mul", 2.0)])
    call = {"plane": lambda: dynshape.run("relu", x),
            "reduce": lambda: dynshape.run("sum", x, axis=1),
            "rowwise": lambda: dynshape.run("softmax", x),
            "pool": lambda: dynshape.run("max_pool2d", x, kernel_shape=(2, 2)),
            "conv": lambda: dynshape.run("conv2d", x, np.ones((4, 3, 3, 3), np.float32)),
            "fused": lambda: f(x)}[family]
    call()
    call()
    dynshape.clear_cache()
    call()
    s = dynshape.cache_stats()
    assert (s["misses"], s["hits"], s["tables"]) == (1, 0, 1)
    call()
    s = dynshape.cache_stats()
    assert (s["misses"], s["hits"]) == (1, 1)
    dynshape.clear_cache()


def test_clear_cache_empties_every_memo():
    """No exact-layout memo (the executors' and each fused sequence's, which holds its
    tables) outlives ``clear_cache()``."""
    from dynshape.runtime.executor import MEMO
    x = np.ones((3, 40), np.float32)
    f = dynshape.fuse(["relu", ("mul", 2.0)])
    f(x)
    n = len(MEMO)
    dynshape.run("relu", x)
    assert len(MEMO) == n + 1 >= 2
    dynshape.clear_cache()
    assert len(MEMO) == 0


def test_background_optimization_swaps_in_atomically(fresh_cache, monkeypatch):
    """The optimized table is swapped in while four threads are running the op: the build is
    held until every thread has run on the simplified table, then released. Each thread sees
    simplified tables, then optimized ones, never a mix or a step back, and right results."""
    from dynshape.runtime.plane import PLANE
    dynshape.set_policy("background")
    x = np.random.default_rng(3).standard_normal(5000).astype(np.float32)
    want = np.maximum(x, 0)
    release = threading.Event()
    real_build = PLANE.build

    def gated_build(launch, p, key, variant):
        if variant == "optimized":
            assert release.wait(60)
        return real_build(launch, p, key, variant)
    monkeypatch.setattr(PLANE, "build", gated_build)
    first = dynshape.explain("relu", x)
    assert first.variant == "simplified"
    started = threading.Barrier(5)
    seen = [[] for _ in range(4)]
    errors = []

    def worker(k):
        try:
            for i in range(10_000):
                r = dynshape.run("relu", x)
                v = dynshape.last_table().variant
                seen[k].append(v)
                if not np.array_equal(r, want):
                    errors.append((k, i, v))
                if i == 5:
                    started.wait(60)
                if len(seen[k]) > 30 and seen[k][-30] == "optimized":
                    return
        except Exception as exc:   # noqa: BLE001 - surfaced below
            errors.append(exc)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    started.wait(60)          # every thread has run six times on the simplified table
    release.set()
    for t in threads:
        t.join(120)
    dynshape.wait_optimized()
    assert not errors
    assert dynshape.explain("relu", x).variant == "optimized"
    assert dynshape.cache_stats()["optimized_swaps"] == 1
    for v in seen:
        n_simple = v.count("simplified")
        assert n_simple >= 6 and v[:n_simple] == ["simplified"] * n_simple
        assert v[n_simple:] == ["optimized"] * (len(v) - n_simple) and len(v) > n_simple


def test_driver_never_writes_outside_the_output_even_with_a_bad_table():
    """Offsets beyond the plane or negative ones resolve to empty tiles in the driver."""
    from dynshape_kernels.abi.common_area import E_NCOL
    from dynshape.runtime.layout import plane
    from dynshape.tables.param_table import ParamTable
    guard = np.full(300, -7.0, np.float32)
    out = guard[100:200]
    x = np.ones(100, np.float32)
    kid = CATALOG.kernel_id("unary", "relu", "float32", 0)
    e = np.array([[kid, 2, 2, 0, 0, 0, 0], [kid, 2, 2, 0, 0, 10**9, 0],
                  [kid, 2, 2, 5, 0, 0, 0], [kid, 2, 2, 0, 1, 10**6, 1]], np.int64)
    assert e.shape[1] == E_NCOL
    t = ParamTable("unary", "relu", "float32", "cpu", CATALOG.hash, ((0, 1), (0, 512)), e,
                   np.zeros(0), 2, CATALOG.family_base("unary", "float32"), 0, "simplified", 0)
    p = plane((100,), [(1,), (1,)])
    common = t.bind(p, [0, 0])
    drivers.get("unary", "float32")(x, out, common, t.entries, np.zeros(2, np.float32))
    assert (guard[:100] == -7).all() and (guard[200:] == -7).all()
    assert (out == 1).all()


def test_threads_share_the_cache_safely(fresh_cache):
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(int(n)).astype(np.float32) for n in rng.integers(1, 5000, 40)]
    errors = []

    def worker(k):
        try:
            for x in arrays[k::4]:
                np.testing.assert_array_equal(dynshape.run("neg", x), -x)
        except Exception as exc:   # noqa: BLE001 - surfaced below
            errors.append(exc)
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def _add_one_in_place(view):
    root = view
    while isinstance(root.base, np.ndarray):
        root = root.base
    root[...] = -7
    view[...] = 0
    dynshape.run("add", view, view.dtype.type(1), out=view)
    assert (view == 1).all()
    assert np.isin(root, (1, -7)).all() and (root == 1).sum() == view.size


@given(testing.shapes(max_rank=6, max_side=9), st.data())
def test_every_element_written_exactly_once_end_to_end(shape, data):
    """In-place ``out += 1`` through a real table: an element covered twice would read 2,
    one never covered 0; a write outside ``out`` would change the guard around it."""
    dtype = data.draw(st.sampled_from([np.float32, np.int64]))
    _add_one_in_place(data.draw(testing.views(shape, dtype)))


@st.composite
def _large_shapes(draw):
    """Shapes of 2**15 to 2**16 elements: above the driver's serial threshold, so the
    entries run in the parallel (prange) loop."""
    rank = draw(st.integers(1, 4))
    lead = [draw(st.integers(1, 9)) for _ in range(rank - 1)]
    size = draw(st.integers(SERIAL_ELEMENTS + 1, 2 * SERIAL_ELEMENTS))
    return (*lead, -(-size // max(1, int(np.prod(lead)))))


@given(_large_shapes(), st.data())
@settings(max_examples=25)
def test_every_element_written_exactly_once_on_the_parallel_path(shape, data):
    assert np.prod(shape) > SERIAL_ELEMENTS
    dtype = data.draw(st.sampled_from([np.float32, np.int64]))
    _add_one_in_place(data.draw(testing.views(shape, dtype)))


# ---- every family: out= inside a guarded buffer, one compiled driver call ------------------
def _guarded(shape, dtype):
    """(root, out, inside): ``out`` is a strided view (every other element, first axis
    reversed) of a NaN-filled root buffer; ``inside`` marks the root elements of ``out``."""
    root = np.full(tuple(2 * n + 3 for n in shape), np.nan, dtype)
    sl = tuple(slice(1, 2 * n + 1, 2) for n in shape)
    out = root[sl][::-1]
    inside = np.zeros(root.shape, bool)
    inside[sl] = True
    return root, out, inside


def _family_cases():
    rng = np.random.default_rng(11)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    x4, w4 = r(2, 3, 10, 12), r(4, 3, 3, 3)
    a, b = r(9, 40), r(40, 33)
    big = r(5, 9000)               # above the serial threshold
    sw = np.lib.stride_tricks.sliding_window_view(x4, (3, 3), axis=(2, 3))
    f = dynshape.fuse(["relu", ("mul", 2.0), "tanh"])
    xd = x4.astype(np.float64)
    e = np.exp(xd - xd.max(-1, keepdims=True))
    return {
        "add": (lambda out: dynshape.run("add", big, big[0], out=out), big + big[0]),
        "relu": (lambda out: dynshape.run("relu", big, out=out), np.maximum(big, 0)),
        "reduce": (lambda out: dynshape.run("sum", x4, axis=(1, 3), out=out),
                   xd.sum(axis=(1, 3))),
        "rowwise": (lambda out: dynshape.run("softmax", x4, out=out),
                    e / e.sum(-1, keepdims=True)),
        "pool": (lambda out: dynshape.run("max_pool2d", x4, kernel_shape=(2, 2), strides=(2, 2),
                                           out=out),
                 x4.reshape(2, 3, 5, 2, 6, 2).max(axis=(3, 5))),
        "fused": (lambda out: f(big, out=out), np.tanh(np.maximum(big, 0) * 2.0)),
        "conv": (lambda out: dynshape.run("conv2d", x4, w4, out=out),
                 np.einsum("ncijkl,ockl->noij", sw.astype(np.float64), w4.astype(np.float64))),
        "matmul": (lambda out: dynshape.run("matmul", a, b, out=out),
                   a.astype(np.float64) @ b.astype(np.float64)),
    }


_CASES = None


def _case(name):
    global _CASES
    if _CASES is None:
        _CASES = _family_cases()
    return _CASES[name]


FAMILIES = ["add", "relu", "reduce", "rowwise", "pool", "fused", "conv", "matmul"]


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_writes_nothing_outside_a_strided_out(name, driver_calls):
    """Each family's ``out=`` is a reversed, every-other-element view inside a NaN-filled
    buffer: after the call the guards are still NaN, and the driver ran once."""
    run, want = _case(name)
    root, out, inside = _guarded(want.shape, np.float32)
    r = run(out)
    assert r is out
    assert np.isnan(root[~inside]).all(), "a write landed outside out="
    np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-5)
    assert len(driver_calls) == 1
    del driver_calls[:]
    run(out)                   # again through the exact-layout memo
    assert len(driver_calls) == 1 and np.isnan(root[~inside]).all()


def test_fresh_process_after_warm_compiles_nothing(tmp_path):
    """In a new process: warm() loads every driver (compiling only what the Numba cache lacks);
    afterwards calls on never-seen shapes of every family compile nothing."""
    import os
    import subprocess
    import textwrap
    code = textwrap.dedent("""
        import numpy as np, dynshape
        from dynshape import testing
        dynshape.warm(["unary", "binary", "copy", "reduce", "rowwise"], ["float32"])
        rng = np.random.default_rng(7)
        with testing.count_compilations() as c:
            for shape in [(5,), (1000, 3), (2, 3, 77), (33, 1, 65)]:
                x = rng.standard_normal(shape).astype(np.float32)
                dynshape.run("gelu", x)
                dynshape.run("mul", x, x[..., :1])
                dynshape.run("copy", x.T)
                dynshape.run("sum", x, axis=0)
                dynshape.run("softmax", x)
            dynshape.wait_optimized()
        print("COMPILES", c.count, c.functions)
    """)
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=1200)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "COMPILES 0 []" in r.stdout, r.stdout
