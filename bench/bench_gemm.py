"""Benchmark dynshape float32 GEMM vs np.matmul (OpenBLAS) and torch.matmul.

Usage: python bench/bench_gemm.py [--reps N] [--dtype float32|float64] [--only NAME]

All three are measured in the same run, best-of-N wall time (the three run in turns), 2 threads
(numba default threads, OpenBLAS as configured, torch.set_num_threads(2)).
Batched case: one driver call; the tile table carries a batch column
(one 17x33 tile per batch element), so batches are spread over threads.
"""
import argparse
import os
import sys
import time

import numpy as np

try:
    from dynshape_kernels.cpu.gemm import gemm  # installed package
except ImportError:  # running from the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from kernels.cpu.gemm import gemm  # noqa: E402

CASES = [
    ("square 1024", 1, 1024, 1024, 1024),
    ("square 2048", 1, 2048, 2048, 2048),
    ("1000x1531x517", 1, 1000, 1531, 517),
    ("skinny 8x4096x4096", 1, 8, 4096, 4096),
    ("skinny 4096x8x4096", 1, 4096, 8, 4096),
    ("batched 256x(17x64@64x33)", 256, 17, 33, 64),
]


def best_times(fns, reps, min_time=0.3):
    """Best wall time of each callable; the callables are run in turns
    (round robin) so that a noisy neighbour affects all of them alike."""
    for f in fns:
        f()
    best = [float("inf")] * len(fns)
    n = 0
    t_start = time.perf_counter()
    while n < reps or time.perf_counter() - t_start < min_time * len(fns):
        for i, f in enumerate(fns):
            t = time.perf_counter()
            f()
            best[i] = min(best[i], time.perf_counter() - t)
        n += 1
        if n >= 200:
            break
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--only", default=None)
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    dt = np.dtype(args.dtype)
    try:
        if args.no_torch:
            raise ImportError
        import torch
        torch.set_num_threads(2)
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    print(f"dtype={dt}  (GFLOP/s, best of >= {args.reps})")
    hdr = f"{'case':28s} {'dynshape':>9s} {'numpy':>9s} {'torch':>9s} {'%numpy':>7s} {'maxrelerr':>9s}"
    print(hdr)
    print("-" * len(hdr))
    for name, nb, M, N, K in CASES:
        if args.only and args.only not in name:
            continue
        shp_a = (nb, M, K) if nb > 1 else (M, K)
        shp_b = (nb, K, N) if nb > 1 else (K, N)
        a = rng.standard_normal(shp_a).astype(dt)
        b = rng.standard_normal(shp_b).astype(dt)
        out = np.empty((nb, M, N) if nb > 1 else (M, N), dt)
        ref = np.matmul(a, b)
        gemm(a, b, out=out)
        err = np.abs(out - ref).max() / max(1e-30, np.abs(ref).max())
        flops = 2.0 * nb * M * N * K
        fns = [lambda: gemm(a, b, out=out), lambda: np.matmul(a, b, out=out)]
        if torch is not None:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            to = torch.empty(out.shape, dtype=ta.dtype)
            fns.append(lambda: torch.matmul(ta, tb, out=to))
        ts = best_times(fns, args.reps)
        t_ours, t_np = ts[0], ts[1]
        g_t = flops / ts[2] / 1e9 if torch is not None else float("nan")
        g_o, g_n = flops / t_ours / 1e9, flops / t_np / 1e9
        print(f"{name:28s} {g_o:9.1f} {g_n:9.1f} {g_t:9.1f} {100 * g_o / g_n:6.0f}% {err:9.1e}")


if __name__ == "__main__":
    main()
