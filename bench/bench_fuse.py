"""Fused elementwise chains: dynshape.fuse vs NumPy unfused, PyTorch eager and torch.compile.

    python -m bench.bench_fuse [--quick] [--elements N] [--repeat R]

Chains of length 2, 4 and 8 on ``N`` (default 3e7) float32 elements, shape (N // 1000, 1000)
with a (1000,) bias broadcast along the rows. dynshape runs each chain in ONE driver call
(2 threads, tile by tile, no intermediate arrays); NumPy runs the ops one by one (one
thread, a full-size temporary per op; ``out=`` reuses one buffer where NumPy allows it);
PyTorch eager uses 2 threads, allocating; ``torch.compile(dynamic=True)`` is timed in steady
state after warm-up, its first compile reported separately. Times are the median of
``repeat`` runs (noisy on a shared machine: indicative only). dynshape writes into a
preallocated output (``out=``); NumPy and torch allocate theirs.

A conv-led case follows: conv2d(64 -> 64, 3x3, pad 1) on (1, 64, 57, 61) float32, then relu,
abs, exp: fused (the conv driver runs the chain on each output tile before storing it) vs
PyTorch eager (``F.conv2d`` then the three ops, 2 threads) and vs dynshape unfused
(``run("conv2d")`` then ``run`` of each op, a full-size array per op).
"""
import argparse
import statistics
import time

import numpy as np

import dynshape

C = np.float32(0.7978845608028654)
K = np.float32(0.044715)


def np_gelu_tanh(v):
    return 0.5 * v * (1 + np.tanh(C * (v + K * v * v * v)))


def np_sigmoid(v):
    return 1 / (1 + np.exp(-v))


# (name, fused steps, numpy function, torch function)
def chains():
    import torch
    F = torch.nn.functional
    return [
        ("len 2: add(bias), relu",
         [("add", "bias"), "relu"],
         lambda x, b: np.maximum(x + b, 0),
         lambda x, b: torch.relu(x + b)),
        ("len 4: add(bias), relu, mul(2), exp",
         [("add", "bias"), "relu", ("mul", 2.0), "exp"],
         lambda x, b: np.exp(np.maximum(x + b, 0) * np.float32(2)),
         lambda x, b: torch.exp(torch.relu(x + b) * 2.0)),
        ("len 8: add(bias), gelu(tanh), mul(.5), tanh, abs, add(1), log, sigmoid",
         [("add", "bias"), ("gelu", {"approximate": "tanh"}), ("mul", 0.5), "tanh", "abs",
          ("add", 1.0), "log", "sigmoid"],
         lambda x, b: np_sigmoid(np.log(np.abs(np.tanh(np_gelu_tanh(x + b) * np.float32(.5)))
                                        + np.float32(1))),
         lambda x, b: torch.sigmoid(torch.log(torch.abs(torch.tanh(
             F.gelu(x + b, approximate="tanh") * 0.5)) + 1.0))),
    ]


def median_time(fn, repeat):
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3e6 elements, 3 repeats")
    ap.add_argument("--elements", type=float, default=3e7)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(2)
    n = int(3e6 if args.quick else args.elements)
    repeat = 3 if args.quick else args.repeat
    cols = 1000
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n // cols, cols)).astype(np.float32)
    b = rng.standard_normal(cols).astype(np.float32)
    out = np.empty_like(x)
    tx, tb = torch.from_numpy(x), torch.from_numpy(b)
    print(f"fused elementwise chains on {x.size:.3g} float32 elements {x.shape} + bias "
          f"{b.shape}; median of {repeat}")
    hdr = (f"{'chain':72s} {'dynshape':>9s} {'numpy':>9s} {'torch':>9s} {'compile':>9s} "
           f"{'np/ds':>6s} {'th/ds':>6s} {'ds/tc':>6s}  {'tc 1st':>7s}")
    print(hdr)
    for name, steps, np_fn, th_fn in chains():
        f = dynshape.fuse(steps)
        f(x, bias=b, out=out)                       # warm-up: driver loaded, table cached
        ref = np_fn(x, b)
        err = float(np.nanmax(np.abs(out - ref) / (np.abs(ref) + 1e-6)))
        t_ds = median_time(lambda: f(x, bias=b, out=out), repeat)
        t_np = median_time(lambda: np_fn(x, b), repeat)
        t_th = median_time(lambda: th_fn(tx, tb), repeat)
        t_tc = first = None
        if not args.no_compile:
            tc = torch.compile(lambda a, c: th_fn(a, c), dynamic=True)
            t0 = time.perf_counter()
            tc(tx, tb)
            first = time.perf_counter() - t0
            t_tc = median_time(lambda: tc(tx, tb), repeat)

        def ms(t):
            return f"{t * 1e3:8.1f}ms" if t is not None else f"{'-':>10s}"
        print(f"{name:72s}{ms(t_ds)}{ms(t_np)}{ms(t_th)}{ms(t_tc)} {t_np / t_ds:6.2f} "
              f"{t_th / t_ds:6.2f} {(t_ds / t_tc) if t_tc else float('nan'):6.2f}  "
              f"{(f'{first:.1f}s' if first else '-'):>7s}   (max rel err vs numpy {err:.1e})")
    print("np/ds, th/ds: speed-up of dynshape over NumPy / PyTorch eager; ds/tc: dynshape time "
          "over torch.compile steady state (<= 1.2 is the target); tc 1st: first compile.")
    matmul_case(max(10, repeat), not args.no_compile)
    conv_case(max(20, 5 * repeat))


