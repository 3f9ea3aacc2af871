"""Core benchmark: dynshape vs NumPy vs PyTorch (CPU) vs ONNX Runtime, side by side in one process.

    python -m bench.run_core [--quick] [--only TEXT] [--sizes small,medium,large]
                             [--json PATH] [--no-torch] [--no-ort]

Every dynshape result (and every peer's) is checked against a NumPy float64 reference once per
case before anything is timed; a wrong answer is reported, never timed. Times are medians of
repeated perf_counter samples after warm-up. Sections: op cases (three sizes each, odd shapes),
copy bandwidth, table build time for new shapes, cache-hit dispatch overhead (with a stage
breakdown), and the issue's targets, met or missed. Results go to bench/results/core.json.
"""
import os
import sys


# Bind OpenMP threads (Numba's omp layer and PyTorch) one per core before either runtime
# starts. On a loaded 2-core machine an unbound worker can land on the core where the
# spinning master waits for it, and every parallel region then waits for a scheduler tick
# (4-16 ms medians instead of ~60 us for 1e6 elements). --no-bind measures without it.
if "--no-bind" not in sys.argv:
    os.environ.setdefault("OMP_PROC_BIND", "true")
    os.environ.setdefault("OMP_PLACES", "cores")

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import traceback  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bench import cases, profile_dispatch  # noqa: E402
    from bench.cases import S1, SIZES, THREADS, all_cases, np_erf  # noqa: E402
    from bench.timing import fmt_time, interleaved, measure, perf  # noqa: E402
else:
    from . import cases, profile_dispatch  # noqa: E402
    from .cases import S1, SIZES, THREADS, all_cases, np_erf  # noqa: E402
    from .timing import fmt_time, interleaved, measure, perf  # noqa: E402

import dynshape  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

IMPLS = ("ds_out", "ds_alloc", "numpy", "torch_out", "torch_alloc", "ort")
IMPL_TITLES = {"ds_out": "dyn out=", "ds_alloc": "dyn alloc", "numpy": "numpy",
               "torch_out": "torch out=", "torch_alloc": "torch alloc", "ort": "ORT"}
# (dynshape impl, peer impl) pairs behind the ratio columns
PAIRS = (("numpy", "ds_out", "numpy"), ("torch out=", "ds_out", "torch_out"),
         ("torch alloc", "ds_alloc", "torch_alloc"), ("ORT", "ds_out", "ort"))

TARGET_BW = 0.85            # large elementwise: >= 85% of the best copy bandwidth
TARGET_DISPATCH_S = 5e-6    # cache hit: <= 5 us of dispatch over kernel time
TARGET_TABLE_S = 20e-6      # simplified table for a new 4-D shape: <= 20 us
NOISY = 2.0                 # a median above NOISY x the fastest sample is flagged


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---- running a case -------------------------------------------------------------------------
def _as_numpy(res):
    torch = cases.torch
    if torch is not None and isinstance(res, torch.Tensor):
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


def run_case(case, size, rng, cfg):
    """Verify every implementation, then time each in its own block of back-to-back calls
    (thread pools stay warm, as in a serving loop). Large elementwise cases also time the
    best plain copy of the output's size right after, under the same machine load."""
    row = {"case": case.label, "family": case.family, "op": case.op, "size": size,
           "times": {}, "stats": {}, "verified": {}, "notes": {}}
    t0 = perf()
    built = case.build(size, rng)
    row.update(shape=built.shape, bytes=built.nbytes, notes=dict(built.notes))
    for impl in IMPLS:
        fn = built.impls.get(impl)
        if fn is None:
            continue
        err, first_s = verify(impl, fn, built)
        row["verified"][impl] = "ok" if err is None else err
        if err is not None:
            row["notes"][impl] = err
            continue
        st = measure(fn, cfg.budget, cfg.min_samples, first_s=first_s)
        row["times"][impl] = st.median
        row["stats"][impl] = st.as_dict()
    if case.family == "elementwise" and size == "large" and "ds_out" in row["times"]:
        row["copy_ref"] = copy_reference(built.ref.size, cfg)
    row["wall_s"] = perf() - t0
    del built
    gc.collect()
    return row


