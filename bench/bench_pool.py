"""Pooling: dynshape vs PyTorch (CPU, 2 threads) vs a NumPy shifted-slice baseline.

    python -m bench.bench_pool [--quick] [--json PATH]

float32 NCHW, 3x3 windows with stride 2, pad 1 and pad 0, max and avg (count_include_pad
False), on (1, 64, 113, 115) and a batch-8 case (8, 64, 57, 59). Every result is checked
against the NumPy baseline before it is timed. dynshape is timed writing into a preallocated
``out=`` and allocating its result; PyTorch allocates (``max_pool2d``/``avg_pool2d`` take no
``out=``). NumPy pads a copy of the input (``-inf`` or 0) and reduces the nine shifted
strided slices in place, on one thread. GB/s counts the input read once and the output
written once. Times are medians (bench/timing.py); results go to bench/results/pool.json.
"""
import os
import sys

os.environ.setdefault("NUMBA_NUM_THREADS", "2")
if "--no-bind" not in sys.argv:
    os.environ.setdefault("OMP_PROC_BIND", "true")
    os.environ.setdefault("OMP_PLACES", "cores")

import argparse  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bench.timing import fmt_time, measure  # noqa: E402
else:
    from .timing import fmt_time, measure  # noqa: E402

import dynshape  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = ((1, 64, 113, 115), (8, 64, 57, 59))
K, S = 3, 2


def np_pool(x, op, pad):
    """NumPy baseline: pad a copy, reduce the k*k shifted strided slices in place."""
    n, c, h, w = x.shape
    oh = (h + 2 * pad - K) // S + 1
    ow = (w + 2 * pad - K) // S + 1
    fill = -np.inf if op == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)

    def sl(a, i, j):
        return a[:, :, i:i + S * (oh - 1) + 1:S, j:j + S * (ow - 1) + 1:S]
    out = sl(xp, 0, 0).copy()
    red = np.maximum if op == "max" else np.add
    for i in range(K):
        for j in range(K):
            if i or j:
                red(out, sl(xp, i, j), out=out)
    if op == "avg":
        ones = np.pad(np.ones((h, w), x.dtype), pad)
        cnt = sl(ones[None, None], 0, 0).copy()
        for i in range(K):
            for j in range(K):
                if i or j:
                    cnt += sl(ones[None, None], i, j)
        out /= cnt
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short time budget per timing")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "pool.json"))
    ap.add_argument("--no-bind", action="store_true", help="do not bind OpenMP threads")
    args = ap.parse_args()
    budget = 0.1 if args.quick else 0.5
    try:
        import torch
        import torch.nn.functional as F
        torch.set_num_threads(2)
    except ImportError:
        torch = None
    dynshape.warm(["pool"], ["float32"])
    dynshape.set_policy("optimized")
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'case':44s} {'dyn out=':>9s} {'dyn alloc':>9s} {'torch':>9s} {'numpy':>9s}"
          f" {'GB/s dyn':>9s} {'torch/dyn':>9s} {'numpy/dyn':>9s}")
    for shape in SHAPES:
        x = rng.standard_normal(shape).astype(np.float32)
        tx = torch.from_numpy(x) if torch is not None else None
        for op in ("max", "avg"):
            for pad in (1, 0):
                name = f"{op}_pool2d"
                attrs = dict(kernel_shape=(K, K), strides=(S, S), pads=(pad,) * 4)
                ref = np_pool(x, op, pad)
                res = dynshape.run(name, x, **attrs)
                np.testing.assert_allclose(res, ref, rtol=1e-5, atol=1e-5)
                out = np.empty_like(res)
                t_out = measure(lambda: dynshape.run(name, x, out=out, **attrs), budget).median
                t_alloc = measure(lambda: dynshape.run(name, x, **attrs), budget).median
                t_np = measure(lambda: np_pool(x, op, pad), budget).median
                t_torch = None
                if torch is not None:
                    if op == "max":
                        def tfn():
                            return F.max_pool2d(tx, K, S, pad)
                    else:
                        def tfn():
                            return F.avg_pool2d(tx, K, S, pad, count_include_pad=False)
                    np.testing.assert_allclose(tfn().numpy(), ref, rtol=1e-5, atol=1e-5)
                    t_torch = measure(tfn, budget).median
                nbytes = x.nbytes + res.nbytes
                label = f"{name} 3x3/2 pad {pad} {shape}"
                row = {"case": label, "ds_out": t_out, "ds_alloc": t_alloc, "numpy": t_np,
                       "torch": t_torch, "gbps_ds_out": nbytes / t_out / 1e9,
                       "torch_over_ds_alloc": t_torch / t_alloc if t_torch else None,
                       "numpy_over_ds_out": t_np / t_out}
                rows.append(row)
                tr = f"{row['torch_over_ds_alloc']:9.2f}" if t_torch else f"{'-':>9s}"
                print(f"{label:44s} {fmt_time(t_out):>9s} {fmt_time(t_alloc):>9s} "
                      f"{fmt_time(t_torch):>9s} {fmt_time(t_np):>9s} "
                      f"{row['gbps_ds_out']:9.1f} {tr} {row['numpy_over_ds_out']:9.2f}")
    print("torch/dyn compares allocating calls (torch has no out=); > 1 means dynshape is "
          "faster")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"threads": 2, "dtype": "float32", "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
