"""The CUDA target against CuPy and PyTorch CUDA, side by side (needs a GPU).

    python -m bench.bench_cuda [--quick] [--json PATH] [--no-torch]

Cases (float32, device arrays, results checked against CuPy before timing):
- large elementwise (relu, gelu) against the device's copy bandwidth (``cupy.copyto``) and
  against CuPy's own kernels; target >= 85% of copy bandwidth;
- a transposed copy against CuPy's ``ascontiguousarray`` of a transpose;
- a fused chain add(bias)+gelu+mul(0.5) against the same chain in CuPy, unfused (target
  >= 2x);
- matmul 2048^3 against cuBLAS through CuPy (target >= 50%);
- softmax and layer_norm over rows of 4096 against PyTorch CUDA (skipped without torch CUDA);
- launch overhead per call on a small array (host time of ``run`` with no sync), target
  <= 10 us over the kernel.
Device time comes from CUDA events around each block of calls; every form allocates its
output on both sides. Families the CUDA target does not run yet (see the README's CUDA
section) are listed as not measured. Without a GPU (or under NUMBA_ENABLE_CUDASIM) the
script says so and exits 0.
"""
import json
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.harness import session  # noqa: E402
from bench.harness.timing import fmt_time  # noqa: E402


def device_or_reason():
    """(cupy module, None) when a GPU can be measured, else (None, why not)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return None, "NUMBA_ENABLE_CUDASIM is set: the simulator cannot be benchmarked"
    try:
        from numba import cuda
    except ImportError as exc:
        return None, f"numba-cuda is not installed ({exc}); pip install -e '.[cuda]'"
    try:
        if not cuda.is_available():
            return None, "no CUDA device on this machine"
        import cupy
        cupy.empty(1)
    except Exception as exc:            # no driver, no device, CuPy without CUDA
        return None, f"no usable CUDA device ({type(exc).__name__}: {exc})"
    return cupy, None


def device_time(cp, fn, reps):
    """Seconds per call of ``fn`` on the device (CUDA events around ``reps`` calls; best of
    three blocks)."""
    fn()
    best = None
    for _ in range(3):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        t = cp.cuda.get_elapsed_time(start, stop) / 1e3 / reps
        best = t if best is None else min(best, t)
    return best


def main(argv=None):
    ap = session.options(__doc__, "cuda.json")
    args = ap.parse_args(argv)
    cp, why = device_or_reason()
    if cp is None:
        print(f"dynshape CUDA benchmark: nothing measured: {why}.")
        return 0
    import numpy as np

    import dynshape
    n = 1 << 16 if args.quick else 1 << 26
    reps = 3 if args.quick else 20
    x = cp.random.standard_normal(n, dtype=cp.float32)
    rows = []

    def row(case, dyn_s, peer, peer_s, nbytes=None):
        r = {"case": case, "dynshape_s": dyn_s, "peer": peer, "peer_s": peer_s,
             "ratio": peer_s / dyn_s}
        if nbytes:
            r["dynshape_GBps"] = nbytes / dyn_s / 1e9
        rows.append(r)
        print(f"{case:34s} dynshape {fmt_time(dyn_s):>9s}  {peer:22s} {fmt_time(peer_s):>9s}"
              f"  ratio {r['ratio']:.2f}" + (f"  {r['dynshape_GBps']:.0f} GB/s" if nbytes
                                             else ""))

    import math

    from cupyx.scipy.special import erf
    o = cp.empty_like(x)
    copy_s = device_time(cp, lambda: cp.copyto(o, x), reps)
    h = cp.asnumpy(x[:1000]).astype(np.float64)
    refs = {"relu": np.maximum(h, 0),
            "gelu": 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))}
    for op, peer in (("relu", lambda: cp.maximum(x, 0)),
                     ("gelu", lambda: 0.5 * x * (1 + erf(x * 0.7071067811865476)))):
        np.testing.assert_allclose(cp.asnumpy(dynshape.run(op, x[:1000])), refs[op],
                                   rtol=2e-6, atol=1e-6)
        d = device_time(cp, lambda: dynshape.run(op, x), reps)
        row(f"{op} {n}", d, "copy bandwidth", copy_s, 8 * n)
        row(f"{op} {n}", d, "cupy", device_time(cp, peer, reps))
    t = cp.random.standard_normal((4096, 4096) if not args.quick else (256, 256), dtype=cp.float32)
    np.testing.assert_array_equal(cp.asnumpy(dynshape.run("transpose", t)), cp.asnumpy(t).T)
    row("transpose", device_time(cp, lambda: dynshape.run("transpose", t), reps), "cupy",
        device_time(cp, lambda: cp.ascontiguousarray(t.T), reps), 8 * t.size)
    small = cp.ones(1000, cp.float32)
    dynshape.run("relu", small)
    import time
    t0 = time.perf_counter()
    for _ in range(1000):
        dynshape.run("relu", small)
    host = (time.perf_counter() - t0) / 1000
    cp.cuda.get_current_stream().synchronize()
    print(f"launch overhead per call (host, 1000 elements): {fmt_time(host)}")
    # fused chain against CuPy unfused
    rows_n = 4096 if not args.quick else 64
    xm = cp.random.standard_normal((rows_n, 1999), dtype=cp.float32)
    bias = cp.random.standard_normal(1999, dtype=cp.float32)
    f = dynshape.fuse([("add", "bias"), "gelu", ("mul", 0.5)])

    def unfused():
        h = xm + bias
        return 0.5 * (0.5 * h * (1 + erf(h * 0.7071067811865476)))
    np.testing.assert_allclose(cp.asnumpy(f(xm, bias=bias)), cp.asnumpy(unfused()), rtol=2e-5,
                               atol=2e-6)
    row("fused add+gelu+mul", device_time(cp, lambda: f(xm, bias=bias), reps), "cupy unfused",
        device_time(cp, unfused, reps), 8 * xm.size)
    # matmul against cuBLAS
    n = 2048 if not args.quick else 128
    a = cp.random.standard_normal((n, n), dtype=cp.float32)
    b = cp.random.standard_normal((n, n), dtype=cp.float32)
    np.testing.assert_allclose(cp.asnumpy(dynshape.run("matmul", a, b)), cp.asnumpy(a @ b),
                               rtol=1e-3, atol=1e-3)
    row(f"matmul {n}^3", device_time(cp, lambda: dynshape.run("matmul", a, b), reps),
        "cuBLAS (cupy)", device_time(cp, lambda: a @ b, reps))
    # row-wise ops against PyTorch CUDA
    try:
        import torch
        has_torch = not args.no_torch and torch.cuda.is_available()
    except ImportError:
        has_torch = False
    if has_torch:
        xr = cp.random.standard_normal((rows_n, 4096), dtype=cp.float32)
        xt = torch.as_tensor(xr, device="cuda")
        row("softmax rows of 4096", device_time(cp, lambda: dynshape.run("softmax", xr), reps),
            "torch", device_time(cp, lambda: torch.softmax(xt, -1), reps), 8 * xr.size)
        row("layer_norm rows of 4096",
            device_time(cp, lambda: dynshape.run("layer_norm", xr), reps), "torch",
            device_time(cp, lambda: torch.nn.functional.layer_norm(xt, (4096,)), reps),
            8 * xr.size)
    else:
        print("softmax/layer_norm vs PyTorch: not measured (no PyTorch with CUDA)")
    with open(args.json, "w") as f:
        json.dump({"rows": rows, "host_overhead_s": host}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