_PCOPY = []


def copy_reference(n, cfg):
    """The best plain copy of ``n`` float32: np.copyto and a two-thread Numba copy, each
    timed like the implementations; GB/s counts read + write."""
    if not _PCOPY:
        _PCOPY.append(_parallel_copy())
    pcopy = _PCOPY[0]
    src = np.ones(n, np.float32)
    dst = [np.empty_like(src), np.empty_like(src)]
    res = {}
    for name, fn in (("np.copyto", lambda: np.copyto(dst[0], src)),
                     ("numba prange copy", lambda: pcopy(src, dst[1]))):
        fn()
        st = measure(fn, cfg.budget, cfg.min_samples, first_s=1.0)
        res[name] = {"median_s": st.median, "min_s": st.min}
    moved = 2 * src.nbytes
    res["best_GBps"] = max(moved / r["median_s"] for r in list(res.values())[:2]) / 1e9
    res["best_GBps_min"] = max(moved / r["min_s"] for r in list(res.values())[:2]) / 1e9
    return res


# ---- copy bandwidth ---------------------------------------------------------------------------
def _parallel_copy():
    from numba import njit, prange

    @njit(parallel=True, cache=True, nogil=True)
    def pcopy(src, dst):
        for i in prange(src.shape[0]):
            dst[i] = src[i]
    return pcopy


def bench_bandwidth(cfg, rng):
    n = S1["large"][0]
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
    stats = interleaved(fns, rounds=cfg.bw_rounds, sample_s=0)
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


def _combination_alone(arg, variant):
    """Seconds of the miss path's parts for one shape: executor._tiling (the Tiling problem),
    Tiling.simplified()/optimized() (the combination alone) and executor.build_table
    (both plus ParamTable construction and bind); and the number of entries."""
    from dynshape import ops
    from dynshape.runtime import plane as executor
    a = _placeholder(arg) if isinstance(arg, tuple) else arg
    with ops.planning():
        launch = ops.get("relu").prepare([a], None, {})
    p = executor._plane_of(launch)
    key = executor.table_key(launch, p)
    t = perf()
    tiling = executor._tiling(launch, p, key)
    t_tiling = perf() - t
    t = perf()
    comb = tiling.simplified() if variant == "simplified" else tiling.optimized()
    t_comb = perf() - t
    t = perf()
    executor.build_table(launch, p, key, variant)
    t_build = perf() - t
    return t_tiling, t_comb, t_build, len(comb.entries)


def bench_table_build(cfg, rng):
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
                try:
                    comb = [_combination_alone(mk(s), variant) for s in shapes[:min(n, 200)]]
                    r["tiling_s"] = statistics.median(c[0] for c in comb)
                    r["combination_s"] = statistics.median(c[1] for c in comb)
                    r["build_table_s"] = statistics.median(c[2] for c in comb)
                    r["entries_median"] = statistics.median(c[3] for c in comb)
                except Exception as exc:
                    r["combination_error"] = f"{type(exc).__name__}: {exc}"
                res[f"{variant} | {lname}"] = r
    finally:
        gc.enable()
        dynshape.set_policy("background")
        dynshape.clear_cache()
    return res


