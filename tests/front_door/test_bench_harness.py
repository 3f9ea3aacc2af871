"""The benchmark harness: environment fixing, alternating-block timing, the header's
environment logic and optional peers. Fast, no PyTorch needed; never changes this process's
environment (prepare() is given its own dicts)."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:                 # bench/ is not installed: import it from the tree
    sys.path.insert(0, ROOT)

from bench.harness import environment, header, peers, timing  # noqa: E402


@pytest.fixture(autouse=True)
def _keep_environment_state(monkeypatch):
    monkeypatch.setattr(environment, "state", environment.state)


def test_prepare_unsets_both_openblas_variables_and_binds_threads():
    env = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1048576", "PATH": "/bin"}
    state = environment.prepare(environ=env, modules={})
    assert "OPENBLAS_CORETYPE" not in env and "OPENBLAS_L2_SIZE" not in env
    assert state["unset"] == {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1048576"}
    assert env["OMP_PROC_BIND"] == "true" and env["OMP_PLACES"] == "cores"
    assert env["NUMBA_NUM_THREADS"] == str(min(environment.THREADS, os.cpu_count() or 1))
    assert "NUMBA_CACHE_DIR" not in env           # the user's cache, never set here


def test_prepare_keeps_user_choices_and_can_skip_binding():
    env = {"OMP_PLACES": "threads", "NUMBA_NUM_THREADS": "1"}
    state = environment.prepare(bind=False, environ=env, modules={})
    assert state["unset"] == {} and state["bound"] is False
    assert env == {"OMP_PLACES": "threads", "NUMBA_NUM_THREADS": "1"}
    env = {"OMP_PLACES": "threads"}
    environment.prepare(environ=env, modules={})
    assert env["OMP_PLACES"] == "threads" and env["OMP_PROC_BIND"] == "true"


def test_prepare_refuses_once_numpy_is_loaded():
    with pytest.raises(environment.EnvironmentTooLate, match="numpy"):
        environment.prepare(environ={}, modules={"numpy": object()})


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs thread affinity and two CPUs")
def test_threads_created_unbound_run_on_every_cpu():
    """A thread pool made while the calling thread is pinned to one core (what OpenMP
    binding does to the main thread) inherits that core, unless it is made inside
    threads_unbound(); the caller's own pinning comes back afterwards."""
    import threading
    every = os.sched_getaffinity(0)
    environment.state = {"unset": {}, "bound": True, "cpus": every}
    one = {min(every)}
    seen = {}

    def record(name):
        seen[name] = os.sched_getaffinity(0)

    os.sched_setaffinity(0, one)
    try:
        t = threading.Thread(target=record, args=("pinned",))
        t.start()
        t.join()
        with environment.threads_unbound():
            t = threading.Thread(target=record, args=("unbound",))
            t.start()
            t.join()
        assert os.sched_getaffinity(0) == one
    finally:
        os.sched_setaffinity(0, every)
    assert seen == {"pinned": one, "unbound": every}
    environment.state = None                      # not prepared: nothing to restore
    with environment.threads_unbound():
        assert os.sched_getaffinity(0) == every


def test_wants_bind():
    assert environment.wants_bind(["x", "--quick"])
    assert not environment.wants_bind(["x", "--no-bind"])


def test_alternating_runs_blocks_in_turns():
    calls = []
    fns = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    st = timing.alternating(fns, blocks=3, block_s=0, sample_s=0, warm_calls=1, settle_s=0)
    # calibration call each, then per block: 1 warm call + one sample of 1 call, a then b
    assert calls[:2] == ["a", "b"]
    assert calls[2:] == ["a", "a", "b", "b"] * 3
    for s in st.values():
        assert s.blocks == 3 and s.samples == 3 and s.inner == 1
        assert 0 <= s.min <= s.median


def test_alternating_settles_before_every_block(monkeypatch):
    """Each block starts after a pause (the previous callable's workers stop spinning), and
    the pause is never inside a timed sample."""
    events = []
    monkeypatch.setattr(timing.time, "sleep", lambda s: events.append(("sleep", s)))
    fns = {"a": lambda: events.append("a"), "b": lambda: events.append("b")}
    timing.alternating(fns, blocks=2, block_s=0, sample_s=0, warm_calls=1, settle_s=0.25)
    assert events[2:] == [("sleep", 0.25), "a", "a", ("sleep", 0.25), "b", "b"] * 2
    events.clear()
    timing.alternating(fns, blocks=1, block_s=0, sample_s=0, warm_calls=1, settle_s=0)
    assert ("sleep", 0) not in events and events[2:] == ["a", "a", "b", "b"]
    assert timing.SETTLE_S >= 0.08          # longer than OpenBLAS's ~70 ms spin


