"""Profiling: where the microseconds of a cache-hit ``dynshape.run`` go (relu, float32,
1,000 elements), and the dispatch overhead over the kernel itself.

    python -m bench.kernel_level.profile_dispatch [--quick] [--serial-driver] [--cprofile N]

Kernel-level on purpose: it reaches into the runtime (``dynshape.runtime.plane``,
``dynshape.runtime.executor``, ``dynshape.runtime.layout``) and the kernels
(``dynshape_kernels.drivers``) to call each step of ``Executor.run`` for the plane family
(and the op spec's ``prepare``) alone,
with the arguments the real call builds, and to call the compiled driver directly (the
kernel time). Steps are timed in alternating blocks (one sample of many calls per block).
The fast path is a hit in the executor's exact-layout memo; the "memo miss" stages are what
a new layout whose bucket table is cached adds. When the internals change, a missing step is
listed as such, never timed wrong. ``--serial-driver`` also compiles (in memory, not cached)
the driver without ``parallel=True`` to separate the OpenMP fork/join from the kernel work.
``--cprofile N`` prints a cProfile of N calls.
"""
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
from bench.harness import environment  # noqa: E402

if __name__ == "__main__":
    environment.prepare(bind=environment.wants_bind())

import numpy as np  # noqa: E402

from bench.harness import session  # noqa: E402
from bench.harness.timing import alternating  # noqa: E402


def interleaved(fns, rounds):
    """One sample of >= 2 ms per callable per block: the callables alternate sample by
    sample, so that load hits them alike (microsecond calls)."""
    return alternating(fns, blocks=rounds, block_s=0, sample_s=2e-3)


def context(op="relu", n=1000, dtype=np.float32):
    """Everything a warm cache-hit call of ``op`` on ``n`` elements builds, step by step
    (mirrors dynshape.runtime.executor.Executor.run for the plane family)."""
    import dynshape
    from dynshape import ops
    from dynshape.runtime import config
    from dynshape.runtime.layout import flat_view
    from dynshape.runtime.plane import PLANE
    from dynshape_kernels import drivers

    x = np.random.default_rng(0).standard_normal(n).astype(dtype)
    o = np.empty_like(x)
    dynshape.run(op, x, out=o)                     # warm: table cached, driver loaded
    spec = ops.get(op)
    launch = spec.prepare((x,), o, {})
    p = PLANE.geometry(launch)
    key = PLANE.key(launch, p, "cpu")
    table = config.cache.get(key)
    assert table is not None, "the table should be cached after the first call"
    obuf, ooff = flat_view(launch.out)
    ins = [flat_view(a) for a in launch.inputs]
    common = table.bind(p, [ooff] + [off for _, off in ins])
    driver = drivers.get(launch.family, launch.dtype)
    args = [b for b, _ in ins] + [obuf, common, table.entries]
    if launch.fattrs is not None:
        args.append(launch.fattrs)
    return dict(x=x, o=o, spec=spec, launch=launch, p=p, key=key, table=table, driver=driver,
                args=args, op=op)


def kernel_call(ctx):
    """The compiled driver called directly with the arguments run_plane passes it."""
    driver, args = ctx["driver"], ctx["args"]
    return lambda: driver(*args)


def _try(fns, name, make):
    """Add stage ``name`` if this build still has what ``make`` refers to."""
    try:
        fn = make()
        fn()
        fns[name] = fn
    except Exception as exc:                    # internals moved: skip, say so
        fns[name + f" [n/a: {type(exc).__name__}]"] = None


