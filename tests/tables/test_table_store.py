"""Persisted tables (seed 004, Fig. 4), warm-up, and the background swap (Fig. 16).

Tables saved by one process are loaded by the next (counted, never timed); files that must
not be used are ignored with a warning and rebuilt; writes are atomic, also with several
processes sharing one directory; the background swap is atomic under concurrent calls."""
import glob
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import dynshape
from dynshape.runtime import config
from dynshape.planning.plane import Tiling
from dynshape.errors import ArgumentError
from dynshape.tables.param_table import ParamTable
from dynshape.tables.store import (TableStore, TableStoreWarning, UnstableKeyError, canonical,
                                  stable_key)
from dynshape_kernels.catalog import CATALOG

# calls of four families: elementwise (1-row and 2-D planes), reduce, rowwise
CALLS = [("relu", [(517, 1531)], {}),
         ("add", [(300, 257), (257,)], {}),
         ("sum", [(517, 1531)], {"axis": 1}),
         ("softmax", [(64, 1000)], {"axis": -1})]

RUN_CALLS = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import dynshape
    warnings.simplefilter("error", dynshape.TableStoreWarning)
    CALLS = json.loads(sys.argv[1])
    REF = {"relu": lambda x: np.maximum(x, 0), "add": lambda x, y: x + y,
           "sum": lambda x, axis: x.sum(axis=axis),
           "softmax": lambda x, axis: np.exp(x - x.max(axis, keepdims=True))
                      / np.exp(x - x.max(axis, keepdims=True)).sum(axis, keepdims=True)}

    def run_all(seed):
        rng = np.random.default_rng(seed)
        ok, variants = True, []
        for op, shapes, attrs in CALLS:
            args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
            got = dynshape.run(op, *args, **attrs)
            want = REF[op](*args, **attrs)
            ok &= bool(np.allclose(got, want, rtol=1e-4, atol=1e-4))
            variants.append(dynshape.last_table().variant)
        return ok, variants