# ---- cache-hit dispatch -------------------------------------------------------------------------
def bench_dispatch(cfg, rng):
    ctx = profile_dispatch.context("relu", 1000)
    x, o = ctx["x"], ctx["o"]
    np.testing.assert_array_equal(dynshape.run("relu", x, out=o), np.maximum(x, 0))
    x1, o1 = x[:1].copy(), o[:1].copy()
    fns = {"dynshape.run(relu, out=)": lambda: dynshape.run("relu", x, out=o),
           "dynshape.run(relu) alloc": lambda: dynshape.run("relu", x),
           "kernel: compiled driver called directly": profile_dispatch.kernel_call(ctx),
           "np.maximum(x, 0, out=o)": lambda: np.maximum(x, 0, out=o),
           "np.maximum on 1 element (NumPy call overhead)": lambda: np.maximum(x1, 0, out=o1)}
    torch = cases.torch
    if torch:
        tx, to = torch.from_numpy(x), torch.from_numpy(np.empty_like(x))
        fns["torch.clamp_min(t, 0, out=)"] = lambda: torch.clamp_min(tx, 0, out=to)
    if cases.ort:
        try:
            fns["ORT Relu (IOBinding)"] = cases.ort_bound(cases.ort_session(
                [cases.helper.make_node("Relu", ["x"], ["y"])], [("x", x.shape)],
                [("y", x.shape)]),
                {"x": x}, np.empty_like(x))
        except Exception as exc:
            log(f"ORT relu session failed: {exc}")
    stats = interleaved(fns, rounds=cfg.dispatch_rounds)
    res = {"rows": {k: {"median_s": s.median, "min_s": s.min} for k, s in stats.items()}}
    run_t = stats["dynshape.run(relu, out=)"]
    ker_t = stats["kernel: compiled driver called directly"]
    res["overhead_s"] = run_t.median - ker_t.median
    res["overhead_min_s"] = run_t.min - ker_t.min
    res["numpy_call_overhead_s"] = stats["np.maximum on 1 element (NumPy call overhead)"].median
    try:
        rows, ov, _ = profile_dispatch.breakdown(rounds=cfg.dispatch_rounds,
                                                 serial=cfg.serial_driver)
        res["stages"] = [{"stage": n, "median_s": md, "min_s": mn} for n, md, mn in rows]
        res["cprofile"] = profile_dispatch.cprofile_rows(n=5000 if cfg.dispatch_rounds < 20
                                                         else 20000)
        res["numba_overhead"] = [{"what": n, "median_s": md, "min_s": mn} for n, md, mn in ov]
    except Exception as exc:
        res["stages_error"] = f"{type(exc).__name__}: {exc}"
        log(traceback.format_exc())
    return res


# ---- targets ------------------------------------------------------------------------------------
def _times(row, stat):
    """Per implementation seconds: the medians, or the fastest samples (stat="min")."""
    if stat == "median":
        return row["times"]
    return {k: v["min"] for k, v in row["stats"].items()}


def _faster(t, ds, peer):
    if ds not in t or peer not in t:
        return None
    return t[ds] < t[peer]


def row_copy_bw(row, copy_bw, stat="median"):
    """Bytes/s of the best plain copy for this row: measured with the case when it was."""
    ref = row.get("copy_ref")
    if ref:
        return 1e9 * (ref["best_GBps"] if stat == "median" else ref["best_GBps_min"])
    return copy_bw


def row_target(row, copy_bw, stat="median"):
    """(verdict text, reasons) of the issue's target for this row, or ("-", None)."""
    t = _times(row, stat)
    if "ds_out" not in t:
        return ("-", None)
    copy_bw = row_copy_bw(row, copy_bw, stat)
    reasons = []
    if row["family"] == "elementwise":
        if row["size"] != "large":
            return ("-", None)
        pct = 100 * row["bytes"] / t["ds_out"] / copy_bw
        if pct < 100 * TARGET_BW:
            reasons.append(f"{pct:.0f}% of copy bw")
        peers = (("ds_out", "numpy", "numpy"), ("ds_out", "torch_out", "torch out="),
                 ("ds_alloc", "torch_alloc", "torch alloc"))
    else:
        peers = (("ds_out", "torch_out", "torch out="), ("ds_alloc", "torch_alloc", "torch alloc"))
        if all(_faster(t, ds, peer) is None for ds, peer, _ in peers):
            return ("-", None)              # no PyTorch result to compare with
    for ds, peer, title in peers:
        if _faster(t, ds, peer) is False:
            reasons.append(f"slower than {title}")
    return ("MET" if not reasons else "MISSED: " + ", ".join(reasons)), reasons


