"""Kernel-level: the vectorizable math functions (``dynshape_kernels.cpu.mathfuncs``) alone.

    python -m bench.kernel_level.mathfuncs [--quick] [--n 10000000] [names...]

For N = 1e7 float32 and float64 elements it times, per function, in alternating blocks
(medians):

* ``ours 1T``   : ``@njit`` loop ``for i in range(n): o[i] = mf.f(x[i])``
* ``ours 2T``   : the same loop with ``prange`` under ``@njit(parallel=True)``
* ``numpy``     : NumPy's ufunc(s) with preallocated outputs (NumPy is single
                  threaded; sigmoid/silu/gelu_tanh are composed in place from
                  np.exp / np.tanh; NumPy has no erf)
* ``numba-libm``: the same @njit loop calling ``np.exp`` / ``math.erf`` ...,
                  i.e. what Numba does without this module (scalar libm calls)
* ``torch 1T/2T``: torch CPU ``out=`` (if installed), for reference

It also checks that the single-thread loop was vectorized (AVX-512 ``zmm`` or
AVX2 ``ymm`` packed instructions in its assembly) and that no libm call is
left in it. The loops are compiled by this script (not dynshape drivers): the closing
line's compilation count includes them.
"""
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
from bench.harness import environment  # noqa: E402

if __name__ == "__main__":
    environment.prepare(bind=environment.wants_bind())

import math  # noqa: E402
import re  # noqa: E402

import numpy as np  # noqa: E402

from bench.harness import session  # noqa: E402
from bench.harness.timing import fmt_time  # noqa: E402
from dynshape_kernels.cpu import mathfuncs as mf  # noqa: E402

import numba  # noqa: E402
from numba import njit, prange  # noqa: E402


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
    ap = session.options(__doc__, "mathfuncs.json")
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--threads", type=int, default=environment.THREADS)
    ap.add_argument("names", nargs="*", default=None)
    args = ap.parse_args(argv)
    s = session.Session("math functions (kernel-level)", args)
    peers = s.start(warm=False)
    n = 10_000 if s.quick else args.n
    names = args.names or (["exp", "tanh"] if s.quick else list(mf.FUNCTIONS))
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    torch = peers.torch
    TORCH = torch_fns()[1] if torch else {}
    rng = np.random.default_rng(0)
    import llvmlite.binding as llvm
    feats = llvm.get_host_cpu_features()
    isa = [k for k in ("avx512f", "avx2", "fma") if feats.get(k, False)]
    s.print(f"n = {n:.0e}, CPU {llvm.get_host_cpu_name()} ({', '.join(isa)}), "
            f"HAS_HW_FMA={mf.HAS_HW_FMA}, HAS_SCALEF={mf.HAS_SCALEF}; "
            "medians of alternating blocks")
    cols = ("ours 1T", "ours 2T", "numpy", "numba-libm", "torch 1T", "torch 2T")
    hdr = (f"{'function':10s} {'dtype':7s}" + "".join(f" {c:>10s}" for c in cols) +
           f" {'np/ours1T':>9s}  vectorized")
    s.print(hdr)
    s.print("-" * len(hdr))
    rows = []
    for name in names:
        f = mf.FUNCTIONS[name]
        serial, parallel = make_loops(f)
        libm = make_libm_loop(_LIBM[name]) if name in _LIBM else None
        for dt in (np.float32, np.float64):
            x = input_for(name, dt, n, rng)
            o = np.empty_like(x)
            fns = {"ours 1T": lambda: serial(x, o), "ours 2T": lambda: parallel(x, o)}
            if name in NUMPY:
                fns["numpy"] = lambda: NUMPY[name](x, o)
            if libm:
                fns["numba-libm"] = lambda: libm(x, o)
            if name in TORCH:
                xt, ot = torch.from_numpy(x), torch.from_numpy(o)
                fns["torch 1T"] = lambda: (torch.set_num_threads(1), TORCH[name](xt, ot))
                fns["torch 2T"] = lambda: (torch.set_num_threads(args.threads),
                                           TORCH[name](xt, ot))
            for fn in fns.values():
                fn()                          # compile, and a first touch of the output
            st = s.time(fns)
            if torch:
                torch.set_num_threads(environment.THREADS)
            t = {k: v.median for k, v in st.items()}
            vec = vector_report(serial, dt)
            ratio = t["numpy"] / t["ours 1T"] if "numpy" in t else float("nan")
            s.print(f"{name:10s} {np.dtype(dt).name:7s}" +
                    "".join(f" {fmt_time(t.get(c)):>10s}" for c in cols) +
                    f" {ratio:9.2f}  {vec}")
            rows.append({"function": name, "dtype": np.dtype(dt).name, "vectorized": vec,
                         "stats": {k: v.as_dict() for k, v in st.items()}})
    s.finish({"rows": rows}, {"n": n, "names": names})


if __name__ == "__main__":
    main()
