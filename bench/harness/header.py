"""What every benchmark report starts with, printed and saved as the JSON ``header``.

:func:`collect` reads the facts a reader needs to judge a figure: the OpenBLAS kernel NumPy
runs (from threadpoolctl, after :mod:`.environment` unset ``OPENBLAS_CORETYPE`` and
``OPENBLAS_L2_SIZE``), the thread counts of NumPy's BLAS, PyTorch, ONNX Runtime and Numba,
the CPU, the Numba cache in use and which drivers the warm-up compiled. :func:`lines`
formats it. Every field degrades to "?" or "absent" rather than failing.
"""
import os
import platform
import subprocess

from . import environment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def blas_info():
    """NumPy's BLAS as threadpoolctl reports it: internal_api, version, architecture (the
    kernel in use) and num_threads; {"error": ...} without threadpoolctl."""
    try:
        import numpy  # noqa: F401  (loads the BLAS threadpoolctl inspects)
        from threadpoolctl import threadpool_info
    except ImportError as exc:
        return {"error": f"threadpoolctl missing ({exc}); install the bench extra"}
    blas = [d for d in threadpool_info() if d.get("user_api") == "blas"]
    mine = [d for d in blas if "numpy" in d.get("filepath", "")] or blas
    if not mine:
        return {"error": "no BLAS loaded"}
    d = mine[0]
    return {k: d.get(k) for k in ("internal_api", "version", "architecture", "num_threads",
                                  "threading_layer", "filepath")}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def numba_cache():
    """Where Numba keeps compiled drivers for this process (the user's own setting)."""
    if os.environ.get("DYNSHAPE_PACKAGE"):
        return f"kernel package {os.environ['DYNSHAPE_PACKAGE']} (DYNSHAPE_PACKAGE)"
    d = os.environ.get("NUMBA_CACHE_DIR")
    return f"{d} (NUMBA_CACHE_DIR)" if d else "next to the installed sources (__pycache__)"


def _git(*args):
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def collect(peers, warm=None):
    """The header dict. ``peers``: a :class:`.peers.Peers`; ``warm``: the list dynshape.warm
    returned ((family, dtype, seconds, compiled) tuples), or None when nothing was warmed."""
    import numba
    import numpy as np

    import dynshape
    info = {"cpu_model": cpu_model(), "logical_cpus": os.cpu_count(),
            "python": platform.python_version(), "numpy": np.__version__,
            "numba": numba.__version__, "dynshape": dynshape.__version__,
            "catalog": dynshape.CATALOG.hash, "blas": blas_info(),
            "environment": dict(environment.state or {"unset": {}, "bound": None},
                                prepared=environment.state is not None),
            "openmp": {k: os.environ.get(k) for k in ("OMP_PROC_BIND", "OMP_PLACES",
                                                      "OMP_NUM_THREADS")},
            "numba_threads": numba.get_num_threads(), "numba_cache": numba_cache(),
            "loadavg_start": os.getloadavg(), "git_commit": _git("rev-parse", "--short", "HEAD"),
            "notes": dict(peers.notes)}
    try:
        info["numba_threading_layer"] = numba.threading_layer()
    except Exception:                  # no parallel function has run yet
        info["numba_threading_layer"] = "not started"
    if peers.torch:
        info["torch"] = peers.torch.__version__
        info["torch_threads"] = peers.torch.get_num_threads()
    if peers.ort:
        info["onnxruntime"] = peers.ort.__version__
        info["ort_intra_op_threads"] = environment.THREADS
    if warm is not None:
        info["warm"] = {"drivers": len(warm), "seconds": sum(w[2] for w in warm),
                        "compiled": [f"{w[0]} {w[1]}" for w in warm if w[3]]}
    return info


def lines(info, title):
    """The header as printable lines."""
    b = info["blas"]
    env = info["environment"]
    if "error" in b:
        blas = f"NumPy BLAS: ? ({b['error']})"
    else:
        blas = (f"NumPy BLAS: {b['internal_api']} {b['version']}, kernel {b['architecture']}, "
                f"{b['num_threads']} threads")
    if not env.get("prepared"):
        blas += "; environment NOT prepared by the harness"
    elif env["unset"]:
        blas += " (unset here: " + ", ".join(f"{k}={v}" for k, v in env["unset"].items()) + ")"
    else:
        blas += " (OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE not set)"
    torch = (f"PyTorch {info['torch']} {info['torch_threads']}" if "torch" in info
             else "PyTorch absent")
    ort = (f"ONNX Runtime {info['onnxruntime']} {info['ort_intra_op_threads']} intra-op"
           if "onnxruntime" in info else "ONNX Runtime absent")
    omp = info["openmp"]
    out = [f"== {title} ==",
           f"CPU: {info['cpu_model']}, {info['logical_cpus']} logical cpus; load average "
           f"{info['loadavg_start'][0]:.2f}; dynshape {info['dynshape']} (catalog "
           f"{info['catalog']}, git {info['git_commit'] or '?'})",
           blas,
           f"threads: NumPy BLAS {b.get('num_threads', '?')}, {torch}, {ort}, Numba "
           f"{info['numba_threads']} ({info['numba_threading_layer']}); NumPy ufuncs 1; "
           f"OpenMP binding {omp['OMP_PROC_BIND'] or 'off'}/{omp['OMP_PLACES'] or '-'}",
           f"Numba cache: {info['numba_cache']}"]
    w = info.get("warm")
    if w is not None:
        comp = (f"compiled {len(w['compiled'])}: {', '.join(w['compiled'])}" if w["compiled"]
                else "none compiled")
        out.append(f"kernel warm-up: {w['drivers']} drivers in {w['seconds']:.1f} s, {comp}")
    for note in info["notes"].values():
        out.append(f"note: {note}")
    return out
