"""DESIGN.md invariants checked by counting, never by timing: no compilation on the run
path, no Python per tile, bucketed and bounded cache, in-bounds writes, thread safety."""
import sys
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dynshape
from dynshape import config, testing
from dynshape_kernels import drivers


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
    _warm()
    rng = np.random.default_rng(0)
    with testing.count_compilations() as c:
        for shape in [(7,), (1000003,), (517, 1531), (3, 255, 257), (2, 3, 5, 7, 11),
                      (1, 1, 1), (0, 5), ()]:
            x = rng.standard_normal(shape).astype(np.float32)
            dynshape.run("relu", x)
            dynshape.run("add", x, x[..., :1] if x.ndim else x)
            dynshape.run("copy", x.T)
            dynshape.run("exp", x.astype(np.float64)[::-1] if x.ndim else x.astype(np.float64))
    assert c.count == 0, c.functions


def test_unexpected_argument_types_raise_instead_of_compiling():
    d = drivers.get("unary", "float32")
    with pytest.raises(TypeError):
        d(np.ones(3), np.ones(3), np.zeros(40, np.int64), np.zeros((1, 7), np.int64),
          np.zeros(2))


class _CallCounter:
    """Counts Python-level function calls (all frames) during a block."""

    def __init__(self):
        self.calls = 0

    def __enter__(self):
        def prof(frame, event, arg):
            if event in ("call", "c_call"):
                self.calls += 1
        sys.setprofile(prof)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)


def test_python_work_per_call_does_not_grow_with_tiles(fresh_cache):
    """A 10-tile and a 10,000-tile call (16x64 tiles of a transposed copy) make one driver
    call each and the same number of Python function calls."""
    dynshape.set_policy("simplified")
    small = np.ones((320, 32), np.float32).T          # 2 x 5 tiles
    big = np.ones((6400, 1600), np.float32).T         # 100 x 100 tiles
    assert len(dynshape.explain("copy", small)) == 10
    assert len(dynshape.explain("copy", big)) >= 10_000   # bucket-wide: a few empty tiles
    calls = []
    for x in (small, big):
        out = np.empty(x.shape, x.dtype)
        dynshape.run("copy", x, out=out)                # tables cached, drivers loaded
        before = config.counters["driver_calls"]
        with _CallCounter() as cc:
            dynshape.run("copy", x, out=out)
        assert config.counters["driver_calls"] - before == 1
        calls.append(cc.calls)
        np.testing.assert_array_equal(out, 1)
    assert calls[0] == calls[1]


def test_two_shapes_in_one_bucket_share_one_table(fresh_cache):
    a = dynshape.explain("relu", (1000, 70001))
    b = dynshape.explain("relu", (1000, 70010))
    assert a is b
    assert config.cache.stats()["tables"] == 1
    x = np.random.default_rng(1).standard_normal((3, 70010)).astype(np.float32)
    np.testing.assert_array_equal(dynshape.run("relu", x), np.maximum(x, 0))


def test_ten_thousand_shapes_are_bounded_by_bucket_count(fresh_cache):
    dynshape.set_policy("simplified")
    rng = np.random.default_rng(2)
    keys = set()
    from dynshape import ops
    from dynshape.executor import _plane_of, table_key
    for _ in range(10_000):
        shape = tuple(int(s) for s in rng.integers(1, 3000, size=rng.integers(1, 4)))
        dynshape.explain("relu", shape)
        with ops.planning():
            launch = ops.get("relu").prepare([ops.placeholder(shape, "float32")], None, {})
        keys.add(table_key(launch, _plane_of(launch)))
    n_tables = config.cache.stats()["tables"]
    assert n_tables == len(keys)
    assert n_tables < 2000 < 10_000


def test_cache_limit_evicts_lru(fresh_cache):
    dynshape.set_cache_limit(4)
    try:
        for n in (10, 600, 1300, 2600, 5200, 11000):
            dynshape.explain("relu", (n,))
        s = dynshape.cache_stats()
        assert s["tables"] == 4 and s["evictions"] == 2
    finally:
        dynshape.set_cache_limit(1024)


def test_hits_and_misses_are_counted(fresh_cache):
    x = np.ones(100, np.float32)
    dynshape.run("relu", x)
    dynshape.run("relu", x[:99])
    s = dynshape.cache_stats()
    assert s["misses"] == 1 and s["hits"] == 1


def test_background_optimization_swaps_in_atomically(fresh_cache):
    dynshape.set_policy("background")
    x = np.random.default_rng(3).standard_normal(5000).astype(np.float32)
    first = dynshape.explain("relu", x)
    assert first.variant == "simplified"
    results = []

    def worker():
        for _ in range(50):
            results.append(dynshape.run("relu", x))
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dynshape.wait_optimized()
    assert dynshape.explain("relu", x).variant == "optimized"
    assert dynshape.cache_stats()["optimized_swaps"] >= 1
    want = np.maximum(x, 0)
    assert all(np.array_equal(r, want) for r in results)


def test_driver_never_writes_outside_the_output_even_with_a_bad_table():
    """Offsets beyond the plane or negative ones resolve to empty tiles in the driver."""
    from dynshape_kernels.abi.common_area import E_NCOL
    from dynshape_kernels.catalog import CATALOG
    from dynshape.layout import plane
    from dynshape.param_table import ParamTable
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


@given(testing.shapes(max_rank=6, max_side=9), st.data())
def test_every_element_written_exactly_once_end_to_end(shape, data):
    """In-place ``out += 1`` through a real table: an element covered twice would read 2,
    one never covered 0; a write outside ``out`` would change the guard around it."""
    dtype = data.draw(st.sampled_from([np.float32, np.int64]))
    view = data.draw(testing.views(shape, dtype))
    root = view
    while isinstance(root.base, np.ndarray):
        root = root.base
    root[...] = -7
    view[...] = 0
    dynshape.run("add", view, dtype(1), out=view)
    assert (view == 1).all()
    assert np.isin(root, (1, -7)).all() and (root == 1).sum() == view.size


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
