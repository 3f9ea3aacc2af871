"""Core benchmark: dynshape vs NumPy vs PyTorch (CPU) vs ONNX Runtime, side by side in one process.

    python -m bench.run_core [--quick] [--only TEXT] [--sizes small,medium,large]
                             [--json PATH] [--no-torch] [--no-ort] [--no-bind]

Every dynshape result (and every peer's) is checked against a NumPy float64 reference once per
case before anything is timed; a wrong answer is reported, never timed. The implementations
of a case are timed in alternating blocks (bench/harness/timing.py); medians are printed,
minima go to the JSON. Forms: dynshape, PyTorch and ONNX Runtime each ``out=`` and
allocating, NumPy ``out=``; ratios compare like with like. Sections: op cases (three sizes
each, odd shapes), copy bandwidth, table build time for new shapes (explain), cache-hit
calls, and the issue's targets, met or missed. Results go to bench/results/core.json.
Public API only; the kernel-level breakdowns live in bench/kernel_level/.
"""
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.harness import environment  # noqa: E402

if __name__ == "__main__":
    environment.prepare(bind=environment.wants_bind())

import gc  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import traceback  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402

import dynshape  # noqa: E402
from bench import cases  # noqa: E402
from bench.cases import S1, SIZES, all_cases  # noqa: E402
from bench.core_numpy import np_erf  # noqa: E402
from bench.core_report import (IMPLS, print_bandwidth, print_cases,  # noqa: E402
                               print_dispatch, print_table_build, row_target,
                               summarize_targets)
from bench.harness import session  # noqa: E402
from bench.harness.timing import fmt_time, perf  # noqa: E402

log = session.Session.log


# ---- running a case -------------------------------------------------------------------------
def _as_numpy(res):
    torch = cases.torch
    if torch and isinstance(res, torch.Tensor):
        return res.numpy()
    return np.asarray(res)


def _close(res, built):
    """|res - ref| <= atol + rtol*|ref| everywhere (NaN fails), in a few in-place passes."""
    if built.bound is None:
        built.bound = np.abs(built.ref)
        built.bound *= built.tol[0]
        built.bound += built.tol[1]
    d = res.astype(np.float64)
    d -= built.ref
    np.abs(d, out=d)
    return bool((d <= built.bound).all())


def verify(impl, fn, built):
    """(None if ``fn``'s result matches the reference, else a short error; seconds the call
    took)."""
    t = perf()
    try:
        res = fn()
        elapsed = perf() - t
        return _verify_result(res, built), elapsed
    except Exception as exc:
        return f"ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:100]}", perf() - t


def _verify_result(res, built):
    try:
        res = _as_numpy(res)
        if res.shape != built.ref.shape:
            return f"shape {res.shape} != {built.ref.shape}"
        if not _close(res, built):     # assert_allclose only to describe the failure
            np.testing.assert_allclose(res, built.ref, rtol=built.tol[0], atol=built.tol[1])
        return None
    except AssertionError as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        return "WRONG RESULT: " + "; ".join(ln for ln in lines if "Max" in ln or "Mismatch" in ln)
    except Exception as exc:
        return f"ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:100]}"


def run_case(S, case, size, rng):
    """Verify every implementation, then time those verified in alternating blocks
    (``S``: the harness session). Large elementwise cases also time the best plain copy of
    the output's size in the same blocks, under the same machine load."""
    row = {"case": case.label, "family": case.family, "op": case.op, "size": size,
           "times": {}, "stats": {}, "verified": {}, "notes": {}}
    t0 = perf()
    built = case.build(size, rng)
    row.update(shape=built.shape, bytes=built.nbytes, notes=dict(built.notes))
    fns, first = {}, {}
    for impl in IMPLS:
        fn = built.impls.get(impl)
        if fn is None:
            continue
        err, first[impl] = verify(impl, fn, built)
        row["verified"][impl] = "ok" if err is None else err
        if err is not None:
            row["notes"][impl] = err
            continue
        fns[impl] = fn
    copies = {}
    if case.family == "elementwise" and size == "large" and "ds_out" in fns:
        copies, moved = copy_fns(built.ref.size)
    stats = S.time({**fns, **copies}, first_s=first)
    for impl in fns:
        row["times"][impl] = stats[impl].median
        row["stats"][impl] = stats[impl].as_dict()
    if copies:
        row["copy_ref"] = copy_reference({k: stats[k] for k in copies}, moved)
    row["wall_s"] = perf() - t0
    del built
    gc.collect()
    return row


