"""Half precision: bfloat16 and float16 elementwise ops, reductions, row-wise ops and matmul
against the same ops in float32 and against PyTorch's bfloat16/float16 on the CPU.

    python -m bench.bench_half [--quick] [--json PATH] [--no-torch]

Large elementwise cases (relu, add, gelu, exp) on (3000, 10000) arrays, every side writing
into a preallocated output (``out=``); the results are checked against float32 NumPy
rounded to the format before they are timed. The goal (issue: half precision): elementwise
in bfloat16 at >= 1.8x the float32 rate in elements per second (half the bytes), and ahead
of PyTorch's bfloat16. Rates count elements of the output per second. A second table runs
sum, softmax, layer_norm (over the last axis of the same array), a 1024^3 matmul and a fused
chain ("fused chain": add bias, relu, mul 0.5, exp) against PyTorch eager.
"""
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.harness import environment  # noqa: E402

if __name__ == "__main__":
    environment.prepare(bind=environment.wants_bind())

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import dynshape  # noqa: E402
from bench.harness import session  # noqa: E402
from bench.harness.timing import fmt_time  # noqa: E402

SHAPE = (3000, 10000)
QUICK_SHAPE = (300, 1000)
OPS = (("relu", 1), ("add", 2), ("exp", 1), ("gelu", 1))
FORMATS = (("bfloat16", np.dtype(ml_dtypes.bfloat16), "bfloat16"),
           ("float16", np.dtype(np.float16), "float16"))


def impls(peers, op, arity, x32, fmt, tname):
    xs32 = [x32] * arity
    xs = [x32.astype(fmt)] * arity
    o32, oh = np.empty_like(x32), np.empty_like(xs[0])
    fns = {"dyn f32": lambda: dynshape.run(op, *xs32, out=o32),
           "dyn half": lambda: dynshape.run(op, *xs, out=oh)}
    if peers.torch:
        torch = peers.torch
        th = torch.from_numpy(x32).to(getattr(torch, tname))
        to = torch.empty_like(th)
        f = {"relu": lambda: torch.clamp_min(th, 0, out=to),
             "add": lambda: torch.add(th, th, out=to),
             "exp": lambda: torch.exp(th, out=to),
             "gelu": lambda: torch.ops.aten.gelu.out(th, out=to)}[op]
        fns["torch half"] = f
    return fns, oh


#: the other families: (label, dynshape call, torch call, work units, unit); every side
#: writes into a preallocated output except layer_norm, which allocates on both sides
MATMUL = (1024, 1024, 1024)
QUICK_MATMUL = (64, 96, 80)


def family_cases(peers, x32, fmt, tname, quick):
    """{label: (fns, work, unit)} for sum over the last axis, softmax, layer_norm and a
    square matmul, dynshape in float32 and in the format, PyTorch in the format."""
    torch = peers.torch
    M, N, K = QUICK_MATMUL if quick else MATMUL
    rng = np.random.default_rng(1)
    a32 = rng.standard_normal((M, K)).astype(np.float32)
    b32 = rng.standard_normal((K, N)).astype(np.float32)
    xh = x32.astype(fmt)
    ah, bh = a32.astype(fmt), b32.astype(fmt)
    rows = x32.shape[0]
    cases = {}

    def both(op, args32, argsh, out_shape, **kw):
        o32, oh = np.empty(out_shape, np.float32), np.empty(out_shape, fmt)
        return {"dyn f32": lambda: dynshape.run(op, *args32, out=o32, **kw),
                "dyn half": lambda: dynshape.run(op, *argsh, out=oh, **kw)}
    cases["sum last"] = (both("sum", [x32], [xh], (rows,), axis=-1), x32.size, "elem")
    cases["softmax"] = (both("softmax", [x32], [xh], x32.shape), x32.size, "elem")
    # torch's layer_norm has no out=: both sides allocate
    cases["layer_norm"] = ({"dyn f32": lambda: dynshape.run("layer_norm", x32),
                            "dyn half": lambda: dynshape.run("layer_norm", xh)},
                           x32.size, "elem")
    cases["matmul"] = (both("matmul", [a32, b32], [ah, bh], (M, N)), 2 * M * N * K, "flop")
    chain = dynshape.fuse([("add", "b"), "relu", ("mul", 0.5), "exp"])
    bias32 = rng.standard_normal(x32.shape[-1]).astype(np.float32)
    biash = bias32.astype(fmt)
    f32o, fho = np.empty_like(x32), np.empty_like(xh)
    cases["fused chain"] = ({"dyn f32": lambda: chain(x32, b=bias32, out=f32o),
                                        "dyn half": lambda: chain(xh, b=biash, out=fho)},
                                       x32.size, "elem")
    if torch:
        td = getattr(torch, tname)
        th = torch.from_numpy(x32).to(td)
        ta, tb = torch.from_numpy(a32).to(td), torch.from_numpy(b32).to(td)
        ts, tm = torch.empty(rows, dtype=td), torch.empty((M, N), dtype=td)
        tsm = torch.empty_like(th)
        cases["sum last"][0]["torch half"] = lambda: torch.sum(th, -1, out=ts)
        cases["softmax"][0]["torch half"] = \
            lambda: torch.ops.aten._softmax.out(th, -1, False, out=tsm)
        cases["layer_norm"][0]["torch half"] = \
            lambda: peers.F.layer_norm(th, th.shape[-1:])
        cases["matmul"][0]["torch half"] = lambda: torch.matmul(ta, tb, out=tm)
        tbias, to = torch.from_numpy(bias32).to(td), torch.empty_like(th)
        cases["fused chain"][0]["torch half"] = \
            lambda: torch.exp(torch.relu(th + tbias) * 0.5, out=to)
    return cases


