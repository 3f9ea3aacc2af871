"""matmul through ``dynshape.run`` against NumPy (OpenBLAS) and PyTorch CPU (oneDNN/MKL).

    python -m bench.bench_matmul [--quick] [--dtype float32|float64] [--only NAME]
    python -m bench.bench_matmul --slots      # per-slot rates behind the cost model

All three run in the same process, 2 threads (Numba's threads, OpenBLAS as configured,
``torch.set_num_threads(2)``), round robin so a noisy neighbour affects them alike; best
wall time of the rounds, printed as GFLOP/s and ratios. The targets (issue: matmul >= 60%
of OpenBLAS on the large shapes, ahead of NumPy on batched-small) are printed next to them.
``--slots`` times every micro-kernel slot alone on one thread on the shapes it is made for:
the numbers behind ``dynshape.planning.matmul.SLOT_GFLOPS``.
"""
import argparse
import time

import numpy as np

import dynshape

CASES = [
    ("square 1024", 1, 1024, 1024, 1024),
    ("square 2048", 1, 2048, 2048, 2048),
    ("1000x1531x517", 1, 1000, 1531, 517),
    ("skinny 8x4096x4096", 1, 8, 4096, 4096),
    ("skinny 4096x8x4096", 1, 4096, 8, 4096),
    ("batched 256x(17x64@64x33)", 256, 17, 33, 64),
]
LARGE = ("square 1024", "square 2048", "1000x1531x517")


def best_times(fns, reps, min_time=0.3):
    """Best wall time of each callable, run in turns (round robin)."""
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


def slots(dt):
    import numba
    from dynshape_kernels.cpu.gemm import gemm
    numba.set_num_threads(1)
    rng = np.random.default_rng(0)
    shapes = [(1024, 1024, 1024, None), (48, 192, 256, None), (17, 33, 64, 256),
              (8, 3072, 4096, None), (2048, 8, 2048, None), (384, 16, 512, None)]
    print(f"{dt.name}, 1 thread, GFLOP/s per slot (forced)")
    for M, N, K, nb in shapes:
        a = rng.standard_normal((M, K) if nb is None else (nb, M, K)).astype(dt)
        b = rng.standard_normal((K, N) if nb is None else (nb, K, N)).astype(dt)
        rates = []
        for s in range(5):
            t = best_times([lambda: gemm(a, b, slot=s)], 3, 0.1)[0]
            rates.append(2.0 * M * N * K * (nb or 1) / t / 1e9)
        print(f"  {M}x{N}x{K}" + (f" x{nb}" if nb else "") + "  "
              + " ".join(f"s{s}={r:6.1f}" for s, r in enumerate(rates)))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--only", default=None)
    ap.add_argument("--quick", action="store_true", help="fewer rounds, skip square 2048")
    ap.add_argument("--slots", action="store_true", help="per-slot rates (1 thread)")
    args = ap.parse_args(argv)
    dt = np.dtype(args.dtype)
    if args.slots:
        return slots(dt)
    import torch
    torch.set_num_threads(2)
    dynshape.set_policy("optimized")
    rng = np.random.default_rng(0)
    reps = 2 if args.quick else args.reps
    print(f"matmul {dt}, 2 threads, GFLOP/s (best of >= {reps} rounds)")
    hdr = (f"{'case':28s} {'dynshape':>9s} {'numpy':>9s} {'torch':>9s} {'vs numpy':>9s} "
           f"{'vs torch':>9s}  target")
    print(hdr)
    print("-" * len(hdr))
    rows = []
    for name, nb, M, N, K in CASES:
        if (args.only and args.only not in name) or (args.quick and name == "square 2048"):
            continue
        shp_a = (nb, M, K) if nb > 1 else (M, K)
        shp_b = (nb, K, N) if nb > 1 else (K, N)
        a = rng.standard_normal(shp_a).astype(dt)
        b = rng.standard_normal(shp_b).astype(dt)
        out = np.empty((nb, M, N) if nb > 1 else (M, N), dt)
        ref = np.matmul(a, b)
        dynshape.run("matmul", a, b, out=out)
        err = np.abs(out - ref).max() / max(1e-30, np.abs(ref).max())
        assert err < 1e-4, f"{name}: relative error {err}"
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        to = torch.empty(out.shape, dtype=ta.dtype)
        ts = best_times([lambda: dynshape.run("matmul", a, b, out=out),
                         lambda: np.matmul(a, b, out=out),
                         lambda: torch.matmul(ta, tb, out=to)], reps)
        flops = 2.0 * nb * M * N * K
        g = [flops / t / 1e9 for t in ts]
        target = (">= 0.60x numpy" if name in LARGE else
                  "> 1.00x numpy" if name.startswith("batched") else "")
        ok = ("" if not target else
              ("met" if (g[0] / g[1] >= 0.6 if name in LARGE else g[0] > g[1]) else "MISSED"))
        print(f"{name:28s} {g[0]:9.1f} {g[1]:9.1f} {g[2]:9.1f} {g[0] / g[1]:8.2f}x "
              f"{g[0] / g[2]:8.2f}x  {target} {ok}")
        rows.append((name, g))
    return rows


if __name__ == "__main__":
    main()
