"""conv2d: dynshape vs PyTorch (CPU) vs a NumPy im2col + matmul baseline, float32, 2 threads.

    python -m bench.bench_conv [--quick] [--only NAME]

Cases (N = 1, NCHW): 64 -> 64 channels 3x3 pad 1 on 57x61; 3 -> 64 7x7 stride 2 pad 3 on
225x227; depthwise 3x3 pad 1 on 128 channels 113x115. Each reports the best time of the
repetitions after a warm-up (kernels loaded, table cached), GFLOP/s (2 * N * M * OH * OW *
C/group * KH * KW flops) and the ratio of dynshape's throughput to PyTorch's
(``torch.nn.functional.conv2d`` with ``torch.set_num_threads(2)``) and to the baseline. The
three run in turns so that load from other processes hits them alike. dynshape writes into a
preallocated ``out``; PyTorch and NumPy allocate their results. NumPy's matmul uses OpenBLAS
with its own thread setting; its im2col copy is part of the baseline's time.
Results are saved to ``bench/results/conv.json``.
"""
import argparse
import json
import os
import time

import numpy as np

os.environ.setdefault("NUMBA_NUM_THREADS", "2")

CASES = [
    # name, N, C, H, W, M, KH, KW, stride, pad, group
    ("64->64 3x3 p1 57x61", 1, 64, 57, 61, 64, 3, 3, 1, 1, 1),
    ("3->64 7x7 s2 p3 225x227", 1, 3, 225, 227, 64, 7, 7, 2, 3, 1),
    ("depthwise 3x3 p1 128ch 113x115", 1, 128, 113, 115, 128, 3, 3, 1, 1, 128),
]


def im2col_conv(x, w, stride, pad, group):
    """NumPy baseline: zero-padded copy, strided windows gathered into a matrix, matmul."""
    N, C, H, W = x.shape
    M, Cg, KH, KW = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    OH = (H + 2 * pad - KH) // stride + 1
    OW = (W + 2 * pad - KW) // stride + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (KH, KW), axis=(2, 3))
    win = win[:, :, ::stride, ::stride][:, :, :OH, :OW]          # N, C, OH, OW, KH, KW
    Mg = M // group
    y = np.empty((N, M, OH, OW), x.dtype)
    for g in range(group):
        cols = win[:, g * Cg:(g + 1) * Cg].transpose(0, 2, 3, 1, 4, 5).reshape(
            N * OH * OW, Cg * KH * KW)
        wg = w[g * Mg:(g + 1) * Mg].reshape(Mg, -1)
        y[:, g * Mg:(g + 1) * Mg] = (cols @ wg.T).reshape(N, OH, OW, Mg).transpose(0, 3, 1, 2)
    return y


def best_times(fns, reps, min_time):
    best = [float("inf")] * len(fns)
    n = 0
    start = time.perf_counter()
    while n < reps or time.perf_counter() - start < min_time * len(fns):
        for i, f in enumerate(fns):
            t = time.perf_counter()
            f()
            best[i] = min(best[i], time.perf_counter() - t)
        n += 1
        if n >= 500:
            break
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--only", default=None, help="run the cases whose name contains this")
    args = ap.parse_args(argv)
    import dynshape
    import torch
    torch.set_num_threads(2)
    dynshape.warm(["conv"], ["float32"])
    reps, min_time = (3, 0.2) if args.quick else (20, 1.5)
    rng = np.random.default_rng(0)
    rows = []
    hdr = (f"{'case':32s} {'dynshape':>9s} {'torch':>9s} {'numpy':>9s}   GFLOP/s: "
           f"{'dynshape':>8s} {'torch':>7s} {'numpy':>7s}  {'vs torch':>8s} {'vs numpy':>8s}")
    print(hdr)
    print("-" * len(hdr))
    for name, N, C, H, W, M, KH, KW, s, p, g in CASES:
        if args.only and args.only not in name:
            continue
        x = rng.standard_normal((N, C, H, W)).astype(np.float32)
        w = rng.standard_normal((M, C // g, KH, KW)).astype(np.float32)
        attrs = dict(strides=(s, s), pads=(p, p, p, p), group=g)
        y = dynshape.run("conv2d", x, w, **attrs)
        out = np.empty_like(y)
        xt, wt = torch.from_numpy(x), torch.from_numpy(w)
        ref = torch.nn.functional.conv2d(xt, wt, stride=s, padding=p, groups=g).numpy()
        scale = np.abs(ref).max()
        err = float(np.abs(y - ref).max() / scale)
        base = im2col_conv(x, w, s, p, g)
        assert np.allclose(base, ref, rtol=1e-3, atol=1e-3 * scale)
        fns = [lambda: dynshape.run("conv2d", x, w, out=out, **attrs),
               lambda: torch.nn.functional.conv2d(xt, wt, stride=s, padding=p, groups=g),
               lambda: im2col_conv(x, w, s, p, g)]
        td, tt, tn = best_times(fns, reps, min_time)
        OH, OW = y.shape[2:]
        flops = 2.0 * N * M * OH * OW * (C // g) * KH * KW
        gd, gt, gn = flops / td / 1e9, flops / tt / 1e9, flops / tn / 1e9
        print(f"{name:32s} {td * 1e3:8.2f}ms {tt * 1e3:8.2f}ms {tn * 1e3:8.2f}ms   "
              f"         {gd:8.1f} {gt:7.1f} {gn:7.1f}  {gd / gt:8.2f} {gd / gn:8.2f}")
        rows.append({"case": name, "dynshape_s": td, "torch_s": tt, "numpy_s": tn,
                     "gflops": {"dynshape": gd, "torch": gt, "numpy": gn},
                     "ratio_vs_torch": gd / gt, "ratio_vs_numpy": gd / gn,
                     "max_rel_err_vs_torch": err,
                     "table": str(dynshape.explain("conv2d", x, w, **attrs).describe(limit=0))})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "conv.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"threads": 2, "dtype": "float32", "quick": args.quick, "cases": rows}, f,
                  indent=1)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