def families(s, peers, x32, rows):
    s.print()
    s.print(f"{'case':22s} {'dyn f32':>10s} {'dyn half':>10s} {'torch half':>11s} "
            f"{'rate half':>12s} {'half/f32 rate':>13s} {'torch/dyn':>10s}")
    for fname, fmt, tname in FORMATS:
        for name, (fns, work, unit) in family_cases(peers, x32, fmt, tname, s.quick).items():
            st = s.time(fns)
            t = {k: v.median for k, v in st.items()}
            speed = t["dyn f32"] / t["dyn half"]
            vs = t["torch half"] / t["dyn half"] if "torch half" in t else None
            label = f"{name} {fname}"
            rate = f"{work / t['dyn half'] / 1e9:.2f} G{unit}/s"
            s.print(f"{label:22s} {fmt_time(t['dyn f32']):>10s} {fmt_time(t['dyn half']):>10s} "
                    f"{fmt_time(t.get('torch half')):>11s} {rate:>12s} {speed:13.2f} "
                    f"{('%.2f' % vs) if vs else '-':>10s}")
            rows.append({"case": label, "half_over_f32_rate": speed, "torch_over_dyn": vs,
                         "stats": {k: v.as_dict() for k, v in st.items()}})
    s.print("families: sum over the last axis, softmax and layer_norm over the last axis, "
            f"matmul {'x'.join(map(str, QUICK_MATMUL if s.quick else MATMUL))}; "
            "softmax through aten::_softmax.out; layer_norm allocates on both sides (torch has "
            "no out=); torch's eager chain allocates its intermediates (the final exp writes "
            "out=), dynshape's chain keeps none")


def main(argv=None):
    args = session.options(__doc__, "half.json").parse_args(argv)
    s = session.Session("dynshape half precision (elementwise), out= on every side", args)
    peers = s.start(families=["unary", "binary", "reduce", "rowwise", "matmul", "fused"],
                    dtypes=["float32", "float16", "bfloat16"])
    rng = np.random.default_rng(0)
    shape = QUICK_SHAPE if s.quick else SHAPE
    x32 = rng.standard_normal(shape).astype(np.float32)
    n = x32.size
    rows = []
    s.print(f"{'case':22s} {'dyn f32':>10s} {'dyn half':>10s} {'torch half':>11s} "
            f"{'Gelem/s half':>12s} {'half/f32 rate':>13s} {'torch/dyn':>10s}  target")
    for fname, fmt, tname in FORMATS:
        for op, arity in OPS:
            fns, oh = impls(peers, op, arity, x32, fmt, tname)
            fns["dyn half"]()
            xr = x32.astype(fmt).astype(np.float32)      # the same inputs, in float32
            ref = dynshape.run(op, *[xr] * arity).astype(fmt)
            np.testing.assert_allclose(oh.astype(np.float32), ref.astype(np.float32),
                                       rtol=1e-2, atol=1e-3, err_msg=op)
            st = s.time(fns)
            t = {k: v.median for k, v in st.items()}
            speed = t["dyn f32"] / t["dyn half"]
            vs = t["torch half"] / t["dyn half"] if "torch half" in t else None
            ok = speed >= 1.8 and (vs is None or vs > 1)
            label = f"{op} {fname}"
            s.print(f"{label:22s} {fmt_time(t['dyn f32']):>10s} {fmt_time(t['dyn half']):>10s} "
                    f"{fmt_time(t.get('torch half')):>11s} {n / t['dyn half'] / 1e9:12.2f} "
                    f"{speed:13.2f} {('%.2f' % vs) if vs else '-':>10s}  "
                    f"{'met' if ok else 'MISSED'}")
            rows.append({"case": label, "half_over_f32_rate": speed, "torch_over_dyn": vs,
                         "stats": {k: v.as_dict() for k, v in st.items()}})
    s.print("half/f32 rate: elements per second in the half format over float32 (goal >= 1.8); "
            "torch/dyn: PyTorch's time over dynshape's in the same format (> 1: dynshape "
            "faster); every side writes into out= (torch's gelu through aten::gelu.out)")
    families(s, peers, x32, rows)
    s.finish({"rows": rows})


if __name__ == "__main__":
    main()