# ---- report ------------------------------------------------------------------------------------
def machine_info():
    import numba
    info = {"cpu_model": platform.processor() or "?", "logical_cpus": os.cpu_count(),
            "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else None, "python": platform.python_version(), "platform": platform.platform(),
            "numpy": np.__version__, "numba": numba.__version__,
            "numba_threads": numba.get_num_threads(), "dynshape": dynshape.__version__,
            "catalog": dynshape.CATALOG.hash, "known_ops": dynshape.known_ops()}
    try:
        with open("/proc/cpuinfo") as f:
            txt = f.read()
        for line in txt.splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        flags = next((ln for ln in txt.splitlines() if ln.startswith("flags")), "")
        info["simd"] = [f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512_bf16")
                        if f" {f}" in flags]
        cores = {ln.split(":")[1].strip() for ln in txt.splitlines() if ln.startswith("core id")}
        info["physical_cores"] = len(cores) or None
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            info["mem_total_gb"] = round(int(f.readline().split()[1]) / 2 ** 20, 1)
    except OSError:
        pass
    try:
        import llvmlite
        info["llvmlite"] = llvmlite.__version__
    except ImportError:
        pass
    if cases.torch:
        info["torch"] = cases.torch.__version__
        info["torch_threads"] = cases.torch.get_num_threads()
    if cases.ort:
        info["onnxruntime"] = cases.ort.__version__
        info["onnx"] = cases.onnx.__version__
        info["ort_intra_op_threads"] = THREADS
    try:
        root = os.path.dirname(HERE)
        info["git_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                                            capture_output=True, text=True).stdout.strip()
        info["git_dirty"] = bool(subprocess.run(["git", "status", "--porcelain", "--",
                                                 "dynshape", "kernels"], cwd=root,
                                                capture_output=True, text=True).stdout.strip())
    except OSError:
        pass
    info["omp_env"] = {k: os.environ.get(k) for k in ("OMP_PROC_BIND", "OMP_PLACES",
                                                      "OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    info["numba_cache_dir"] = os.environ.get("NUMBA_CACHE_DIR")
    info["loadavg_start"] = os.getloadavg()
    return info


class Printer:
    def __init__(self):
        self.lines = []

    def __call__(self, s=""):
        print(s, flush=True)
        self.lines.append(s)


def _ratio_cell(row, ds, peer):
    t = row["times"]
    if ds not in t or peer not in t:
        return "-"
    r = t[ds] / t[peer]
    return f"{r:.2f} ({1 / r:.2f}x)"


def print_cases(P, rows, unavailable, copy_bw):
    head = f"{'case':22s} {'size':6s} {'shape':24s}" + "".join(
        f" {IMPL_TITLES[i]:>11s}" for i in IMPLS)
    P("Times: median per call (dyn = dynshape; numpy uses out=/preallocated scratch; "
      "ORT = one-node model, IOBinding into a preallocated output;")
    P(f"       * = median more than {NOISY:g}x the fastest sample: scheduling noise, "
      "minima are in the JSON)")
    P(head)
    P("-" * len(head))
    for row in rows:
        cells = []
        for i in IMPLS:
            if i in row["times"]:
                st = row["stats"][i]
                noisy = st["median"] > NOISY * st["min"]
                cells.append(fmt_time(row["times"][i]) + ("*" if noisy else ""))
            elif i in row["verified"] and row["verified"][i] != "ok":
                cells.append("WRONG" if "WRONG" in row["verified"][i] else "ERROR")
            else:
                cells.append("n/a")
        P(f"{row['case']:22s} {row['size']:6s} {row['shape'][:24]:24s}" +
          "".join(f" {c:>11s}" for c in cells))
    for label, why in unavailable:
        P(f"{label:22s} {'all':6s} not available in this build ({why})")
    P()
    P("Ratios: dynshape time / peer time (speedup = peer / dynshape, >1x means dynshape "
      "is faster); GB/s = bytes an ideal kernel moves / dyn out= time;")
    P("        %copy = that bandwidth against the best plain copy of the output's size, "
      "timed right after the case (large sizes only: smaller ones run from cache)")
    head = (f"{'case':22s} {'size':6s}" + "".join(f" {'vs ' + p[0]:>15s}" for p in PAIRS) +
            f" {'GB/s':>6s} {'%copy':>6s}  target")
    P(head)
    P("-" * len(head))
    for row in rows:
        t = row["times"]
        gbs = row["bytes"] / t["ds_out"] / 1e9 if "ds_out" in t else None
        pct = (f"{100 * gbs * 1e9 / row_copy_bw(row, copy_bw):5.0f}%"
               if gbs and row["size"] == "large" else f"{'-':>6s}")
        P(f"{row['case']:22s} {row['size']:6s}" +
          "".join(f" {_ratio_cell(row, ds, peer):>15s}" for _, ds, peer in PAIRS) +
          (f" {gbs:6.1f} {pct}" if gbs else f" {'-':>6s} {'-':>6s}") + f"  {row['target']}" +
          (f"  [on minima: {row['target_on_minima']}]"
           if row.get("target_on_minima", row["target"]) != row["target"] else ""))
    notes = [(row, k, v) for row in rows for k, v in row["notes"].items()
             if not (k == "dynshape call" and v.startswith(row["op"]))]
    if notes:
        P()
        P("Notes:")
        for row, k, v in notes:
            P(f"  {row['case']} {row['size']} [{k}]: {v}")


def print_bandwidth(P, bw):
    P(f"Copy bandwidth, float32 x {bw['elements']} (read + write = {bw['bytes_moved'] / 1e6:.0f} MB):")
    for k, r in bw["rows"].items():
        P(f"  {k:34s} {fmt_time(r['median_s']):>9s}  {r['GBps']:6.1f} GB/s")
    P(f"  best plain copy: {bw['best_copy']} = {bw['best_copy_GBps']:.1f} GB/s; dynshape relu "
      f"= {bw['relu_GBps']:.1f} GB/s = {bw['relu_pct_copy']:.0f}% of it "
      f"(target >= {100 * TARGET_BW:.0f}%: {'MET' if bw['relu_pct_copy'] >= 100 * TARGET_BW else 'MISSED'})")
    P(f"  on the fastest samples: best copy {bw['best_copy_GBps_min']:.1f} GB/s, relu "
      f"{bw['relu_pct_copy_min']:.0f}% of it")


def print_table_build(P, tb):
    P("Table build for never-seen 4-D shapes (relu float32; clear_cache() before each shape; "
      "build = explain on a miss - explain on the following hit):")
    P(f"  {'variant | layout':50s} {'shapes':>6s} {'miss':>8s} {'hit':>8s} {'build':>8s} "
      f"{'p90':>8s} | {'b_table':>8s} {'Tiling':>8s} {'comb.':>8s} {'rest':>8s} {'entries':>7s}")
    for k, r in tb.items():
        rest = (r["build_table_s"] - r["tiling_s"] - r["combination_s"]
                if "build_table_s" in r else None)
        rest = rest if rest is None or rest > 0 else None     # below the noise of ms timings
        P(f"  {k:50s} {r['shapes']:6d} {fmt_time(r['explain_miss_s']):>8s} "
          f"{fmt_time(r['explain_hit_s']):>8s} {fmt_time(r['build_s']):>8s} "
          f"{fmt_time(r['build_p90_s']):>8s} | {fmt_time(r.get('build_table_s')):>8s} "
          f"{fmt_time(r.get('tiling_s')):>8s} {fmt_time(r.get('combination_s')):>8s} "
          f"{fmt_time(rest):>8s} {r.get('entries_median', 0):7.0f}")
        if r.get("unexpected_cache_counts"):
            P(f"    WARNING: {r['unexpected_cache_counts']} shapes did not give exactly one miss "
              f"then one hit")
        if "combination_error" in r:
            P(f"    combination alone: not measured ({r['combination_error']})")
    P("  b_table = executor.build_table = Tiling (executor._tiling) + comb. (Tiling.simplified()/"
      "optimized() alone) + rest (ParamTable + bind)")


def print_dispatch(P, d):
    P("Cache-hit dispatch, relu float32 x 1000 (interleaved rounds; median / min):")
    for k, r in d["rows"].items():
        P(f"  {k:48s} {r['median_s'] * 1e6:8.2f}us {r['min_s'] * 1e6:8.2f}us")
    ok = d["overhead_s"] <= TARGET_DISPATCH_S
    P(f"  dispatch overhead = run(out=) - kernel = {d['overhead_s'] * 1e6:.2f}us median "
      f"({d['overhead_min_s'] * 1e6:.2f}us on minima); NumPy call overhead "
      f"{d['numpy_call_overhead_s'] * 1e6:.2f}us; target <= {TARGET_DISPATCH_S * 1e6:.0f}us: "
      f"{'MET' if ok else 'MISSED'}")
    if "stages" in d:
        P("  Where the time goes (each stage timed alone, medians):")
        profile_dispatch.print_breakdown(
            [(s["stage"], s["median_s"], s["min_s"]) for s in d["stages"]],
            [(s["what"], s["median_s"], s["min_s"]) for s in d["numba_overhead"]],
            out=lambda s: P("  " + s))
        if d.get("cprofile"):
            P("  cProfile of dynshape.run (tottime per call; the profiler inflates small "
              "functions, read as relative weights):")
            for r in d["cprofile"]:
                P(f"    {r['us_per_call']:7.2f}us  {r['calls_per_run']:4.1f} calls/run  "
                  f"{r['function']}")
    elif "stages_error" in d:
        P(f"  stage breakdown failed: {d['stages_error']}")


def summarize_targets(rows, bw, tb, d):
    out = []
    for row in rows:
        if row["target"] != "-":
            out.append({"target": f"{row['case']} {row['size']}", "verdict": row["target"],
                        "verdict_on_minima": row.get("target_on_minima")})
    out.append({"target": f"large relu >= {100 * TARGET_BW:.0f}% of copy bandwidth",
                "verdict": ("MET" if bw["relu_pct_copy"] >= 100 * TARGET_BW else "MISSED") +
                f" ({bw['relu_pct_copy']:.0f}%)",
                "verdict_on_minima": ("MET" if bw["relu_pct_copy_min"] >= 100 * TARGET_BW
                                      else "MISSED") + f" ({bw['relu_pct_copy_min']:.0f}%)"})
    out.append({"target": f"cache-hit dispatch <= {TARGET_DISPATCH_S * 1e6:.0f}us over kernel",
                "verdict": ("MET" if d["overhead_s"] <= TARGET_DISPATCH_S else "MISSED") +
                f" ({d['overhead_s'] * 1e6:.1f}us)"})
    for k, r in tb.items():
        if k.startswith("simplified"):
            out.append({"target": f"simplified table <= {TARGET_TABLE_S * 1e6:.0f}us ({k.split('| ')[1]})",
                        "verdict": ("MET" if r["build_s"] <= TARGET_TABLE_S else "MISSED") +
                        f" (build {r['build_s'] * 1e6:.1f}us, whole miss "
                        f"{r['explain_miss_s'] * 1e6:.1f}us)"})
    return out


# ---- main ---------------------------------------------------------------------------------------
@dataclass
class Config:
    budget: float
    min_samples: int
    bw_rounds: int
    dispatch_rounds: int
    n_shapes_simplified: int
    n_shapes_optimized: int
    serial_driver: bool


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="about one minute instead of five")
    ap.add_argument("--only", default=None, help="run only cases whose label contains TEXT")
    ap.add_argument("--sizes", default=",".join(SIZES))
    ap.add_argument("--json", default=os.path.join(HERE, "results", "core.json"))
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--no-bind", action="store_true",
                    help="do not set OMP_PROC_BIND=true/OMP_PLACES=cores (see the top of the file)")
    ap.add_argument("--serial-driver", action="store_true",
                    help="compile a serial copy of the relu driver to split fork/join cost (~2 s)")
    args = ap.parse_args(argv)
    if args.no_torch:
        cases.torch = None
    if args.no_ort:
        cases.ort = None
    cfg = (Config(0.08, 3, 5, 12, 300, 40, args.serial_driver) if args.quick else
           Config(0.5, 7, 15, 40, 1000, 150, args.serial_driver))
    sizes = [s for s in args.sizes.split(",") if s]
    t_start = perf()
    if cases.torch:
        cases.torch.set_num_threads(THREADS)
    P = Printer()
    info = machine_info()
    from dynshape.warming import cache_location
    log(f"warming dynshape kernels from {cache_location()} (drivers missing there are "
        f"compiled now, and said so):")
    t = perf()
    warm_errors = {}
    compiled = 0
    for fam in dynshape.CATALOG.families:
        try:
            compiled += sum(1 for d in dynshape.warm([fam], progress=sys.stderr) if d[3])
        except Exception as exc:
            warm_errors[fam] = f"{type(exc).__name__}: {exc}"
    info["warm_s"] = perf() - t
    info["drivers_compiled"] = compiled
    if warm_errors:
        info["warm_errors"] = warm_errors
    import numba
    try:
        info["numba_threading_layer"] = numba.threading_layer()
    except Exception:
        info["numba_threading_layer"] = "?"
    known = set(dynshape.known_ops())
    rng = np.random.default_rng(20240601)

    # self-check of the NumPy erf used for gelu (peer and reference)
    z = np.linspace(-6, 6, 20001)
    erf_err = float(np.max(np.abs(np_erf(z, np.empty_like(z), np.empty_like(z)) -
                                  np.vectorize(math.erf)(z))))
    assert erf_err < 2e-7, erf_err

    log("copy bandwidth...")
    bw = bench_bandwidth(cfg, rng)
    copy_bw = bw["best_copy_GBps"] * 1e9
    copy_bw_min = bw["best_copy_GBps_min"] * 1e9

    rows, unavailable = [], []
    selected = [c for c in all_cases() if args.only is None or args.only in c.label]
    for case in selected:
        if case.op not in known:
            unavailable.append((case.label, f"dynshape.known_ops() has no {case.op!r}"))
            log(f"{case.label}: not available in this build")
            continue
        for size in sizes:
            log(f"{case.label} {size} {case.shapes[size]} ...")
            try:
                row = run_case(case, size, rng, cfg)
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

    log("table build time...")
    tb = bench_table_build(cfg, rng)
    log("dispatch overhead...")
    disp = bench_dispatch(cfg, rng)
    info["loadavg_end"] = os.getloadavg()

    P(f"dynshape core benchmark ({'quick' if args.quick else 'full'}) on {info['cpu_model']}, "
      f"{info['logical_cpus']} cpus; numpy {info['numpy']}, numba {info['numba']} "
      f"({info['numba_threading_layer']}, {info['numba_threads']} threads), torch "
      f"{info.get('torch', '-')} ({info.get('torch_threads', '-')} threads), onnxruntime "
      f"{info.get('onnxruntime', '-')} ({THREADS} intra-op threads); catalog {info['catalog']}")
    P(f"load average at start {info['loadavg_start'][0]:.2f}, at end "
      f"{info['loadavg_end'][0]:.2f} (above ~0.5 the machine is shared and timings are noisy); "
      f"kernel warm-up {info['warm_s']:.1f}s; OpenMP binding "
      f"{info['omp_env']['OMP_PROC_BIND'] or 'off'}/{info['omp_env']['OMP_PLACES'] or '-'}")
    if warm_errors:
        P(f"WARNING: kernels failed to warm: {warm_errors}")
    P()
    print_cases(P, rows, unavailable, copy_bw)
    P()
    print_bandwidth(P, bw)
    P()
    print_table_build(P, tb)
    P()
    print_dispatch(P, disp)
    P()
    targets = summarize_targets(rows, bw, tb, disp)
    P("Targets (issue), judged on medians; [on minima: ...] where the fastest samples, "
      "closer to an idle machine, say otherwise:")
    for tg in targets:
        alt = tg.get("verdict_on_minima")
        P(f"  {tg['target']:58s} {tg['verdict']}" +
          (f"  [on minima: {alt}]" if alt and alt != tg["verdict"] else ""))
    wall = perf() - t_start
    P()
    P(f"total wall time {wall:.0f}s")

    result = {"machine": info, "config": vars(cfg) | {"quick": args.quick, "sizes": sizes},
              "cases": rows, "unavailable": [{"case": c, "why": w} for c, w in unavailable],
              "bandwidth": bw, "table_build": tb, "dispatch": disp, "targets": targets,
              "wall_s": wall, "printed": P.lines}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1, default=str)
    log(f"wrote {args.json}")
    return result


if __name__ == "__main__":
    main()
