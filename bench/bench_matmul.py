"""matmul through ``dynshape.run`` against NumPy (OpenBLAS), PyTorch CPU and ONNX Runtime.

    python -m bench.bench_matmul [--quick] [--dtype float32|float64] [--only NAME]

Every implementation in both forms where it has them: ``out=`` (dynshape, ``np.matmul(out=)``,
``torch.matmul(out=)``, ONNX Runtime IOBinding) and allocating. All in one process, 2
threads, timed in alternating blocks; the header names the OpenBLAS kernel NumPy runs (the
harness unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE). GFLOP/s from median times; ratios
are dynshape's throughput over the peer's in the same form. Per-slot micro-kernel rates
(the cost model's numbers) are a kernel-level measurement: bench/kernel_level/matmul_slots.py.
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

CASES = [  # name, batch, M, N, K
    ("square 1024", 1, 1024, 1024, 1024),
    ("square 2048", 1, 2048, 2048, 2048),
    ("1000x1531x517", 1, 1000, 1531, 517),
    ("skinny 8x4096x4096", 1, 8, 4096, 4096),
    ("skinny 4096x8x4096", 1, 4096, 8, 4096),
    ("batched 256x(17x64@64x33)", 256, 17, 33, 64),
]
QUICK_CASES = [("odd 67x45x39", 1, 67, 45, 39), ("batched 8x(17x64@64x33)", 8, 17, 33, 64)]
LARGE = ("square 1024", "square 2048", "1000x1531x517")
FORMS = ("out=", "alloc")
PEERS = ("numpy", "torch", "ORT")


def impls(peers, a, b, out_shape, dt):
    outs = [np.empty(out_shape, dt) for _ in range(3)]
    fns = {"dyn out=": lambda: dynshape.run("matmul", a, b, out=outs[0]),
           "dyn alloc": lambda: dynshape.run("matmul", a, b),
           "numpy out=": lambda: np.matmul(a, b, out=outs[1]),
           "numpy alloc": lambda: np.matmul(a, b)}
    if peers.torch:
        ta, tb = peers.torch.from_numpy(a), peers.torch.from_numpy(b)
        to = peers.torch.from_numpy(outs[2])
        fns["torch out="] = lambda: peers.torch.matmul(ta, tb, out=to)
        fns["torch alloc"] = lambda: peers.torch.matmul(ta, tb)
    if peers.ort and dt == np.float32:
        node = peers.onnx.helper.make_node("MatMul", ["a", "b"], ["y"])
        sess = P.ort_session(peers, [node], [("a", a.shape), ("b", b.shape)],
                             [("y", out_shape)])
        fns["ORT out="] = P.ort_out(sess, {"a": a, "b": b}, np.empty(out_shape, dt))
        fns["ORT alloc"] = P.ort_alloc(sess, {"a": a, "b": b})
    return fns


def target(name, g):
    """The issue's target for this case, judged on the out= forms: large shapes >= 1.0x
    NumPy (OpenBLAS); batched-small >= 1.5x NumPy and ahead of PyTorch."""
    d, n, t = g.get("dyn out="), g.get("numpy out="), g.get("torch out=")
    if name in LARGE:
        return f">= 1.0x numpy: {'met' if d >= n else 'MISSED'}"
    if name.startswith("batched") and not name.startswith("batched 8x"):
        ok = d >= 1.5 * n and (t is None or d > t)
        return f">= 1.5x numpy, > torch: {'met' if ok else 'MISSED'}"
    return "-"


def main(argv=None):
    ap = session.options(__doc__, "matmul.json")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--only", default=None, help="run the cases whose name contains this")
    args = ap.parse_args(argv)
    dt = np.dtype(args.dtype)
    s = session.Session(f"dynshape matmul, {dt}", args)
    peers = s.start(families=["matmul"], dtypes=[dt.name])
    dynshape.set_policy("optimized")
    rng = np.random.default_rng(0)
    cols = [f"{p} {f}" for f in FORMS for p in ("dyn",) + PEERS]
    s.print("GFLOP/s (median); ratio = dynshape GFLOP/s / peer GFLOP/s, same form")
    s.print(f"{'case':28s}" + "".join(f" {c:>11s}" for c in cols) +
            "".join(f" {'vs ' + p + ' ' + f:>15s}" for f in FORMS for p in PEERS) + "  target")
    rows = []
    for name, nb, M, N, K in (QUICK_CASES if s.quick else CASES):
        if args.only and args.only not in name:
            continue
        a = rng.standard_normal((nb, M, K) if nb > 1 else (M, K)).astype(dt)
        b = rng.standard_normal((nb, K, N) if nb > 1 else (K, N)).astype(dt)
        ref = np.matmul(a.astype(np.float64), b)
        fns = impls(peers, a, b, ref.shape, dt)
        for k, fn in fns.items():
            r = np.asarray(fn())
            err = np.abs(r - ref).max() / max(1e-30, np.abs(ref).max())
            assert err < (1e-4 if dt == np.float32 else 1e-10), f"{name} {k}: error {err}"
        stats = s.time(fns)
        flops = 2.0 * nb * M * N * K
        g = {k: flops / v.median / 1e9 for k, v in stats.items()}

        def vs(p, f):
            d, q = g.get(f"dyn {f}"), g.get(f"{p} {f}")
            return f"{d / q:.2f}x" if d and q else "-"
        verdict = target(name, g)
        s.print(f"{name:28s}" + "".join(f" {g[c]:11.1f}" if c in g else f" {'-':>11s}"
                                        for c in cols) +
                "".join(f" {vs(p, f):>15s}" for f in FORMS for p in PEERS) + f"  {verdict}")
        rows.append({"case": name, "flops": flops, "gflops": g, "target": verdict,
                     "stats": {k: v.as_dict() for k, v in stats.items()}})
    s.finish({"cases": rows}, {"dtype": dt.name})


if __name__ == "__main__":
    main()