def stage_fns(ctx):
    """name -> zero-argument callable, one per step of the dispatch path (in order).

    Names starting with two spaces are parts of the stage above them (not summed); names
    starting with "TOTAL" are whole calls; "memo miss:" stages run only for a layout not
    seen before (the table is still a bucketed-cache hit)."""
    import dynshape
    from dynshape import ops
    from dynshape.runtime import config
    from dynshape.runtime.executor import MEMO
    from dynshape.runtime.layout import flat_view
    from dynshape.runtime.plane import PLANE
    from dynshape_kernels import drivers

    x, o, spec, launch, p, key, table = (ctx[k] for k in
                                         ("x", "o", "spec", "launch", "p", "key", "table"))
    op = ctx["op"]
    ew = ops.elementwise
    fns = {}
    fns["TOTAL dynshape.run(out=)"] = lambda: dynshape.run(op, x, out=o)
    from dynshape.runtime import replay
    from dynshape.runtime.replay import REPLAY

    def full():
        REPLAY.clear()
        dynshape.run(op, x, out=o)
    fns["TOTAL run, replay memo cleared each call (full path)"] = full

    def miss():
        REPLAY.clear()
        MEMO.clear()
        dynshape.run(op, x, out=o)
    fns["TOTAL run, replay and exact-layout memos cleared each call"] = miss
    fns["replay: call signature"] = lambda: replay.signature(op, (x,), o, {})
    dynshape.run(op, x, out=o)
    rsig = replay.signature(op, (x,), o, {})
    entry = REPLAY._entries.get(rsig)
    fns["replay: REPLAY.run (lookup, table check, overlap check, go)"] = \
        lambda: (REPLAY.run(rsig, (x,), o), None)[1]
    if entry is not None:
        fns["  replay: go (flat views, driver call)"] = lambda: entry.go((x,), o)
    fns["full path: ops.get(op)"] = lambda: ops.get(op)
    fns["full path: validate: spec.prepare() total"] = lambda: spec.prepare((x,), o, {})
    _try(fns, "  _check_dtype", lambda: (lambda: ew._check_dtype(op, x.dtype, spec.accepted)))
    _try(fns, "  check_out", lambda: (lambda: ops.check_out(o, x.shape, x.dtype, op)))
    _try(fns, "  _unalias (np.may_share_memory)", lambda: (lambda: ew._unalias(o, x)))
    _try(fns, "  Launch(...)", lambda: (lambda: ops.Launch(
        "unary", op, "float32", o, [x], o, fattrs=None, overlap_ok=True)))
    _try(fns, "full path: memo key (PLANE.signature)", lambda: (lambda: PLANE.signature(launch)))
    sig = PLANE.signature(launch)
    MEMO.put(sig, key, table.common)
    fns["full path: memo lookup (MEMO.get: dict + cache touch)"] = lambda: MEMO.get(sig)
    fns["full path: table cache lookup (cache.get: lock + LRU)"] = lambda: config.cache.get(key)
    fns["flat_view x2"] = lambda: (flat_view(launch.out), [flat_view(a) for a in launch.inputs])
    fns["driver lookup (drivers.get)"] = lambda: drivers.get(launch.family, launch.dtype)
    fns["driver call (compiled kernel work)"] = kernel_call(ctx)
    offs = [0] * (1 + len(launch.inputs))
    _try(fns, "memo miss: layout/plane (PLANE.geometry)", lambda: (lambda: PLANE.geometry(launch)))
    _try(fns, "memo miss: bucket key (PLANE.key)", lambda: (lambda: PLANE.key(launch, p, "cpu")))
    _try(fns, "memo miss: bind common area", lambda: (lambda: table.bind(p, offs)))
    return {k: v for k, v in fns.items() if v is not None}, [k for k, v in fns.items() if v is None]


# the stages whose sum models the whole call (sub-stages of prepare are indented, not summed)
def _summed(name):
    return not name.startswith(("  ", "TOTAL", "memo miss", "full path"))


def numba_overhead_fns(ctx, serial=False):
    """Numba's own per-call cost (a no-op with the driver's signature) and, optionally, the
    driver compiled without parallel=True (compiled in memory only, never cached)."""
    from numba import njit
    driver, args = ctx["driver"], ctx["args"]
    sig = driver.signatures[0]
    noop = njit(sig)(_noop5 if len(sig) == 5 else _noop6)
    fns = {"numba call of a no-op with the same 5 array args": lambda: noop(*args)}
    if serial:
        serial_driver = njit(sig, error_model="numpy", nogil=True)(driver.py_func)
        fns["driver compiled serial (no prange fork/join)"] = lambda: serial_driver(*args)
    fns["driver call (parallel=True, as shipped)"] = lambda: driver(*args)
    return fns


def _noop5(a, b, c, d, e):
    return None


def _noop6(a, b, c, d, e, f):
    return None


def breakdown(rounds=40, serial=False):
    """(stage rows [(name, median s, min s)], numba overhead rows (same), context) for relu
    on 1,000 float32 elements."""
    ctx = context()
    fns, missing = stage_fns(ctx)
    stats = interleaved(fns, rounds=rounds)
    rows = [(name, st.median, st.min) for name, st in stats.items()]
    rows += [(name, None, None) for name in missing]
    ov = interleaved(numba_overhead_fns(ctx, serial), rounds=rounds)
    return rows, [(name, st.median, st.min) for name, st in ov.items()], ctx


