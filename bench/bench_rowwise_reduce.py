"""Reductions and row-wise ops: dynshape vs NumPy vs PyTorch (2 threads), one table.

    python bench/bench_rowwise_reduce.py [--repeat N]

Times are the best of N runs after a warm-up (kernels loaded, tables cached). dynshape and
torch are given preallocated outputs where they accept them (``out=``), and also timed
allocating their results. NumPy runs single-threaded (its ufunc reductions do), dynshape and
torch use 2 threads.
"""
import argparse
import os
import time

import numpy as np


def best(fn, repeat):
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)


def np_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    e = np.exp(x - m)
    e /= e.sum(axis=-1, keepdims=True)
    return e


def np_layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + eps) * w + b


def cases():
    rng = np.random.default_rng(0)
    big = rng.standard_normal((64, 513, 1027)).astype(np.float32)
    logits = rng.standard_normal((77, 30522)).astype(np.float32)
    h = rng.standard_normal((4096, 768)).astype(np.float32)
    w = rng.standard_normal(768).astype(np.float32)
    b = rng.standard_normal(768).astype(np.float32)
    return [
        ("sum last axis (64,513,1027) f32", "sum", (big,), {"axis": -1},
         lambda: big.sum(axis=-1), ("sum", (big,), {"dim": -1})),
        ("sum middle axis (64,513,1027) f32", "sum", (big,), {"axis": 1},
         lambda: big.sum(axis=1), ("sum", (big,), {"dim": 1})),
        ("max middle axis (64,513,1027) f32", "max", (big,), {"axis": 1},
         lambda: big.max(axis=1), ("amax", (big,), {"dim": 1})),
        ("softmax rows (77,30522) f32", "softmax", (logits,), {"axis": -1},
         lambda: np_softmax(logits), ("softmax", (logits,), {"dim": -1})),
        ("layer_norm (4096,768) f32", "layer_norm", (h, w, b), {"axis": -1},
         lambda: np_layer_norm(h, w, b), ("layer_norm", (h, w, b), {})),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    os.environ.setdefault("NUMBA_NUM_THREADS", "2")
    import dynshape
    try:
        import torch
        torch.set_num_threads(2)
    except ImportError:
        torch = None

    dynshape.set_policy("optimized")
    rows = []
    for label, op, arrays, attrs, np_fn, (top, targs, tkw) in cases():
        res = dynshape.run(op, *arrays, **attrs)
        out = np.empty_like(res)
        t_ds = best(lambda: dynshape.run(op, *arrays, out=out, **attrs), args.repeat)
        t_ds_alloc = best(lambda: dynshape.run(op, *arrays, **attrs), args.repeat)
        t_np = best(np_fn, args.repeat)
        t_th = t_th_out = float("nan")
        if torch is not None:
            tt = [torch.from_numpy(a) for a in targs]
            if top == "layer_norm":
                def f():
                    return torch.nn.functional.layer_norm(tt[0], (tt[0].shape[-1],), tt[1], tt[2])
                t_th = best(f, args.repeat)
            else:
                fn = getattr(torch, top)
                t_th = best(lambda: fn(tt[0], **tkw), args.repeat)
                tout = torch.from_numpy(out) if top != "amax" else None
                if top in ("sum", "amax"):
                    t_th_out = best(lambda: fn(tt[0], **tkw, out=tout if tout is not None
                                               else torch.empty(out.shape)), args.repeat)
        rows.append((label, t_ds, t_ds_alloc, t_np, t_th, t_th_out))

    print(f"{'case':38s} {'dynshape out=':>14s} {'dynshape':>10s} {'numpy':>10s} "
          f"{'torch':>10s} {'torch out=':>11s} {'vs torch':>9s}")
    for label, a, b, c, d, e in rows:
        ref = np.nanmin([d, e])
        print(f"{label:38s} {a * 1e3:12.3f}ms {b * 1e3:8.3f}ms {c * 1e3:8.3f}ms "
              f"{d * 1e3:8.3f}ms {e * 1e3:9.3f}ms {ref / a:8.2f}x")


if __name__ == "__main__":
    main()
