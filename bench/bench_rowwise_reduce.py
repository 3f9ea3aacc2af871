"""Reductions and row-wise ops: dynshape vs NumPy, PyTorch and ONNX Runtime, one table.

    python -m bench.bench_rowwise_reduce [--quick] [--json PATH] [--no-torch] [--no-ort]

Forms: dynshape, PyTorch and ONNX Runtime with ``out=`` (IOBinding for ORT) where they have
it and allocating; NumPy allocating (its softmax and layer_norm are compositions; NumPy's
reductions run on one thread). Times are medians of alternating blocks after a verification
call; ratios compare like with like (peer / dynshape, > 1: dynshape faster).
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

EPS = 1e-5
IMPLS = ("dyn out=", "dyn alloc", "torch out=", "torch alloc", "ORT out=", "ORT alloc",
         "numpy alloc")


def np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    e /= e.sum(axis=-1, keepdims=True)
    return e


def np_layer_norm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + EPS) * w + b


def cases(quick):
    rng = np.random.default_rng(0)
    big = rng.standard_normal((4, 33, 67) if quick else (64, 513, 1027)).astype(np.float32)
    logits = rng.standard_normal((7, 143) if quick else (77, 30522)).astype(np.float32)
    h = rng.standard_normal((9, 96) if quick else (4096, 768)).astype(np.float32)
    flat = rng.standard_normal((32, 40) if quick else (1000, 1000)).astype(np.float32)
    # short rows: attention scores (heads x queries x keys) and a layer_norm of 77 features
    scores = rng.standard_normal((2, 9, 9) if quick else (12, 77, 77)).astype(np.float32)
    s77 = rng.standard_normal((9, 7) if quick else (924, 77)).astype(np.float32)
    w77 = rng.standard_normal(s77.shape[1]).astype(np.float32)
    b77 = rng.standard_normal(s77.shape[1]).astype(np.float32)
    w = rng.standard_normal(h.shape[1]).astype(np.float32)
    b = rng.standard_normal(h.shape[1]).astype(np.float32)
    # label, op, arrays, attrs, numpy, torch (name, kwargs, has out=), ORT node (op, attrs,
    # extra int64 inputs)
    return [
        (f"sum last axis {big.shape}", "sum", (big,), {"axis": -1}, lambda: big.sum(axis=-1),
         ("sum", {"dim": -1}, True), ("ReduceSum", {"keepdims": 0}, [-1])),
        (f"sum middle axis {big.shape}", "sum", (big,), {"axis": 1}, lambda: big.sum(axis=1),
         ("sum", {"dim": 1}, True), ("ReduceSum", {"keepdims": 0}, [1])),
        (f"max middle axis {big.shape}", "max", (big,), {"axis": 1}, lambda: big.max(axis=1),
         ("amax", {"dim": 1}, True), ("ReduceMax", {"keepdims": 0}, [1])),
        (f"sum of all {flat.shape}", "sum", (flat,), {}, lambda: flat.sum(),
         ("sum", {"dim": (0, 1)}, True), ("ReduceSum", {"keepdims": 0}, None)),
        (f"max of all {flat.shape}", "max", (flat,), {}, lambda: flat.max(),
         ("amax", {"dim": (0, 1)}, True), ("ReduceMax", {"keepdims": 0}, None)),
        (f"softmax rows {logits.shape}", "softmax", (logits,), {"axis": -1},
         lambda: np_softmax(logits), ("softmax", {"dim": -1}, True),
         ("Softmax", {"axis": -1}, None)),
        (f"layer_norm {h.shape}", "layer_norm", (h, w, b), {"axis": -1, "epsilon": EPS},
         lambda: np_layer_norm(h, w, b), ("layer_norm", {}, False),
         ("LayerNormalization", {"axis": -1, "epsilon": EPS}, None)),
        (f"softmax short rows {scores.shape}", "softmax", (scores,), {"axis": -1},
         lambda: np_softmax(scores), ("softmax", {"dim": -1}, True),
         ("Softmax", {"axis": -1}, None)),
        (f"layer_norm short rows {s77.shape}", "layer_norm", (s77, w77, b77),
         {"axis": -1, "epsilon": EPS}, lambda: np_layer_norm(s77, w77, b77),
         ("layer_norm", {}, False), ("LayerNormalization", {"axis": -1, "epsilon": EPS}, None)),
    ]


def impls(peers, op, arrays, attrs, np_fn, th, onnx_node, ref):
    outs = [np.empty_like(ref) for _ in range(3)]
    fns = {"dyn out=": lambda: dynshape.run(op, *arrays, out=outs[0], **attrs),
           "dyn alloc": lambda: dynshape.run(op, *arrays, **attrs)}
    if peers.torch:
        torch = peers.torch
        tt = [torch.from_numpy(a) for a in arrays]
        name, kw, has_out = th
        if name == "layer_norm":
            fns["torch alloc"] = lambda: peers.F.layer_norm(tt[0], (tt[0].shape[-1],), tt[1],
                                                            tt[2], EPS)
        else:
            f = getattr(torch, name)
            fns["torch alloc"] = lambda: f(tt[0], **kw)
            if has_out:
                to = torch.from_numpy(outs[1])
                fns["torch out="] = lambda: f(tt[0], **kw, out=to)
    if peers.ort:
        h, tp = peers.onnx.helper, peers.onnx.TensorProto
        kind, nattrs, axes = onnx_node
        names = ["x", "w", "b"][:len(arrays)]
        ins, inits = list(names), []
        if axes is not None:
            ins.append("axes")
            inits.append(h.make_tensor("axes", tp.INT64, [len(axes)], axes))
        sess = P.ort_session(peers, [h.make_node(kind, ins, ["y"], **nattrs)],
                             [(n, a.shape) for n, a in zip(names, arrays)],
                             [("y", ref.shape)], inits, opset=18)
        feeds = dict(zip(names, arrays))
        fns["ORT out="] = P.ort_out(sess, feeds, outs[2])
        fns["ORT alloc"] = P.ort_alloc(sess, feeds)
    fns["numpy alloc"] = np_fn
    return fns


def main(argv=None):
    args = session.options(__doc__, "rowwise_reduce.json").parse_args(argv)
    s = session.Session("dynshape reductions and row-wise ops, float32", args)
    peers = s.start(families=["reduce", "rowwise"], dtypes=["float32"])
    dynshape.set_policy("optimized")
    rows = []
    s.print(f"{'case':34s}" + "".join(f" {i:>11s}" for i in IMPLS) +
            f" {'torch/dyn out=':>14s} {'torch/dyn alloc':>15s} {'ORT/dyn out=':>12s}")
    for label, op, arrays, attrs, np_fn, th, onnx_node in cases(s.quick):
        ref = np.asarray(np_fn())
        fns = impls(peers, op, arrays, attrs, np_fn, th, onnx_node, ref)
        for k, fn in fns.items():
            r = fn()
            r = r.numpy() if hasattr(r, "numpy") else np.asarray(r)
            np.testing.assert_allclose(r, ref, rtol=1e-4, atol=1e-4, err_msg=f"{label} {k}")
        stats = s.time(fns)
        t = {k: v.median for k, v in stats.items()}

        def ratio(peer, dyn):
            return f"{t[peer] / t[dyn]:.2f}" if peer in t else "-"
        s.print(f"{label:34s}" + "".join(f" {fmt_time(t.get(i)):>11s}" for i in IMPLS) +
                f" {ratio('torch out=', 'dyn out='):>14s} {ratio('torch alloc', 'dyn alloc'):>15s}"
                f" {ratio('ORT out=', 'dyn out='):>12s}")
        rows.append({"case": label, "stats": {k: v.as_dict() for k, v in stats.items()}})
    s.finish({"cases": rows})


if __name__ == "__main__":
    main()
