"""Benchmark of the vectorizable math functions (kernels/cpu/mathfuncs.py).

For N = 1e7 float32 and float64 elements it times, per function (best of
--repeat runs, milliseconds):

* ``ours 1T``   : ``@njit`` loop ``for i in range(n): o[i] = mf.f(x[i])``
* ``ours 2T``   : the same loop with ``prange`` under ``@njit(parallel=True)``
                  and ``numba.set_num_threads(2)``
* ``numpy``     : NumPy's ufunc(s) with preallocated outputs (NumPy is single
                  threaded; sigmoid/silu/gelu_tanh are composed in place from
                  np.exp / np.tanh; NumPy has no erf)
* ``numba-libm``: the same @njit loop calling ``np.exp`` / ``math.erf`` ...,
                  i.e. what Numba does without this module (scalar libm calls)
* ``torch 1T/2T``: torch CPU (if installed), for reference

It also checks that the single-thread loop was vectorized (AVX-512 ``zmm`` or
AVX2 ``ymm`` packed instructions in its assembly) and that no libm call is
left in it.

Usage:  python bench/bench_mathfuncs.py [--n 10000000] [--repeat 5] [names...]
"""
import argparse
import math
import os
import re
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
try:
    from dynshape_kernels.cpu import mathfuncs as mf  # installed package
except ImportError:  # pragma: no cover - running from the source tree
    from kernels.cpu import mathfuncs as mf

import numba
from numba import njit, prange


def make_loops(f):
    @njit
    def serial(x, o):
        for i in range(x.size):
            o[i] = f(x[i])

    @njit(parallel=True)
    def parallel(x, o):
        for i in prange(x.size):
            o[i] = f(x[i])

    return serial, parallel


# What Numba compiles without this module: scalar libm calls.
_LIBM = {
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
    "tanh": np.tanh, "erf": math.erf, "erfc": math.erfc,
}


def make_libm_loop(g):
    @njit
    def serial(x, o):
        for i in range(x.size):
            o[i] = g(x[i])
    return serial


def _np_sigmoid(x, o):
    np.negative(x, out=o)
    np.exp(o, out=o)
    o += 1
    np.reciprocal(o, out=o)


def _np_silu(x, o):
    np.negative(x, out=o)
    np.exp(o, out=o)
    o += 1
    np.divide(x, o, out=o)


def _np_gelu_tanh(x, o):
    np.multiply(x, x, out=o)
    o *= 0.044715
    o += 1
    o *= x
    o *= math.sqrt(2 / math.pi)
    np.tanh(o, out=o)
    o += 1
    o *= x
    o *= 0.5


NUMPY = {
    "exp": lambda x, o: np.exp(x, out=o),
    "expm1": lambda x, o: np.expm1(x, out=o),
    "log": lambda x, o: np.log(x, out=o),
    "log1p": lambda x, o: np.log1p(x, out=o),
    "tanh": lambda x, o: np.tanh(x, out=o),
    "sigmoid": _np_sigmoid,
    "silu": _np_silu,
    "gelu_tanh": _np_gelu_tanh,
}


def torch_fns():
    try:
        import torch
    except ImportError:
        return None, {}
    F = torch.nn.functional
    return torch, {
        "exp": lambda x, o: torch.exp(x, out=o),
        "expm1": lambda x, o: torch.expm1(x, out=o),
        "log": lambda x, o: torch.log(x, out=o),
        "log1p": lambda x, o: torch.log1p(x, out=o),
        "tanh": lambda x, o: torch.tanh(x, out=o),
        "sigmoid": lambda x, o: torch.sigmoid(x, out=o),
        "silu": lambda x, o: o.copy_(F.silu(x)),
        "erf": lambda x, o: torch.erf(x, out=o),
        "erfc": lambda x, o: torch.erfc(x, out=o),
        "gelu_erf": lambda x, o: o.copy_(F.gelu(x)),
        "gelu_tanh": lambda x, o: o.copy_(F.gelu(x, approximate="tanh")),
    }


def best_ms(fn, repeat, clock=time.perf_counter):
    fn()  # warm up (and compile)
    ts = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        ts.append(clock() - t0)
    return 1e3 * min(ts)