_PCOPY = []


def copy_fns(n):
    """(``{name: callable}``, bytes moved per call): the plain copies of ``n`` float32 that
    a large elementwise case is judged against, np.copyto and a two-thread Numba copy, timed
    in the same alternating blocks as the case. Timed after the case, in blocks of its own,
    the reference varied from 37 to 62 GB/s between runs on an otherwise idle machine, and
    the case's percentage of copy bandwidth with it. GB/s counts read + write."""
    if not _PCOPY:
        _PCOPY.append(_parallel_copy())
    pcopy = _PCOPY[0]
    src = np.ones(n, np.float32)
    dst = [np.empty_like(src), np.empty_like(src)]
    fns = {"copy: np.copyto": lambda: np.copyto(dst[0], src),
           "copy: numba prange copy": lambda: pcopy(src, dst[1])}
    for fn in fns.values():
        fn()
    return fns, 2 * src.nbytes


def copy_reference(stats, moved):
    """The row's copy reference from the copies' ``stats`` ({name: Stat})."""
    res = {k: {"median_s": st.median, "min_s": st.min} for k, st in stats.items()}
    res["best_GBps"] = max(moved / st.median for st in stats.values()) / 1e9
    res["best_GBps_min"] = max(moved / st.min for st in stats.values()) / 1e9
    return res


# ---- copy bandwidth ---------------------------------------------------------------------------
def _parallel_copy():
    from numba import njit, prange

    @njit(parallel=True, cache=True, nogil=True)
    def pcopy(src, dst):
        for i in prange(src.shape[0]):
            dst[i] = src[i]
    return pcopy


def bench_bandwidth(S, cfg, rng):
    n = cfg.bw_elements
    x = rng.standard_normal(n, dtype=np.float32)
    outs = [np.empty_like(x) for _ in range(4)]
    pcopy = _parallel_copy()
    pcopy(x, outs[1])
    fns = {"np.copyto (1 thread)": lambda: np.copyto(outs[0], x),
           "numba prange copy (2 threads)": lambda: pcopy(x, outs[1]),
           "dynshape relu(out=)": lambda: dynshape.run("relu", x, out=outs[2])}
    torch = cases.torch
    if torch:
        tx, to = torch.from_numpy(x), torch.from_numpy(outs[3])
        torch_copy = lambda: to.copy_(tx)                       # noqa: E731
        fns["torch copy_ (2 threads, info)"] = torch_copy
    for k, fn in fns.items():
        fn()
    np.testing.assert_array_equal(outs[0], x)
    np.testing.assert_array_equal(outs[1], x)
    np.testing.assert_array_equal(outs[2], np.maximum(x, 0))
    stats = S.time(fns, blocks=cfg.bw_rounds, block_s=0, sample_s=0)
    moved = 2 * x.nbytes
    res = {"elements": n, "bytes_moved": moved, "rows": {}}
    for k, st in stats.items():
        res["rows"][k] = {"median_s": st.median, "min_s": st.min, "GBps": moved / st.median / 1e9}
    copies = [k for k in res["rows"] if "copy" in k and "info" not in k]
    best = max(copies, key=lambda k: res["rows"][k]["GBps"])
    res["best_copy"] = best
    res["best_copy_GBps"] = res["rows"][best]["GBps"]
    res["relu_GBps"] = res["rows"]["dynshape relu(out=)"]["GBps"]
    res["relu_pct_copy"] = 100 * res["relu_GBps"] / res["best_copy_GBps"]
    # the same on the fastest samples (what an idle machine would show)
    best_min = min(copies, key=lambda k: res["rows"][k]["min_s"])
    res["best_copy_GBps_min"] = moved / res["rows"][best_min]["min_s"] / 1e9
    res["relu_pct_copy_min"] = 100 * moved / res["rows"]["dynshape relu(out=)"]["min_s"] / 1e9 \
        / res["best_copy_GBps_min"]
    return res


