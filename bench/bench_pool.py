"""Pooling: dynshape vs PyTorch (CPU), ONNX Runtime and a NumPy shifted-slice baseline.

    python -m bench.bench_pool [--quick] [--json PATH] [--no-torch] [--no-ort]

float32 NCHW, 3x3 windows with stride 2, pad 1 and pad 0, max and avg (count_include_pad
False), on (1, 64, 113, 115) and a batch-8 case (8, 64, 57, 59). Every result is checked
against the NumPy baseline before it is timed. Forms: dynshape ``out=`` and allocating;
ONNX Runtime ``out=`` (IOBinding) and allocating; PyTorch allocating only
(``max_pool2d``/``avg_pool2d`` take no ``out=``); NumPy pads a copy of the input and
reduces the nine shifted strided slices in place, on one thread (allocating). GB/s counts
the input read once and the output written once. Ratios compare like with like.
"""
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.harness import environment  # noqa: E402

if __name__ == "__main__":
    environment.prepare(bind=environment.wants_bind())

import numpy as np  # noqa: E402

import dynshape  # noqa: E402
from bench.harness import peers as P  # noqa: E402
from bench.harness import session  # noqa: E402
from bench.harness.timing import fmt_time  # noqa: E402

SHAPES = ((1, 64, 113, 115), (8, 64, 57, 59))
QUICK_SHAPES = ((1, 8, 17, 19),)
K, S = 3, 2
IMPLS = ("dyn out=", "dyn alloc", "ORT out=", "ORT alloc", "torch alloc", "numpy alloc")


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


def impls(peers, x, op, pad, res):
    name = f"{op}_pool2d"
    attrs = dict(kernel_shape=(K, K), strides=(S, S), pads=(pad,) * 4)
    out = [np.empty_like(res) for _ in range(2)]
    fns = {"dyn out=": lambda: dynshape.run(name, x, out=out[0], **attrs),
           "dyn alloc": lambda: dynshape.run(name, x, **attrs)}
    if peers.ort:
        node = peers.onnx.helper.make_node("MaxPool" if op == "max" else "AveragePool",
                                           ["x"], ["y"], kernel_shape=[K, K], strides=[S, S],
                                           pads=[pad] * 4)
        sess = P.ort_session(peers, [node], [("x", x.shape)], [("y", res.shape)])
        fns["ORT out="] = P.ort_out(sess, {"x": x}, out[1])
        fns["ORT alloc"] = P.ort_alloc(sess, {"x": x})
    if peers.torch:
        F, tx = peers.F, peers.torch.from_numpy(x)
        if op == "max":
            fns["torch alloc"] = lambda: F.max_pool2d(tx, K, S, pad)
        else:
            fns["torch alloc"] = lambda: F.avg_pool2d(tx, K, S, pad, count_include_pad=False)
    fns["numpy alloc"] = lambda: np_pool(x, op, pad)
    return fns


def verdict(t):
    """The issue's target: ahead of PyTorch, allocating against allocating."""
    if "torch alloc" not in t:
        return "-"
    return f"ahead of torch: {'met' if t['dyn alloc'] < t['torch alloc'] else 'MISSED'}"


def main(argv=None):
    args = session.options(__doc__, "pool.json").parse_args(argv)
    s = session.Session("dynshape pooling, float32", args)
    peers = s.start(families=["pool"], dtypes=["float32"])
    dynshape.set_policy("optimized")
    rng = np.random.default_rng(0)
    rows = []
    s.print(f"{'case':44s}" + "".join(f" {i:>11s}" for i in IMPLS) +
            f" {'GB/s dyn':>9s} {'ORT/dyn out=':>12s} {'torch/dyn alloc':>15s}  target")
    for shape in (QUICK_SHAPES if s.quick else SHAPES):
        x = rng.standard_normal(shape).astype(np.float32)
        for op in ("max", "avg"):
            for pad in (1, 0):
                ref = np_pool(x, op, pad)
                fns = impls(peers, x, op, pad, ref)
                for k, fn in fns.items():
                    r = fn()
                    r = r.numpy() if hasattr(r, "numpy") else r
                    np.testing.assert_allclose(r, ref, rtol=1e-5, atol=1e-5, err_msg=k)
                st = s.time(fns)
                t = {k: v.median for k, v in st.items()}
                label = f"{op}_pool2d 3x3/2 pad {pad} {shape}"
                gbps = (x.nbytes + ref.nbytes) / t["dyn out="] / 1e9

                def ratio(peer, dyn):
                    return f"{t[peer] / t[dyn]:.2f}" if peer in t else "-"
                s.print(f"{label:44s}" + "".join(f" {fmt_time(t.get(i)):>11s}" for i in IMPLS)
                        + f" {gbps:9.1f} {ratio('ORT out=', 'dyn out='):>12s}"
                        f" {ratio('torch alloc', 'dyn alloc'):>15s}  {verdict(t)}")
                rows.append({"case": label, "target": verdict(t), "stats": {k: v.as_dict() for k, v in st.items()},
                             "gbps_dyn_out": gbps})
    s.print("ratios are peer time / dynshape time in the same form (> 1: dynshape faster); "
            "torch has no out= for pooling")
    s.finish({"rows": rows})


if __name__ == "__main__":
    main()