def print_breakdown(rows, ov_rows, out=print):
    total = {n: (md, mn) for n, md, mn in rows}["TOTAL dynshape.run(out=)"]
    timed = [r for r in rows if r[1] is not None]
    s_md = sum(md for n, md, _ in timed if _summed(n))
    s_mn = sum(mn for n, _, mn in timed if _summed(n))
    out(f"  {'stage':52s} {'median':>9s} {'min':>9s} {'% of run':>9s}")
    for name, md, mn in rows:
        if md is None:
            out(f"  {name:52s} (not in this build)")
            continue
        out(f"  {name:52s} {md * 1e6:7.2f}us {mn * 1e6:7.2f}us {100 * md / total[0]:8.1f}%")
    out(f"  {'sum of the fast-path stages':52s} {s_md * 1e6:7.2f}us {s_mn * 1e6:7.2f}us "
        f"{100 * s_md / total[0]:8.1f}%  (rest: call overhead, argument lists, glue)")
    for name, md, mn in ov_rows:
        out(f"  {name:52s} {md * 1e6:7.2f}us {mn * 1e6:7.2f}us")


def cprofile_rows(n=20000, top=12):
    """Top functions of ``n`` cache-hit dynshape.run calls by own time: per-run us, calls."""
    import cProfile
    import pstats

    import dynshape
    ctx = context()
    x, o = ctx["x"], ctx["o"]
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        dynshape.run("relu", x, out=o)
    pr.disable()
    st = pstats.Stats(pr).stats
    rows = []
    for (path, line, name), (cc, nc, tt, ct, _) in st.items():
        short = "/".join(path.split("/")[-2:]) if "/" in path else path
        rows.append({"function": f"{short}:{line}({name})", "us_per_call": tt / n * 1e6,
                     "calls_per_run": nc / n, "cum_us_per_call": ct / n * 1e6})
    rows.sort(key=lambda r: -r["us_per_call"])
    return rows[:top]


def cprofile_report(n=20000, top=25):
    import cProfile
    import pstats

    import dynshape
    ctx = context()
    x, o = ctx["x"], ctx["o"]
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        dynshape.run("relu", x, out=o)
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(top)


def dispatch_overhead(ctx, rounds):
    """run(out=) against the compiled driver called directly: {name: Stat}, overhead s."""
    import dynshape
    x, o = ctx["x"], ctx["o"]
    fns = {"dynshape.run(relu, out=)": lambda: dynshape.run("relu", x, out=o),
           "kernel: compiled driver called directly": kernel_call(ctx),
           "np.maximum(x, 0, out=o)": lambda: np.maximum(x, 0, out=o)}
    st = interleaved(fns, rounds)
    return st, (st["dynshape.run(relu, out=)"].median
                - st["kernel: compiled driver called directly"].median)


def main(argv=None):
    ap = session.options(__doc__, "profile_dispatch.json")
    ap.add_argument("--serial-driver", action="store_true",
                    help="also compile a serial copy of the driver (about 2 s)")
    ap.add_argument("--cprofile", type=int, default=0, metavar="N")
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args(argv)
    s = session.Session("dynshape dispatch profile (kernel-level)", args)
    s.start(families=["unary"], dtypes=["float32"])
    rounds = 4 if s.quick else args.rounds
    ctx = context()
    st, overhead = dispatch_overhead(ctx, rounds)
    s.print("cache-hit dispatch, relu float32 x 1000 (alternating; median / min):")
    for k, v in st.items():
        s.print(f"  {k:48s} {v.median * 1e6:8.2f}us {v.min * 1e6:8.2f}us")
    s.print(f"  dispatch overhead = run(out=) - kernel = {overhead * 1e6:.2f}us (target <= 5us: "
            f"{'MET' if overhead <= 5e-6 else 'MISSED'})")
    rows, ov, _ = breakdown(rounds, args.serial_driver)
    s.print("where the time goes, dynshape.run('relu', x[1000] float32, out=o):")
    print_breakdown(rows, ov, out=s.print)
    cprof = cprofile_rows(n=2000 if s.quick else 20000)
    if args.cprofile:
        cprofile_report(args.cprofile)
    s.finish({"dispatch": {k: v.as_dict() for k, v in st.items()}, "overhead_s": overhead,
              "stages": [{"stage": n, "median_s": md, "min_s": mn} for n, md, mn in rows],
              "numba_overhead": [{"what": n, "median_s": md, "min_s": mn} for n, md, mn in ov],
              "cprofile": cprof})


if __name__ == "__main__":
    main()