def matmul_case(repeat, compile_too=True):
    """matmul + bias + gelu at 512x1024x1024: fused (the GEMM epilogue runs the steps) vs
    NumPy unfused, PyTorch eager and torch.compile(dynamic=True)."""
    import torch
    F = torch.nn.functional
    rng = np.random.default_rng(2)
    a = rng.standard_normal((512, 1024)).astype(np.float32)
    b = (rng.standard_normal((1024, 1024)) / 32).astype(np.float32)
    bias = rng.standard_normal(1024).astype(np.float32)
    out = np.empty((512, 1024), np.float32)
    ta, tb, tbias = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(bias)
    f = dynshape.fuse(["matmul", ("add", "bias"), "gelu"])

    def numpy_unfused():
        v = a @ b
        v += bias
        return 0.5 * v * (1 + _np_erf(v / np.sqrt(np.float32(2))))

    def eager():
        with torch.no_grad():
            return F.gelu(torch.matmul(ta, tb) + tbias)

    f(a, b, bias=bias, out=out)
    ref = eager().numpy()
    err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))
    t_ds = median_time(lambda: f(a, b, bias=bias, out=out), repeat)
    t_np = median_time(numpy_unfused, repeat)
    t_th = median_time(eager, repeat)
    t_tc = first = None
    if compile_too:
        def body(x, y, z):
            return F.gelu(torch.matmul(x, y) + z)
        tc = torch.compile(body, dynamic=True)
        t0 = time.perf_counter()
        with torch.no_grad():
            tc(ta, tb, tbias)
        first = time.perf_counter() - t0

        def compiled():
            with torch.no_grad():
                return tc(ta, tb, tbias)
        t_tc = median_time(compiled, repeat)
    gf = 2 * 512 * 1024 * 1024 / 1e9
    print(f"\nmatmul + bias + gelu, 512x1024 @ 1024x1024 float32; median of {repeat}")
    print(f"  dynshape fused {t_ds * 1e3:7.2f}ms ({gf / t_ds:5.0f} GFLOP/s)   NumPy unfused "
          f"{t_np * 1e3:7.2f}ms   PyTorch eager {t_th * 1e3:7.2f}ms   torch.compile "
          + (f"{t_tc * 1e3:7.2f}ms (first call {first:.1f}s)" if t_tc else "-"))
    print(f"  np/ds {t_np / t_ds:5.2f}   th/ds {t_th / t_ds:5.2f}   ds/tc "
          + (f"{t_ds / t_tc:5.2f}" if t_tc else "-") + f"   (max error vs PyTorch {err:.1e} of max)")


def _np_erf(v):
    """Abramowitz-Stegun 7.1.26 erf in NumPy (NumPy has none), |error| < 1.5e-7."""
    s = np.sign(v)
    z = np.abs(v)
    t = 1 / (1 + 0.3275911 * z)
    y = 1 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
             + 0.254829592) * t * np.exp(-z * z)
    return s * y


def conv_case(repeat):
    """conv2d(64->64, 3x3, pad 1, 57x61) -> relu -> abs -> exp: fused vs PyTorch eager vs
    dynshape unfused."""
    import torch
    F = torch.nn.functional
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 64, 57, 61)).astype(np.float32)
    w = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32)
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    f = dynshape.fuse([("conv2d", {"pads": (1, 1, 1, 1)}), "relu", "abs", "exp"])
    out = np.empty((1, 64, 57, 61), np.float32)

    def unfused():
        v = dynshape.run("conv2d", x, w, pads=1)
        for op in ("relu", "abs", "exp"):
            v = dynshape.run(op, v)
        return v

    def eager():
        with torch.no_grad():
            return torch.exp(torch.abs(torch.relu(F.conv2d(tx, tw, padding=1))))

    f(x, w, out=out)
    err = float(np.max(np.abs(out - eager().numpy()) / np.abs(eager().numpy())))
    assert np.array_equal(out, unfused())
    t_ds = median_time(lambda: f(x, w, out=out), repeat)
    t_un = median_time(unfused, repeat)
    t_th = median_time(eager, repeat)
    print(f"\nconv-led chain: conv2d 64->64 3x3 pad 1 on (1, 64, 57, 61) float32 -> relu -> "
          f"abs -> exp; median of {repeat}")
    print(f"  dynshape fused {t_ds * 1e3:8.2f}ms   dynshape unfused {t_un * 1e3:8.2f}ms   "
          f"PyTorch eager {t_th * 1e3:8.2f}ms")
    print(f"  unfused/fused {t_un / t_ds:5.2f}   eager/fused {t_th / t_ds:5.2f}   "
          f"(max rel err vs PyTorch {err:.1e})")


if __name__ == "__main__":
    main()