def test_alternating_sample_size_and_first_s():
    n = {"k": 0}

    def f():
        n["k"] += 1
    st = timing.alternating({"f": f}, blocks=2, block_s=0, sample_s=1.0, warm_calls=0, settle_s=0,
                            first_s={"f": 0.25})
    assert st["f"].inner == 4 and n["k"] == 8       # no calibration call: 2 blocks x 4


def test_fmt_time():
    assert timing.fmt_time(None) == "-"
    assert timing.fmt_time(float("nan")) == "-"
    assert timing.fmt_time(5e-9) == "5ns"
    assert timing.fmt_time(2.5e-5) == "25.0us"
    assert timing.fmt_time(0.0123) == "12.3ms"
    assert timing.fmt_time(3.0) == "3.00s"


def test_missing_peers_are_a_note_not_a_crash(monkeypatch, capsys):
    import builtins
    real = builtins.__import__

    def fake(name, *a, **k):
        if name.split(".")[0] in ("torch", "onnxruntime", "onnx"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", fake)
    import sys
    p = peers.load(stream=sys.stdout)
    assert p.torch is None and p.ort is None and not p.compile_enabled and p.F is None
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2 and all(line.startswith("note: ") for line in out)


def _info(**over):
    info = {"cpu_model": "CPU X", "logical_cpus": 2, "loadavg_start": (0.1, 0, 0),
            "dynshape": "0", "catalog": "h", "git_commit": "abc",
            "blas": {"internal_api": "openblas", "version": "0.3", "architecture": "SkylakeX",
                     "num_threads": 2},
            "environment": {"unset": {"OPENBLAS_CORETYPE": "Haswell"}, "bound": True,
                            "prepared": True},
            "openmp": {"OMP_PROC_BIND": "true", "OMP_PLACES": "cores"}, "numba_threads": 2,
            "numba_threading_layer": "omp", "numba_cache": "/c (NUMBA_CACHE_DIR)",
            "notes": {"torch": "PyTorch unavailable (ImportError); skipped"},
            "warm": {"drivers": 2, "seconds": 1.5, "compiled": ["unary float32"]}}
    info.update(over)
    return info


def test_header_lines_name_kernel_threads_cache_and_compiles():
    text = "\n".join(header.lines(_info(), "t"))
    assert "kernel SkylakeX, 2 threads (unset here: OPENBLAS_CORETYPE=Haswell)" in text
    assert "PyTorch absent" in text and "ONNX Runtime absent" in text
    assert "Numba 2 (omp)" in text and "Numba cache: /c (NUMBA_CACHE_DIR)" in text
    assert "compiled 1: unary float32" in text and "CPU X" in text
    assert "note: PyTorch unavailable" in text


def test_header_lines_say_when_not_prepared_or_blas_unknown():
    info = _info(blas={"error": "threadpoolctl missing"},
                 environment={"unset": {}, "bound": None, "prepared": False})
    text = "\n".join(header.lines(info, "t"))
    assert "NumPy BLAS: ? (threadpoolctl missing)" in text
    assert "NOT prepared" in text


def test_numba_cache_reads_the_users_setting(monkeypatch):
    monkeypatch.delenv("DYNSHAPE_PACKAGE", raising=False)
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/somewhere")
    assert header.numba_cache() == "/somewhere (NUMBA_CACHE_DIR)"
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    assert "next to the installed sources" in header.numba_cache()


def test_copy_bandwidth_bars_of_the_core_benchmark():
    """Large elementwise rows need 85% of the best copy bandwidth; transposed copies and
    adds the issue's own 60%."""
    from bench.core_report import row_target

    def row(case, seconds):
        return {"case": case, "family": "elementwise", "op": "copy", "size": "large",
                "bytes": 1e9, "times": {"ds_out": seconds}}

    bw = 1e9                                     # 1 GB/s: the row's share is 1 / seconds
    assert row_target(row("transposed copy(a.T)", 1 / 0.7), bw)[0] == "MET"
    verdict, reasons = row_target(row("transposed add(a.T+b)", 1 / 0.5), bw)
    assert verdict.startswith("MISSED") and "50% of copy bw (bar 60%)" in reasons[0]
    verdict, reasons = row_target(row("unary relu", 1 / 0.7), bw)
    assert verdict.startswith("MISSED") and "70% of copy bw (bar 85%)" in reasons[0]
    assert row_target(row("unary relu", 1 / 0.9), bw)[0] == "MET"


def test_after_eviction_evicts_before_every_timed_call():
    """Every call of every callable comes right after its own eviction, the callables in
    turns, and each gets one sample per call."""
    from bench.harness.timing import after_eviction
    log = []
    st = after_eviction({"a": lambda: log.append("a"), "b": lambda: log.append("b")},
                        lambda: log.append("evict"), calls=3, settle_s=0)
    assert log == ["evict", "a", "evict", "b"] * 3
    assert st["a"].samples == st["b"].samples == 3 and st["a"].inner == 1
    assert 0 <= st["a"].min <= st["a"].median