# ---- table build time -------------------------------------------------------------------------
def _placeholder(shape):
    """A read-only C-strided float32 view over one element: explain touches no memory."""
    st, acc = [], 4
    for s in reversed(shape):
        st.insert(0, acc)
        acc *= s
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape, st, writeable=False)


def _new_shapes(rng, n):
    seen, out = set(), []
    while len(out) < n:
        s = tuple(int(v) for v in rng.integers(2, 49, size=4))
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


LAYOUTS = {"contiguous 4-D (coalesces to 1 row)": lambda s: s,
           "permuted 4-D view .transpose(0,2,1,3)": lambda s: _placeholder(s).transpose(0, 2, 1, 3)}


def bench_table_build(cfg, rng):
    """explain() on a miss and on the following hit, public API only (the parts of a miss:
    bench/kernel_level/profile_table_build.py)."""
    shapes = _new_shapes(rng, max(cfg.n_shapes_simplified, cfg.n_shapes_optimized))
    res = {}
    try:
        for variant, n in (("simplified", cfg.n_shapes_simplified),
                           ("optimized", cfg.n_shapes_optimized)):
            dynshape.set_policy(variant)
            for lname, mk in LAYOUTS.items():
                miss, hit, bad = [], [], 0
                gc.disable()
                for s in shapes[:n]:
                    arg = mk(s)
                    dynshape.clear_cache()
                    t = perf()
                    dynshape.explain("relu", arg)
                    t1 = perf()
                    dynshape.explain("relu", arg)
                    t2 = perf()
                    st = dynshape.cache_stats()
                    bad += not (st["misses"] == 1 and st["hits"] == 1)
                    miss.append(t1 - t)
                    hit.append(t2 - t1)
                gc.enable()
                diff = [a - b for a, b in zip(miss, hit)]
                r = {"shapes": n, "explain_miss_s": statistics.median(miss),
                     "explain_hit_s": statistics.median(hit),
                     "build_s": statistics.median(diff),
                     "build_p90_s": sorted(diff)[int(0.9 * (len(diff) - 1))],
                     "unexpected_cache_counts": bad}
                res[f"{variant} | {lname}"] = r
    finally:
        gc.enable()
        dynshape.set_policy("background")
        dynshape.clear_cache()
    return res


# ---- cache-hit calls -----------------------------------------------------------------------------
def bench_dispatch(S, cfg, rng):
    """relu on 1,000 float32 with a warm cache against the peers' calls (public API only)."""
    x = rng.standard_normal(1000).astype(np.float32)
    o = np.empty_like(x)
    np.testing.assert_array_equal(dynshape.run("relu", x, out=o), np.maximum(x, 0))
    x1, o1 = x[:1].copy(), o[:1].copy()
    fns = {"dynshape.run(relu, out=)": lambda: dynshape.run("relu", x, out=o),
           "dynshape.run(relu) alloc": lambda: dynshape.run("relu", x),
           "np.maximum(x, 0, out=o)": lambda: np.maximum(x, 0, out=o),
           "np.maximum on 1 element (NumPy call overhead)": lambda: np.maximum(x1, 0, out=o1)}
    torch = cases.torch
    if torch:
        tx, to = torch.from_numpy(x), torch.from_numpy(np.empty_like(x))
        fns["torch.clamp_min(t, 0, out=)"] = lambda: torch.clamp_min(tx, 0, out=to)
        fns["torch.relu(t) alloc"] = lambda: torch.relu(tx)
    if cases.ort:
        impls, notes = {}, {}
        cases._add_ort(impls, notes, lambda: cases.ort_session(
            [cases.helper.make_node("Relu", ["x"], ["y"])], [("x", x.shape)], [("y", x.shape)]),
            {"x": x}, np.empty_like(x))
        if "ort" in impls:
            fns["ORT Relu (IOBinding, out=)"] = impls["ort"]
            fns["ORT Relu (sess.run, alloc)"] = impls["ort_alloc"]
    stats = S.time(fns, blocks=cfg.dispatch_rounds, block_s=0, sample_s=2e-3)
    return {"rows": {k: {"median_s": s.median, "min_s": s.min} for k, s in stats.items()},
            "numpy_call_overhead_s":
                stats["np.maximum on 1 element (NumPy call overhead)"].median}


