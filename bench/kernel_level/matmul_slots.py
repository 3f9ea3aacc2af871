"""Kernel-level: every matmul micro-kernel slot alone, on one thread, on the shapes it is
made for: the numbers behind the cost model's per-slot rates.

    python -m bench.kernel_level.matmul_slots [--quick] [--dtype float32|float64]

Calls ``dynshape.testing.matmul_direct.gemm(a, b, slot=s)`` (the driver with a chosen slot,
bypassing dynshape's planner) with ``numba.set_num_threads(1)``; the slots of one shape are
timed in alternating blocks; GFLOP/s from median times.
"""
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
from bench.harness import environment  # noqa: E402

if __name__ == "__main__":
    environment.prepare(bind=environment.wants_bind())

import numpy as np  # noqa: E402

from bench.harness import session  # noqa: E402
from dynshape.testing.matmul_direct import gemm  # noqa: E402

SLOTS = 5
SHAPES = [(1024, 1024, 1024, None), (48, 192, 256, None), (17, 33, 64, 256),
          (8, 3072, 4096, None), (2048, 8, 2048, None), (384, 16, 512, None)]
QUICK_SHAPES = [(48, 64, 40, None), (17, 33, 64, 4)]


def main(argv=None):
    ap = session.options(__doc__, "matmul_slots.json")
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args(argv)
    dt = np.dtype(args.dtype)
    s = session.Session(f"matmul slots (kernel-level), {dt}, 1 thread", args)
    s.start(families=["matmul"], dtypes=[dt.name])
    import numba
    numba.set_num_threads(1)
    rng = np.random.default_rng(0)
    s.print(f"{dt.name}, 1 thread, GFLOP/s per slot (forced), median of alternating blocks")
    rows = []
    for M, N, K, nb in (QUICK_SHAPES if s.quick else SHAPES):
        a = rng.standard_normal((M, K) if nb is None else (nb, M, K)).astype(dt)
        b = rng.standard_normal((K, N) if nb is None else (nb, K, N)).astype(dt)
        ref = np.matmul(a.astype(np.float64), b)
        fns = {}
        for slot in range(SLOTS):
            r = gemm(a, b, slot=slot)
            err = np.abs(r - ref).max() / np.abs(ref).max()
            assert err < (1e-4 if dt == np.float32 else 1e-10), f"slot {slot}: error {err}"
            fns[f"s{slot}"] = lambda slot=slot: gemm(a, b, slot=slot)
        st = s.time(fns)
        flops = 2.0 * M * N * K * (nb or 1)
        g = {k: flops / v.median / 1e9 for k, v in st.items()}
        label = f"{M}x{N}x{K}" + (f" x{nb}" if nb else "")
        s.print(f"  {label:22s} " + " ".join(f"{k}={v:6.1f}" for k, v in g.items()))
        rows.append({"shape": label, "gflops": g, "stats": {k: v.as_dict() for k, v in st.items()}})
    numba.set_num_threads(environment.THREADS)
    s.finish({"rows": rows}, {"dtype": dt.name})


if __name__ == "__main__":
    main()