def vector_report(disp, dtype):
    nbt = numba.from_dtype(np.dtype(dtype))
    sig = [s for s in disp.signatures if s[0].dtype == nbt][0]
    asm = disp.inspect_asm(sig)
    suf = "ps" if dtype == np.float32 else "pd"
    nz = len(re.findall(r"\bv\w+" + suf + r"\b[^\n]*%zmm", asm))
    ny = len(re.findall(r"\bv\w+" + suf + r"\b[^\n]*%ymm", asm))
    libm = [l for l in asm.splitlines()
            if re.search(r"call\w*\s+.*\b(exp|log|tanh|erf)", l)]
    if libm:
        return "LIBM CALL"
    return f"zmm:{nz}" if nz else (f"ymm:{ny}" if ny else "SCALAR")


def input_for(name, dtype, n, rng):
    if name in ("log",):
        return rng.uniform(1e-3, 1e3, n).astype(dtype)
    if name in ("log1p",):
        return rng.uniform(-0.9, 1e3, n).astype(dtype)
    if name in ("exp", "expm1"):
        return rng.uniform(-80, 80, n).astype(dtype)
    if name in ("erf", "erfc"):
        # |x| > ~9.2 makes erfc's float32 result denormal, which is slow on
        # x86 (for every implementation); keep the inputs in the normal range
        return rng.uniform(-6, 6, n).astype(dtype)
    return rng.uniform(-10, 10, n).astype(dtype)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time the single-thread columns with process CPU time instead of "
                         "wall time (robust on a shared, oversubscribed machine; the 2T "
                         "columns always use wall time)")
    ap.add_argument("names", nargs="*", default=list(mf.FUNCTIONS))
    args = ap.parse_args(argv)

    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    torch, TORCH = (None, {}) if args.no_torch else torch_fns()
    rng = np.random.default_rng(0)
    c1 = time.process_time if args.cpu_time else time.perf_counter
    import llvmlite.binding as llvm
    feats = llvm.get_host_cpu_features()
    isa = [k for k in ("avx512f", "avx2", "fma") if feats.get(k, False)]
    print(f"n = {args.n:.0e}, best of {args.repeat}, numba {numba.__version__}, "
          f"threads for 2T = {numba.get_num_threads()}, "
          f"CPU {llvm.get_host_cpu_name()} ({', '.join(isa)}), HAS_HW_FMA={mf.HAS_HW_FMA}, "
          f"1T clock: {'process CPU time' if args.cpu_time else 'wall'}; times in ms")
    hdr = (f"{'function':10s} {'dtype':7s} {'ours 1T':>8s} {'ours 2T':>8s} {'numpy':>8s} "
           f"{'np/ours1T':>9s} {'numba-libm':>10s} {'torch 1T':>8s} {'torch 2T':>8s}  vectorized")
    print(hdr)
    print("-" * len(hdr))
    for name in args.names:
        f = mf.FUNCTIONS[name]
        serial, parallel = make_loops(f)
        libm = make_libm_loop(_LIBM[name]) if name in _LIBM else None
        for dt in (np.float32, np.float64):
            x = input_for(name, dt, args.n, rng)
            o = np.empty_like(x)
            t1 = best_ms(lambda: serial(x, o), args.repeat, c1)
            t2 = best_ms(lambda: parallel(x, o), args.repeat)
            vec = vector_report(serial, dt)
            tn = best_ms(lambda: NUMPY[name](x, o), args.repeat, c1) if name in NUMPY else float("nan")
            tl = best_ms(lambda: libm(x, o), max(1, args.repeat // 4), c1) if libm else float("nan")
            tt1 = tt2 = float("nan")
            if name in TORCH:
                xt, ot = torch.from_numpy(x), torch.from_numpy(o)
                torch.set_num_threads(1)
                tt1 = best_ms(lambda: TORCH[name](xt, ot), args.repeat, c1)
                torch.set_num_threads(args.threads)
                tt2 = best_ms(lambda: TORCH[name](xt, ot), args.repeat)
            ratio = tn / t1 if tn == tn else float("nan")
            print(f"{name:10s} {np.dtype(dt).name:7s} {t1:8.1f} {t2:8.1f} {tn:8.1f} "
                  f"{ratio:9.2f} {tl:10.1f} {tt1:8.1f} {tt2:8.1f}  {vec}", flush=True)


if __name__ == "__main__":
    main()
