"""The command line: help on every command and argument, ops and catalog listings, one-line
errors with exit status 2, progress while warming."""
import io
import subprocess
import sys

import pytest

import dynshape
from dynshape.cli import main

COMMANDS = ("demo", "ops", "explain", "catalog", "warm", "calibrate", "pregenerate", "keys")


def _run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_help_lists_every_command_without_markup(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert "``" not in text
    for c in COMMANDS:
        assert c in text


@pytest.mark.parametrize("command", COMMANDS)
def test_every_argument_has_help(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    assert "``" not in text
    # argparse prints an argument without help as a bare name line: every option and
    # positional must be followed by its help text on the same or the next line
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(("positional", "options")))
    for i, ln in enumerate(lines[start:], start):
        s = ln.strip()
        if ln.startswith("  ") and not ln.startswith("   " * 4) and s and s != "-h, --help":
            words = s.split("  ")
            has_help = len([w for w in words if w.strip()]) > 1
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            assert has_help or nxt.startswith(" " * 10), f"{command}: no help for {s!r}"


def test_ops_lists_every_op_with_dtypes_and_attributes(capsys):
    code, out, _ = _run(["ops"], capsys)
    assert code == 0
    names = {ln.split()[0] for ln in out.splitlines() if ln.startswith("  ")}
    assert names == set(dynshape.known_ops())
    gelu = next(ln for ln in out.splitlines() if ln.split()[:1] == ["gelu"])
    assert "approximate='none'" in gelu and "float32" in gelu
    recip = next(ln for ln in out.splitlines() if ln.split()[:1] == ["reciprocal"])
    assert "int32" not in recip          # float-only op


def test_ops_one_family_and_unknown_family(capsys):
    code, out, _ = _run(["ops", "--family", "rowwise"], capsys)
    assert code == 0
    assert {ln.split()[0] for ln in out.splitlines() if ln.startswith("  ")} == \
        {"softmax", "log_softmax", "layer_norm", "rms_norm"}
    code, _, err = _run(["ops", "--family", "nope"], capsys)
    assert code == 2 and err.startswith("dynshape: unknown family 'nope'") and "rowwise" in err


def test_catalog_includes_the_fused_driver(capsys):
    code, out, _ = _run(["catalog"], capsys)
    assert code == 0
    for fam in list(dynshape.CATALOG.families) + ["fused"]:
        assert f"  {fam} " in out


@pytest.mark.parametrize("argv, words", [
    (["explain", "nosuchop", "3x4"], ["unknown op 'nosuchop'", "relu"]),
    (["explain", "relu", "3x4", "--dtype", "bogus"], ["unknown dtype 'bogus'", "float32"]),
    (["explain", "relu", "3x4", "--dtype", "complex64"], ["complex64", "accepted"]),
    (["explain", "add", "3x4", "5x4"], ["do not broadcast"]),
    (["warm", "--family", "nope"], ["unknown kernel family 'nope'", "unary"]),
    (["warm", "--family", "rowwise", "--dtype", "int8"], ["int8", "accepted"]),
])
def test_bad_input_is_one_line_and_status_2(argv, words, capsys):
    code, _, err = _run(argv, capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("dynshape: ") and "Traceback" not in err
    for w in words:
        assert w in err


def test_warm_reports_progress_per_driver():
    buf = io.StringIO()
    done = dynshape.warm(pairs=[("unary", "float32"), ("binary", "float32")], progress=buf)
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("  [1/2] unary float32 ...") and "elapsed" in lines[0]
    assert lines[1].startswith("  [2/2] binary float32 ...")
    assert [(f, d) for f, d, _, _ in done] == [("unary", "float32"), ("binary", "float32")]
    assert all(("compiled" in ln) == c for ln, (_, _, _, c) in zip(lines, done))


def test_warm_fills_the_epilogue_interpreter_unless_told_not_to(monkeypatch, capsys):
    """``warm`` loads what conv2d and matmul call only for epilogues (``epilogues=True``, the
    default); ``epilogues=False`` and ``dynshape warm --no-epilogues`` leave it out."""
    from dynshape_kernels import drivers
    filled = []
    monkeypatch.setattr(drivers, "fill_on_demand", lambda f, d: filled.append((f, d)))
    pairs = [("conv", "float32"), ("unary", "float32")]
    dynshape.warm(pairs=pairs)
    assert filled == pairs
    filled.clear()
    dynshape.warm(pairs=pairs, epilogues=False)
    assert filled == []
    assert main(["warm", "--family", "conv", "--dtype", "float32", "--no-epilogues"]) == 0
    assert filled == []
    assert main(["warm", "--family", "conv", "--dtype", "float32"]) == 0
    assert filled == [("conv", "float32")]
    capsys.readouterr()


def test_warm_plan_dedupes_copy_item_sizes():
    """Copies of 4- and 8-byte items run on the unary float driver of that size, the others
    on the copy family's driver of their item size."""
    from dynshape.warming import plan
    assert plan(["copy"], ["float32", "int32", "float64"]) == [("unary", "float32"),
                                                               ("unary", "float64")]
    assert plan(["copy"], ["int8", "float16", "bfloat16", "uint16"]) == [("copy", "uint8"),
                                                                         ("copy", "uint16")]


def _simulate_warming(pairs, children, epilogues=True):
    """Run the parent's hand-out of jobs (``_jobs``, ``_order``, ``_pick``) with each job
    taking its ``_COMPILE_COST`` seconds; returns the (start, end, job) of every job and the
    end."""
    from dynshape.warming import _COMPILE_COST, _jobs, _order, _pick
    jobs = _jobs(pairs, epilogues)
    order = _order(jobs, children)
    assert sorted(order) == sorted(jobs)
    pending, finished, held, runs, now = list(jobs), set(), set(), [], 0.0
    busy = {}                                   # child -> (end, job)
    while pending or busy:
        for c in range(children):
            if c not in busy:
                job = _pick(jobs, pending, finished, held, order)
                if job is not None:
                    pending.remove(job)
                    held |= jobs[job][0]
                    busy[c] = (now + _COMPILE_COST.get(job[0], 30), job)
                    runs.append((now, busy[c][0], job))
        assert busy, "jobs left that no child can start"
        c, (now, job) = min(busy.items(), key=lambda kv: kv[1][0])
        del busy[c]
        held -= jobs[job][0]
        finished.add(job)
    return runs, now


def test_parallel_warming_runs_each_step_interpreter_once_before_its_drivers():
    """Jobs: every driver once, and the step interpreter of each dtype whose drivers call
    it, which the fused driver waits for (conv and matmul call it on demand: they compile
    without it, and ``epilogues=False`` leaves it out); no two jobs writing one cache index
    (a driver's function, unary and copy sharing one, or one reached by address) run at
    once."""
    from dynshape.warming import STEPS, _jobs, plan
    from dynshape_kernels import drivers
    demo = plan(["conv", "matmul", "unary", "binary", "copy", "pool"], ["float32"])
    assert ("copy", "uint32") not in demo and ("unary", "float32") in demo   # 4-byte copies
    for pairs in (demo, plan()):
        jobs = _jobs(pairs)
        assert sorted(j for j in jobs if j[0] != STEPS) == sorted(pairs)
        stepping = {d for f, d in pairs if drivers.runs_step_programs(f)}
        assert sorted(d for f, d in jobs if f == STEPS) == sorted(stepping)
        runs, end = _simulate_warming(pairs, 2)
        assert sorted(job for _, _, job in runs) == sorted(jobs)
        ended = {job: e for _, e, job in runs}
        for start, stop, job in runs:
            for need in jobs[job][1]:
                assert ended[need] <= start, (job, need)
            for s2, e2, other in runs:
                if other != job and s2 < stop and start < e2:    # they overlap in time
                    assert not jobs[job][0] & jobs[other][0], (job, other)
        for copy in (j for j in jobs if j[0] == "copy"):
            assert jobs[("unary", "float32")][0] & jobs[copy][0]       # one function
        if pairs is demo:
            # the interpreter no longer ties conv and matmul to one child (that fixed split
            # ended at 28 of a total 50): the demo ends within 2 s of half the total
            total = sum(e - s for s, e, _ in runs)
            assert end <= total / 2 + 2, (end, total)
    assert not drivers.runs_step_programs("unary") and drivers.runs_step_programs("conv")
    jobs = _jobs(plan(["conv", "matmul", "fused"], ["float32"]))
    assert jobs[("fused", "float32")][1] == {(STEPS, "float32")}
    assert not jobs[("conv", "float32")][1] and not jobs[("matmul", "float32")][1]
    assert (STEPS, "float32") in _jobs(demo) and (STEPS, "float32") not in _jobs(demo, False)
    assert (STEPS, "float32") in _jobs(plan(["fused"], ["float32"]), False)


def test_parallel_warming_order_ends_with_the_best_split():
    """The children take jobs in the order whose simulated schedule ends first: for the
    demo's five drivers on 2 children, no split ends sooner (longest-first alone put conv,
    unary and pool on one child: 29 of a total 55; the best split ends at 28), and a job
    set too large to try every order ends no later than longest-first."""
    import itertools
    from dynshape.warming import STEPS, _COMPILE_COST, _jobs, _makespan, _order, plan
    demo = [(f, "float32") for f in ("conv", "matmul", "unary", "binary", "pool")]
    cost = {j: _COMPILE_COST[j[0]] for j in demo}
    best = min(max(sum(cost[j] for j in part), sum(cost.values()) - sum(cost[j] for j in part))
               for k in range(len(demo) + 1) for part in itertools.combinations(demo, k))
    runs, end = _simulate_warming(demo, 2, epilogues=False)
    assert end == best == 28
    for pairs, epilogues in ((demo, True), (plan(["unary", "binary", "reduce", "rowwise"],
                                                 ["float32", "float64"]), True)):
        jobs = _jobs(pairs, epilogues)
        longest = sorted(jobs, key=lambda j: (j[0] != STEPS, -_COMPILE_COST[j[0]], j))
        assert _makespan(jobs, _order(jobs, 2), 2) <= _makespan(jobs, longest, 2)
        if len(jobs) <= 6:
            assert _makespan(jobs, _order(jobs, 2), 2) == min(
                _makespan(jobs, o, 2) for o in itertools.permutations(jobs))


def test_module_entry_point_runs_a_command():
    r = subprocess.run([sys.executable, "-m", "dynshape", "ops", "--family", "pool"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "max_pool2d" in r.stdout and "avg_pool2d" in r.stdout


def _stand_in_child(tmp_path, fail_on=None):
    """A child that answers each job at once (``ready family dtype 0.01``, or dies on
    ``fail_on``), writes its pid, and once its stdin closes waits for the file ``release``
    (20 s at most) before it exits."""
    return (f"import os, sys, time\n"
            f"open(os.path.join({str(tmp_path)!r}, str(os.getpid())), 'w').close()\n"
            f"for line in sys.stdin:\n"
            f"    fam, dt = line.strip().split(':')\n"
            f"    if fam == {fail_on!r}:\n"
            f"        print('cannot compile', fam, flush=True)\n"
            f"        sys.exit(3)\n"
            f"    print('ready', fam, dt, '0.01', flush=True)\n"
            f"for _ in range(400):\n"
            f"    if os.path.exists(os.path.join({str(tmp_path)!r}, 'release')):\n"
            f"        break\n"
            f"    time.sleep(0.05)\n")


def test_parallel_warming_loads_each_driver_as_its_child_ends_and_does_not_wait_for_exit(
        tmp_path, monkeypatch):
    """The parent loads each driver as soon as a child reports it compiled (while the other
    jobs run), and returns once the last job is done: the children, still alive then,
    exit on their own. A child that dies raises an error carrying its output."""
    import os
    import time
    from dynshape import warming
    pairs = [("unary", "float32"), ("binary", "float32"), ("pool", "float32")]
    monkeypatch.setattr(warming, "_CHILD", _stand_in_child(tmp_path))
    loaded = []
    done = warming._compile_in_children(pairs, 2, None, time.perf_counter(), len(pairs),
                                        epilogues=False, loaded=lambda *p: loaded.append(p))
    pids = [int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()]
    try:
        assert len(pids) == 2
        for pid in pids:
            os.kill(pid, 0)          # still alive: the parent did not wait for them to exit
    finally:
        (tmp_path / "release").touch()
    assert sorted(loaded) == sorted(pairs)
    assert [(f, d) for f, d, _, _ in done] == loaded
    assert all(compiled for *_, compiled in done)

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "release").touch()
    monkeypatch.setattr(warming, "_CHILD", _stand_in_child(bad, fail_on="binary"))
    with pytest.raises(RuntimeError, match="cannot compile binary"):
        warming._compile_in_children(pairs, 2, None, time.perf_counter(), len(pairs),
                                     epilogues=False, loaded=lambda *p: None)


def test_a_compiling_child_imports_the_kernel_library_only_unless_a_package_is_named():
    """The child program imports no part of dynshape (0.2 s less per child) unless
    DYNSHAPE_PACKAGE names a kernel package, which it then loads as the parent did (the
    variable is the package loader's)."""
    import os
    from dynshape.packages import load
    from dynshape.warming import _CHILD
    from dynshape_kernels import compile_child
    assert compile_child.PACKAGE_ENV == load.ENV
    probe = _CHILD.replace("main(sys.stdin)", "main([]); print(sorted(m for m in sys.modules "
                                              "if m.split('.')[0] == 'dynshape'))")
    assert probe != _CHILD           # the probe runs no job (it would read this stdin)
    env = {k: v for k, v in os.environ.items() if k != load.ENV}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=env, check=True).stdout
    assert out.strip() == "[]"
    # a package named: the child loads it first (here a missing one: the loader's error)
    env[load.ENV] = os.path.join(os.path.dirname(__file__), "no-such-package.dynshape")
    bad = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert bad.returncode != 0 and "no-such-package" in bad.stderr
