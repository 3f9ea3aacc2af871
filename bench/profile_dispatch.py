"""Where the microseconds of a cache-hit ``dynshape.run`` go (relu, float32, 1,000 elements).

    python -m bench.profile_dispatch [--serial-driver] [--cprofile N]

Stage times: each step of ``dynshape.runtime.plane.run_plane`` (and the op spec's ``prepare``)
called in isolation with the arguments the real call builds, timed round-robin (medians of
samples of many calls). The fast path is a hit in the executor's exact-layout memo; the
"memo miss" stages are what a new layout whose bucket table is cached adds. The stages mirror dynshape internals as of this writing; when those
change, the stage list fails loudly rather than timing the wrong thing. ``--serial-driver``
also compiles (in memory, not cached) the same driver without ``parallel=True`` to separate
the OpenMP fork/join from the kernel work. ``--cprofile N`` prints a cProfile of N calls.
"""
import os
import sys


if "--no-bind" not in sys.argv:          # same OpenMP binding as bench.run_core
    os.environ.setdefault("OMP_PROC_BIND", "true")
    os.environ.setdefault("OMP_PLACES", "cores")

import argparse  # noqa: E402

import numpy as np  # noqa: E402

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bench.timing import interleaved  # noqa: E402
else:
    from .timing import interleaved  # noqa: E402


def context(op="relu", n=1000, dtype=np.float32):
    """Everything a warm cache-hit call of ``op`` on ``n`` elements builds, step by step
    (mirrors dynshape.runtime.plane.run_plane)."""
    import dynshape
    from dynshape import ops
    from dynshape.runtime import config
    from dynshape.runtime import plane as executor
    from dynshape.runtime.layout import flat_view
    from dynshape_kernels import drivers

    x = np.random.default_rng(0).standard_normal(n).astype(dtype)
    o = np.empty_like(x)
    dynshape.run(op, x, out=o)                     # warm: table cached, driver loaded
    spec = ops.get(op)
    launch = spec.prepare((x,), o, {})
    p = executor._plane_of(launch)
    key = executor.table_key(launch, p)
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
    from dynshape.runtime import plane as executor
    from dynshape.runtime.layout import flat_view
    from dynshape_kernels import drivers

    x, o, spec, launch, p, key, table = (ctx[k] for k in
                                         ("x", "o", "spec", "launch", "p", "key", "table"))
    op = ctx["op"]
    ew = ops.elementwise
    fns = {}
    fns["TOTAL dynshape.run(out=)"] = lambda: dynshape.run(op, x, out=o)
    memo = getattr(executor, "_memo", None)
    if memo is not None:
        def miss():
            memo.clear()
            dynshape.run(op, x, out=o)
        fns["TOTAL run, exact-layout memo cleared each call"] = miss
    fns["ops.get(op)"] = lambda: ops.get(op)
    fns["validate: spec.prepare() total"] = lambda: spec.prepare((x,), o, {})
    _try(fns, "  _check_dtype", lambda: (lambda: ew._check_dtype(op, x.dtype, spec.accepted)))
    _try(fns, "  check_out", lambda: (lambda: ops.check_out(o, x.shape, x.dtype, op)))
    _try(fns, "  _unalias (np.may_share_memory)", lambda: (lambda: ew._unalias(o, x)))
    _try(fns, "  Launch(...)", lambda: (lambda: ops.Launch(
        "unary", op, "float32", o, [x], o, fattrs=None, overlap_ok=True)))
    _try(fns, "memo key (executor._signature)", lambda: (lambda: executor._signature(launch)))
    if memo is not None:
        sig = executor._signature(launch)
        memo.setdefault(sig, (key, table.common))
        fns["memo lookup (dict.get)"] = lambda: memo.get(sig)
    fns["table cache lookup (cache.get: lock + LRU)"] = lambda: config.cache.get(key)
    fns["flat_view x2"] = lambda: (flat_view(launch.out), [flat_view(a) for a in launch.inputs])
    fns["driver lookup (drivers.get)"] = lambda: drivers.get(launch.family, launch.dtype)
    fns["driver call (compiled kernel work)"] = kernel_call(ctx)
    fns["counters['driver_calls'] += 1"] = \
        lambda: config.counters.__setitem__("driver_calls", config.counters["driver_calls"] + 1)
    offs = [0] * (1 + len(launch.inputs))
    _try(fns, "memo miss: layout/plane (_plane_of)", lambda: (lambda: executor._plane_of(launch)))
    _try(fns, "memo miss: bucket key (table_key)", lambda: (lambda: executor.table_key(launch, p)))
    _try(fns, "memo miss: bind common area", lambda: (lambda: table.bind(p, offs)))
    return {k: v for k, v in fns.items() if v is not None}, [k for k, v in fns.items() if v is None]


# the stages whose sum models the whole call (sub-stages of prepare are indented, not summed)
def _summed(name):
    return not name.startswith(("  ", "TOTAL", "memo miss"))


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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serial-driver", action="store_true",
                    help="also compile a serial copy of the driver (about 2 s)")
    ap.add_argument("--cprofile", type=int, default=0, metavar="N")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--no-bind", action="store_true", help="no OMP_PROC_BIND/OMP_PLACES")
    args = ap.parse_args(argv)
    import dynshape
    dynshape.warm(["unary"], ["float32"])
    rows, ov, _ = breakdown(args.rounds, args.serial_driver)
    print("cache-hit dispatch path of dynshape.run('relu', x[1000] float32, out=o):")
    print_breakdown(rows, ov)
    if args.cprofile:
        cprofile_report(args.cprofile)


if __name__ == "__main__":
    main()