""")


def _subprocess(script, table_dir, *args, **popen):
    env = dict(os.environ, DYNSHAPE_TABLE_DIR=str(table_dir))
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def _finish(proc, timeout=300):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1]), err


@pytest.fixture
def store_dir(tmp_path):
    """An empty table directory in use, an empty cache; both restored afterwards."""
    before = config.cache.store
    dynshape.clear_cache()
    dynshape.set_table_dir(tmp_path / "tables")
    yield tmp_path / "tables"
    dynshape.wait_optimized()
    config.cache.store = before
    dynshape.clear_cache()


def _warm_all():
    return [dynshape.warmup(op, *shapes, **attrs) for op, shapes, attrs in CALLS]


def _files(root):
    return sorted(glob.glob(os.path.join(str(root), CATALOG.hash, "*.npz")))


# ---- stable keys ------------------------------------------------------------------------
def test_stable_key_is_canonical_and_tells_types_apart():
    key = ("relu", (), "float32", "cpu", (2, ((True, False, False, True),)), (0, 16), (0, 512),
           True)
    assert stable_key(key) == stable_key(tuple(key))
    assert len(stable_key(key)) == 64 and int(stable_key(key), 16) >= 0
    variants = [1, 1.0, True, "1", np.int64(1) + 1, (1,), None]
    assert len({canonical(v) for v in variants}) == len(variants)
    assert canonical(np.int64(7)) == canonical(7) and canonical(np.float32(0.5)) == canonical(0.5)
    assert canonical(frozenset({"a", "b", "c"})) == canonical(frozenset({"c", "b", "a"}))
    assert canonical({"b": 1, "a": 2}) == canonical({"a": 2, "b": 1})
    assert stable_key(("relu", 1)) != stable_key(("relu", 2))
    with pytest.raises(UnstableKeyError, match="object"):
        canonical(("relu", object()))


def test_a_key_without_stable_text_is_not_persisted(tmp_path):
    store = TableStore(tmp_path)
    with pytest.warns(TableStoreWarning, match="not persisted"):
        assert store.path_for(("op", object())) is None


def test_set_table_dir_checks_its_argument(tmp_path):
    before = config.cache.store
    try:
        with pytest.raises(ArgumentError, match="PathLike"):
            dynshape.set_table_dir(3)
        (tmp_path / "file").write_text("x")
        with pytest.raises(ArgumentError, match="not a directory"):
            dynshape.set_table_dir(tmp_path / "file")
        dynshape.set_table_dir(tmp_path / "new")
        assert dynshape.table_dir() == str(tmp_path / "new")
        assert not (tmp_path / "new").exists()           # created by the first save
        dynshape.set_table_dir(None)
        assert dynshape.table_dir() is None
    finally:
        config.cache.store = before


# ---- warm-up and loading ------------------------------------------------------------------
def test_warmup_saves_optimized_tables_and_warmup_again_loads_them(store_dir):
    tables = _warm_all()
    s = dynshape.cache_stats()
    assert all(t.variant == "optimized" for t in tables)
    assert (s["tables_built"], s["tables_saved"], s["tables_loaded"]) == (4, 4, 0)
    assert len(_files(store_dir)) == 4
    assert not glob.glob(os.path.join(str(store_dir), "*", "*.tmp"))
    # a hit warms nothing again; an empty cache loads from disk
    _warm_all()
    assert dynshape.cache_stats()["tables_built"] == 4
    dynshape.clear_cache()
    again = _warm_all()
    s = dynshape.cache_stats()
    assert (s["tables_built"], s["tables_saved"], s["tables_loaded"]) == (0, 0, 4)
    for a, b in zip(tables, again):
        assert np.array_equal(a.entries, b.entries) and a.bucket == b.bucket


def test_warmup_replaces_a_cached_simplified_table_and_saves_an_unsaved_one(tmp_path):
    before = config.cache.store
    dynshape.clear_cache()
    try:
        dynshape.set_table_dir(None)
        dynshape.set_policy("simplified")
        assert dynshape.explain("sum", (517, 1531), axis=1).variant == "simplified"
        dynshape.set_table_dir(tmp_path)
        t = dynshape.warmup("sum", (517, 1531), axis=1)
        assert t.variant == "optimized" and dynshape.explain("sum", (517, 1531),
                                                             axis=1) is t
        assert dynshape.cache_stats()["tables_saved"] == 1
        dynshape.set_policy("optimized")
        dynshape.explain("relu", (300, 7))            # built before persisting was on...
        dynshape.warmup("relu", (300, 7))             # ...is saved by warmup
        assert len(_files(tmp_path)) == 2
    finally:
        config.cache.store = before
        dynshape.clear_cache()


def test_warmup_without_a_table_dir_builds_in_memory_only():
    before = config.cache.store
    dynshape.clear_cache()
    try:
        dynshape.set_table_dir(None)
        assert dynshape.warmup("relu", (5000,)).variant == "optimized"
        s = dynshape.cache_stats()
        assert (s["tables_built"], s["tables_saved"]) == (1, 0)
        assert dynshape.warmup("relu", (0, 3)) is None
    finally:
        config.cache.store = before
        dynshape.clear_cache()


def test_a_later_process_loads_instead_of_building(tmp_path):
    """Fig. 4, fixed shape: one process warms up and saves; the next one (default policy
    "background") loads every table, builds none, and computes the right results."""
    script = RUN_CALLS + textwrap.dedent("""
        mode = sys.argv[2]
        if mode == "warmup":
            for op, shapes, attrs in CALLS:
                dynshape.warmup(op, *shapes, **attrs)
        ok, variants = run_all(0)
        dynshape.wait_optimized()
        print(json.dumps({"ok": ok, "variants": variants, "stats": dynshape.cache_stats()}))
    """)
    calls = json.dumps(CALLS)
    first, _ = _finish(_subprocess(script, tmp_path, calls, "warmup"))
    assert first["ok"] and first["variants"] == ["optimized"] * 4
    assert first["stats"]["tables_built"] == 4 and first["stats"]["tables_saved"] == 4
    assert first["stats"]["tables_loaded"] == 0
    second, _ = _finish(_subprocess(script, tmp_path, calls, "run"))
    assert second["ok"] and second["variants"] == ["optimized"] * 4
    s = second["stats"]
    assert (s["tables_loaded"], s["tables_built"], s["tables_saved"]) == (4, 0, 0)
    assert s["optimized_swaps"] == 0 and s["tables_rejected"] == 0
    assert len(_files(tmp_path)) == 4


def test_simplified_policy_neither_reads_nor_writes_the_disk(store_dir):
    _warm_all()
    dynshape.clear_cache()
    dynshape.set_policy("simplified")
    x = np.random.default_rng(1).standard_normal((517, 1531)).astype(np.float32)
    assert np.array_equal(dynshape.run("relu", x), np.maximum(x, 0))
    assert dynshape.last_table().variant == "simplified"
    s = dynshape.cache_stats()
    assert (s["tables_loaded"], s["tables_built"], s["tables_saved"]) == (0, 1, 0)


# ---- files that must not be used ------------------------------------------------------------
def _garbage(path, other):
    with open(path, "wb") as f:
        f.write(b"not a table at all" * 10)


def _truncated(path, other):
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])


def _flipped_entry(path, other):
    with np.load(path) as z:
        parts = {k: z[k].copy() for k in z.files}
    parts["entries"][0, 3] += 1
    with open(path, "wb") as f:
        np.savez(f, **parts)


def _foreign_catalog(path, other):
    t = ParamTable.load(path)
    ParamTable(t.family, t.op, t.dtype, t.target, "0" * 16, t.bucket, t.entries, t.common,
               t.n_operands, t.id_base, t.op_base, t.variant, t.cost, t.description,
               t.shape).save(path)


def _other_table(path, other):
    os.replace(other, path)


@pytest.mark.parametrize("damage", [_garbage, _truncated, _flipped_entry, _foreign_catalog,
                                    _other_table])
def test_a_bad_file_is_ignored_with_a_warning_and_rebuilt(store_dir, damage):
    sum_table = dynshape.warmup("sum", (517, 1531), axis=1)
    sum_key = config.cache.keys()[0]
    dynshape.warmup("relu", (517, 1531))
    relu_key = next(k for k in config.cache.keys() if k != sum_key)
    path = config.cache.store.path_for(sum_key)
    damage(path, config.cache.store.path_for(relu_key))
    dynshape.clear_cache()
    with pytest.warns(TableStoreWarning, match="ignored a saved parameter table"):
        t = dynshape.warmup("sum", (517, 1531), axis=1)
    assert t.variant == "optimized" and t.op == "sum"
    assert np.array_equal(t.entries, sum_table.entries)
    s = dynshape.cache_stats()
    assert (s["tables_rejected"], s["tables_built"], s["tables_saved"]) == (1, 1, 1)
    # the file was written again and is good now
    assert np.array_equal(ParamTable.load(path).entries, sum_table.entries)


def test_a_bad_file_under_the_background_policy_still_runs_right(store_dir):
    dynshape.warmup("sum", (517, 1531), axis=1)
    path = _files(store_dir)[0]
    _garbage(path, None)
    dynshape.clear_cache()
    dynshape.set_policy("background")
    x = np.random.default_rng(2).standard_normal((517, 1531)).astype(np.float32)
    with pytest.warns(TableStoreWarning):
        got = dynshape.run("sum", x, axis=1)
    assert np.allclose(got, x.sum(axis=1), rtol=1e-4, atol=1e-3)
    dynshape.wait_optimized()
    assert ParamTable.load(path).variant == "optimized"


def test_an_unwritable_directory_warns_and_keeps_running(tmp_path):
    before = config.cache.store
    dynshape.clear_cache()
    (tmp_path / CATALOG.hash).write_text("a file where the catalog's directory should be")
    try:
        dynshape.set_table_dir(tmp_path)
        with pytest.warns(TableStoreWarning, match="could not save"):
            t = dynshape.warmup("relu", (517, 1531))
        assert t.variant == "optimized" and dynshape.cache_stats()["save_errors"] == 1
    finally:
        config.cache.store = before
        dynshape.clear_cache()


# ---- the background swap ------------------------------------------------------------------
def test_background_swap_under_concurrent_calls(store_dir, monkeypatch):
    """Threads keep calling while the optimized tables are swapped in: every result is right
    and identical before and after the swap, each thread sees simplified tables and then only
    optimized ones, the counters add up, and each optimized table is saved once."""
    gate = threading.Event()
    optimized = Tiling.optimized

    def gated(self):
        assert gate.wait(60), "the test never opened the gate"
        return optimized(self)
    monkeypatch.setattr(Tiling, "optimized", gated)
    dynshape.set_policy("background")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((413, 1531)).astype(np.float32)
    row = rng.standard_normal(1531).astype(np.float32)
    calls = {"relu": ((x,), {}), "add": ((x, row), {}), "sum": ((x,), {"axis": 1})}
    want = {"relu": np.maximum(x, 0), "add": x + row}
    n_threads, started = 4, threading.Semaphore(0)
    records = [[] for _ in range(n_threads)]
    errors = []

    def worker(k):
        try:
            for i in range(3000):
                seen = set()
                for op, (args, attrs) in calls.items():
                    r = dynshape.run(op, *args, **attrs)
                    v = dynshape.last_table().variant
                    records[k].append((op, v, r))
                    seen.add(v)
                if i == 5:
                    started.release()
                if seen == {"optimized"} and i > 5:
                    return
        except BaseException as exc:        # reported by the main thread
            errors.append(exc)
            started.release()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for _ in threads:
        started.acquire()
    gate.set()                             # the optimized builds may finish now
    for t in threads:
        t.join()
    dynshape.wait_optimized()
    assert not errors, errors
    n_calls = sum(len(r) for r in records)
    want["sum"] = records[0][2][2]
    assert np.allclose(want["sum"], x.sum(axis=1), rtol=1e-4, atol=1e-3)
    for rec in records:
        for op in calls:
            seq = [(v, r) for o, v, r in rec if o == op]
            assert all(np.array_equal(r, want[op]) for _, r in seq), op
            variants = [v for v, _ in seq]
            first_opt = variants.index("optimized")
            assert first_opt > 0 and set(variants[first_opt:]) == {"optimized"}, op
    s = dynshape.cache_stats()
    assert s["hits"] + s["misses"] == n_calls
    assert s["optimized_swaps"] == 3 and s["tables"] == 3 and s["pending"] == 0
    assert s["tables_built"] == s["misses"] + 3   # a simplified per miss, an optimized per key
    assert s["tables_saved"] == 3 and len(_files(store_dir)) == 3
    for k in config.cache.keys():
        assert np.array_equal(config.cache.store.load(k).entries, config.cache.get(k).entries)


class _Table:
    def __init__(self, variant):
        self.variant = variant


def test_a_late_miss_never_replaces_the_swapped_in_optimized_table():
    """A thread that missed before the swap and stores its simplified table after it gets
    the optimized table instead, and schedules no second optimization."""
    from dynshape.tables.cache import TableCache
    cache = TableCache()
    optimized = _Table("optimized")

    def build(variant):
        if variant == "simplified":
            cache.put("k", optimized)       # the swap lands while this thread builds
            return _Table("simplified")
        raise AssertionError("no second optimization may be scheduled")
    assert cache.get_or_build("k", build, policy="background") is optimized
    assert cache.get("k") is optimized and cache.last_table() is optimized
    cache.wait()
    s = cache.stats()
    assert (s["misses"], s["tables_built"], s["optimized_swaps"], s["pending"]) == (1, 1, 0, 0)


def test_one_background_optimization_per_key():
    from dynshape.tables.cache import TableCache
    cache = TableCache()
    gate = threading.Event()
    calls = []

    def build(variant):
        calls.append(variant)
        if variant == "optimized":
            gate.wait(30)
        return _Table(variant)
    for _ in range(5):
        cache.put("k", _Table("simplified"))        # as if five threads missed at once
        cache.get_or_build("other", build, policy="background")
        cache.optimize_later("k", lambda: build("optimized"))
    gate.set()
    cache.wait()
    assert calls.count("optimized") == 2 and cache.stats()["optimized_swaps"] == 2
    assert cache.get("k").variant == cache.get("other").variant == "optimized"


def test_wait_optimized_then_the_optimized_table_is_used_and_saved(store_dir):
    dynshape.set_policy("background")
    x = np.random.default_rng(5).standard_normal((517, 1531)).astype(np.float32)
    first = dynshape.run("sum", x, axis=1)
    assert dynshape.last_table().variant == "simplified"
    dynshape.wait_optimized()
    assert dynshape.cache_stats()["tables_saved"] == 1 and len(_files(store_dir)) == 1
    second = dynshape.run("sum", x, axis=1)
    table = dynshape.last_table()
    assert table.variant == "optimized" and np.array_equal(first, second)
    dynshape.set_policy("simplified")
    dynshape.clear_cache()
    dynshape.run("sum", x, axis=1)
    assert not np.array_equal(dynshape.last_table().entries, table.entries), \
        "pick a call whose optimized table differs from the simplified one"


def test_last_table_is_per_thread():
    dynshape.clear_cache()
    dynshape.run("relu", np.ones(10, np.float32))
    mine = dynshape.last_table()
    seen = []
    t = threading.Thread(target=lambda: seen.append(dynshape.last_table()))
    t.start()
    t.join()
    assert mine is not None and mine.op == "relu" and seen == [None]


# ---- several processes, one directory ------------------------------------------------------
def test_processes_sharing_a_directory_never_read_a_partial_file(tmp_path):
    """Four processes start together: they race to build and save the same tables, run the
    calls, then rewrite and reread the same files many times. No process ever reads a
    half-written file (TableStoreWarning is an error in them) and every result is right."""
    script = RUN_CALLS + textwrap.dedent("""
        from dynshape.runtime import config
        for op, shapes, attrs in CALLS:
            dynshape.warmup(op, *shapes, **attrs)
        ok, variants = run_all(int(sys.argv[2]))
        stats = dynshape.cache_stats()
        store, keys = config.cache.store, config.cache.keys()
        tables = [config.cache.get(k) for k in keys]
        same = True
        for i in range(60):
            for k, t in zip(keys, tables):
                store.save(k, t)
                got = store.load(k)
                same &= got is not None and bool((got.entries == t.entries).all())
        print(json.dumps({"ok": ok, "same": same, "variants": variants, "stats": stats}))
    """)
    procs = [_subprocess(script, tmp_path, json.dumps(CALLS), str(k)) for k in range(4)]
    results = [_finish(p) for p in procs]
    built = loaded = 0
    for res, err in results:
        assert res["ok"] and res["same"] and res["variants"] == ["optimized"] * 4
        assert "Warning" not in err and "Traceback" not in err, err
        built += res["stats"]["tables_built"]
        loaded += res["stats"]["tables_loaded"]
        assert res["stats"]["tables_rejected"] == 0
    assert built + loaded == 16 and built >= 4
    files = _files(tmp_path)
    assert len(files) == 4
    assert all(ParamTable.load(f).variant == "optimized" for f in files)
    assert not glob.glob(os.path.join(str(tmp_path), "*", "*.tmp"))


def test_the_table_dir_comes_from_the_environment(tmp_path):
    script = textwrap.dedent("""
        import json, dynshape
        t = dynshape.warmup("relu", (1000, 3))
        print(json.dumps({"dir": dynshape.table_dir(),
                          "saved": dynshape.cache_stats()["tables_saved"]}))
    """)
    res, _ = _finish(_subprocess(script, tmp_path))
    assert res == {"dir": str(tmp_path), "saved": 1}
    bad = tmp_path / "a-file"
    bad.write_text("x")
    res, err = _finish(_subprocess(script, bad))
    assert res == {"dir": None, "saved": 0} and "DYNSHAPE_TABLE_DIR ignored" in err
