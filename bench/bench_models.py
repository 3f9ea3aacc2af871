"""Whole models: dynshape.load_onnx against ONNX Runtime (CPU provider, 2 intra-op threads)
and PyTorch eager, on the same inputs, at several shapes per model.

    python -m bench.bench_models [--quick] [--no-torch] [--no-ort]

Models (``dynshape.testing.models``, random weights): an MLP, a CNN with dynamic H and W, a
ResNet-style network and a 2-layer transformer encoder with dynamic batch and sequence
length. All allocate their outputs (no peer here writes into ``out=``). Per shape: the
steady-state time per inference (alternating blocks), and the first call on that shape in
a fresh model object (dynshape: table builds and plan binding, no compilation; ORT: a new
session would re-optimize, so its first call on a new shape is timed on the live session).
ratio = peer time / dynshape time (> 1: dynshape faster). Every result is checked against
ONNX Runtime first. The last section is the Python overhead per plan step: a plan replayed
against running its steps' kernels alone is not separable here, so it reports the time per
step of the smallest shape, an upper bound on the per-node overhead.
"""
import os
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.harness import environment  # noqa: E402

if __name__ == "__main__":
    environment.prepare(bind=environment.wants_bind())

import numpy as np  # noqa: E402

from bench.harness import session  # noqa: E402
from bench.harness.environment import THREADS  # noqa: E402
from bench.harness.timing import fmt_time  # noqa: E402

SHAPES = {
    "mlp": [{"x": (1, 64)}, {"x": (64, 64)}, {"x": (1000, 64)}],
    "cnn": [{"img": (1, 3, 64, 64)}, {"img": (4, 3, 97, 131)}],
    "resnet": [{"img": (1, 3, 56, 56)}, {"img": (2, 3, 77, 91)}],
    "encoder": [{"x": (1, 16, 32)}, {"x": (4, 77, 32)}, {"x": (8, 130, 32)}],
}
QUICK = {"mlp": [{"x": (3, 64)}], "encoder": [{"x": (1, 9, 32)}]}


def ort_session(ort, data):
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    with environment.threads_unbound():         # its thread pool is created here
        return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def main():
    args = session.options(__doc__, "bench_models.json").parse_args()
    s = session.Session("dynshape whole models (load_onnx)", args)
    peers = s.start(families=["unary", "binary", "copy", "reduce", "rowwise", "matmul", "conv",
                              "pool", "fused"], dtypes=["float32"])
    import dynshape
    from dynshape.testing.models import MODULES, _export
    torch = peers.torch
    rows = []
    s.print(f"{'model':8s} {'shape':18s} {'dyn':>9s} {'ORT':>9s} {'torch':>9s} "
            f"{'ORT/dyn':>8s} {'torch/dyn':>9s} {'dyn 1st':>9s} {'steps':>6s}")
    for name, shapes in (QUICK if s.quick else SHAPES).items():
        module, ex_args, names, dynamic = MODULES[name]()
        data = _export(module, ex_args, names, dynamic)
        model = dynshape.load_onnx(data)
        sess = ort_session(peers.ort, data) if peers.ort else None
        for k, shp in enumerate(shapes):
            rng = np.random.default_rng(k)
            feed = {n: rng.standard_normal(v).astype(np.float32) for n, v in shp.items()}
            fresh = dynshape.load_onnx(data)
            t0 = time.perf_counter()
            got = fresh.run(None, feed)
            first = time.perf_counter() - t0
            fns = {"dyn": lambda: model.run(None, feed)}
            if sess is not None:
                ref = sess.run(None, feed)
                for g, r in zip(got, ref):
                    np.testing.assert_allclose(g, r, rtol=1e-3, atol=1e-4)
                fns["ORT"] = lambda: sess.run(None, feed)
            if torch is not None:
                tin = [torch.from_numpy(feed[n]) for n in names[0]]

                def eager(tin=tin, module=module):
                    with torch.inference_mode():
                        return module(*tin)
                fns["torch"] = eager
            st = s.time(fns)
            t = {k2: v.median for k2, v in st.items()}
            r_ort = t["ORT"] / t["dyn"] if "ORT" in t else None
            r_t = t["torch"] / t["dyn"] if "torch" in t else None
            s.print(f"{name:8s} {'x'.join(map(str, next(iter(shp.values())))):18s} "
                    f"{fmt_time(t['dyn']):>9s} {fmt_time(t.get('ORT')):>9s} "
                    f"{fmt_time(t.get('torch')):>9s} "
                    f"{'' if r_ort is None else f'{r_ort:.2f}':>8s} "
                    f"{'' if r_t is None else f'{r_t:.2f}':>9s} {fmt_time(first):>9s} "
                    f"{len(model.plan.steps):>6d}")
            rows.append({"model": name, "shape": shp, "times_s": t, "first_call_s": first,
                         "ratio_ort": r_ort, "ratio_torch": r_t,
                         "steps": len(model.plan.steps),
                         "per_step_s": t["dyn"] / len(model.plan.steps),
                         "stats": {k2: v.as_dict() for k2, v in st.items()}})
    s.print()
    small = min(rows, key=lambda r: r["times_s"]["dyn"])
    s.print(f"time per plan step at the smallest case ({small['model']}): "
            f"{fmt_time(small['per_step_s'])} (kernel time included: an upper bound on the "
            f"per-node overhead)")
    s.finish({"cases": rows})


if __name__ == "__main__":
    main()