# ---- main ---------------------------------------------------------------------------------------
@dataclass
class Config:
    bw_rounds: int
    bw_elements: int
    dispatch_rounds: int
    n_shapes_simplified: int
    n_shapes_optimized: int


def run_cases(S, args, sizes, rng, copy_bw, copy_bw_min):
    known = set(dynshape.known_ops())
    rows, unavailable = [], []
    for case in all_cases():
        if args.only is not None and args.only not in case.label:
            continue
        if case.op not in known:
            unavailable.append((case.label, f"dynshape.known_ops() has no {case.op!r}"))
            continue
        for size in sizes:
            log(f"{case.label} {size} {case.shapes[size]} ...")
            try:
                row = run_case(S, case, size, rng)
            except Exception as exc:
                log(traceback.format_exc())
                row = {"case": case.label, "family": case.family, "op": case.op, "size": size,
                       "shape": str(case.shapes[size]), "bytes": 0, "times": {}, "stats": {},
                       "verified": {}, "notes": {"error": f"{type(exc).__name__}: {exc}"}}
            row["target"], _ = row_target(row, copy_bw)
            row["target_on_minima"], _ = row_target(row, copy_bw_min, "min")
            rows.append(row)
            log(f"   {row.get('wall_s', 0):.1f}s " +
                " ".join(f"{k}={fmt_time(v)}" for k, v in row["times"].items()))
    return rows, unavailable


def main(argv=None):
    ap = session.options(__doc__, "core.json")
    ap.add_argument("--only", default=None, help="run only cases whose label contains TEXT")
    ap.add_argument("--sizes", default=None,
                    help="comma-separated of small,medium,large (default: all; --quick: small)")
    args = ap.parse_args(argv)
    S = session.Session("dynshape core benchmark", args)
    peers = S.start(families=["unary", "binary", "copy", "reduce", "rowwise"],
                    dtypes=["float32"])
    cases.use(peers)
    cfg = (Config(3, 1_000_003, 4, 30, 5) if S.quick else
           Config(15, S1["large"][0], 40, 1000, 150))
    sizes = [s for s in (args.sizes or ("small" if S.quick else ",".join(SIZES))).split(",") if s]
    rng = np.random.default_rng(20240601)
    z = np.linspace(-6, 6, 20001)          # self-check of the NumPy erf (peer and reference)
    erf_err = float(np.max(np.abs(np_erf(z, np.empty_like(z), np.empty_like(z)) -
                                  np.vectorize(math.erf)(z))))
    assert erf_err < 2e-7, erf_err

    log("copy bandwidth...")
    bw = bench_bandwidth(S, cfg, rng)
    rows, unavailable = run_cases(S, args, sizes, rng, bw["best_copy_GBps"] * 1e9,
                                  bw["best_copy_GBps_min"] * 1e9)
    log("table build time...")
    tb = bench_table_build(cfg, rng)
    log("cache-hit calls...")
    disp = bench_dispatch(S, cfg, rng)

    print_cases(S.print, rows, unavailable, bw["best_copy_GBps"] * 1e9)
    S.print()
    print_bandwidth(S.print, bw)
    S.print()
    print_table_build(S.print, tb)
    S.print()
    print_dispatch(S.print, disp)
    S.print()
    targets = summarize_targets(rows, bw, tb, disp)
    S.print("Targets (issue), judged on medians; [on minima: ...] where the fastest samples, "
            "closer to an idle machine, say otherwise:")
    for tg in targets:
        alt = tg.get("verdict_on_minima")
        S.print(f"  {tg['target']:58s} {tg['verdict']}" +
                (f"  [on minima: {alt}]" if alt and alt != tg["verdict"] else ""))
    return S.finish({"cases": rows,
                     "unavailable": [{"case": c, "why": w} for c, w in unavailable],
                     "bandwidth": bw, "table_build": tb, "dispatch": disp,
                     "targets": targets}, vars(cfg) | {"sizes": sizes})


if __name__ == "__main__":
    main()
