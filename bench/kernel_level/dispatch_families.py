"""Cache-hit overhead of ``dynshape.run`` per family: a repeated small call (~1e3 elements)
against its compiled driver called directly with the same arguments, and PyTorch's time for
the same call (``out=`` where the op has it).

    python -m bench.kernel_level.dispatch_families [--quick] [--no-torch] [--cold]

Kernel-level on purpose: the driver's arguments are captured by wrapping the CPU target's
``drivers.get`` for one call, so that "kernel" is the compiled code alone (Numba's argument
unboxing included). overhead = run - kernel; the target is <= 5 us for every family.

``--cold`` also times single calls each made right after a copy of 4 MB on the calling
thread (``timing.after_eviction``): the call's code and data then come from L3 or memory,
as after a large kernel or other work in a serving loop. The cold overhead is run - kernel
in that state (informative: no target).
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
from bench.harness.timing import after_eviction, fmt_time  # noqa: E402

TARGET_S = 5e-6


def cases(torch):
    """name -> (dynshape call, torch call or None); inputs of ~1e3 elements, float32."""
    import dynshape
    rng = np.random.default_rng(0)

    def f32(*s):
        return rng.standard_normal(s).astype(np.float32)
    x, y, o = f32(32, 32), f32(32, 32), np.empty((32, 32), np.float32)
    img, w = f32(1, 4, 16, 16), f32(4, 4, 3, 3)
    fz = dynshape.fuse([("add", "b"), "relu"])
    ds = {
        "relu out=": lambda: dynshape.run("relu", x, out=o),
        "add out=": lambda: dynshape.run("add", x, y, out=o),
        "sum axis=1": lambda: dynshape.run("sum", x, axis=1),
        "softmax out=": lambda: dynshape.run("softmax", x, out=o),
        "matmul out=": lambda: dynshape.run("matmul", x, y, out=o),
        "max_pool2d 2x2/2": lambda: dynshape.run("max_pool2d", img, kernel_shape=(2, 2),
                                                 strides=(2, 2)),
        "conv2d 4->4 3x3": lambda: dynshape.run("conv2d", img, w, pads=(1, 1, 1, 1)),
        "fused add+relu out=": lambda: fz(x, b=y, out=o),
    }
    th = {}
    if torch is not None:
        tx, ty, to = (torch.from_numpy(a) for a in (x, y, o))
        ti, tw = torch.from_numpy(img), torch.from_numpy(w)
        F = torch.nn.functional
        th = {
            "relu out=": lambda: torch.clamp_min(tx, 0, out=to),
            "add out=": lambda: torch.add(tx, ty, out=to),
            "sum axis=1": lambda: torch.sum(tx, 1),
            "softmax out=": lambda: torch._softmax(tx, -1, False),
            "matmul out=": lambda: torch.matmul(tx, ty, out=to),
            "max_pool2d 2x2/2": lambda: F.max_pool2d(ti, 2, 2),
            "conv2d 4->4 3x3": lambda: F.conv2d(ti, tw, padding=1),
            "fused add+relu out=": lambda: torch.clamp_min(torch.add(tx, ty, out=to), 0,
                                                           out=to),
        }
    return ds, th


def kernel_of(call):
    """The compiled driver and the arguments ``call`` passes it (captured once)."""
    from dynshape.runtime import targets
    cpu = targets.get_target("cpu")
    seen = {}

    class Spy:
        def __init__(self, inner):
            self.inner = inner

        def get(self, family, dtype):
            d = self.inner.get(family, dtype)

            def capture(*args):
                seen["driver"], seen["args"] = d, args
                return d(*args)
            return capture
    from dynshape.runtime.replay import REPLAY
    real = cpu.drivers
    # a replay calls the driver it fetched when it was recorded: without one, the call takes
    # the full path, which fetches the driver through the spy; none is kept that calls it
    REPLAY.clear()
    cpu.drivers = Spy(real)
    try:
        call()
    finally:
        cpu.drivers = real
        REPLAY.clear()
    driver, args = seen["driver"], seen["args"]
    return lambda: driver(*args)


#: bytes the copy that evicts the calling core's caches moves before a cold call, half read
#: and half written: four times the 2 MiB of L2 per core on the machines measured
EVICT_BYTES = 8 << 20


def evictor(nbytes=EVICT_BYTES):
    """A callable that copies ``nbytes // 2`` bytes into another ``nbytes // 2`` on the
    calling thread (NumPy's single-threaded copy), pushing out of its core's caches what
    was there."""
    src = np.ones(nbytes // 8, np.float32)
    dst = np.empty_like(src)
    return lambda: np.copyto(dst, src)


def main():
    ap = session.options(__doc__, "dispatch_families.json")
    ap.add_argument("--cold", action="store_true",
                    help="also time single calls right after an eviction of the caches")
    args = ap.parse_args()
    s = session.Session("dynshape cache-hit overhead per family", args)
    peers = s.start(families=["unary", "binary", "reduce", "rowwise", "matmul", "pool", "conv",
                              "fused"], dtypes=["float32"])
    import dynshape
    ds, th = cases(peers.torch)
    for call in ds.values():
        call()
        call()
    dynshape.wait_optimized()
    rows = []
    evict = evictor() if args.cold else None
    cold_head = f" {'cold run':>9s} {'cold ker':>9s} {'cold ovh':>9s} {'cold tor':>9s}" \
        if args.cold else ""
    s.print(f"{'call':22s} {'run':>9s} {'kernel':>9s} {'overhead':>9s} {'torch':>9s}"
            f"{cold_head}  target")
    for name, call in ds.items():
        fns = {"run": call, "kernel": kernel_of(call)}
        if name in th:
            fns["torch"] = th[name]
        st = s.time(fns, sample_s=2e-3)
        run, kern = st["run"].median, st["kernel"].median
        tor = st["torch"].median if "torch" in st else None
        over = run - kern
        row = {"case": name, "run_s": run, "kernel_s": kern, "overhead_s": over,
               "torch_s": tor, "stats": {k: v.as_dict() for k, v in st.items()}}
        cold = ""
        if evict is not None:
            cs = after_eviction(fns, evict, calls=10 if s.quick else 200)
            crun, ckern = cs["run"].median, cs["kernel"].median
            ctor = cs["torch"].median if "torch" in cs else None
            cold = (f" {fmt_time(crun):>9s} {fmt_time(ckern):>9s} {fmt_time(crun - ckern):>9s}"
                    f" {fmt_time(ctor):>9s}")
            row.update({"cold_run_s": crun, "cold_kernel_s": ckern,
                        "cold_overhead_s": crun - ckern, "cold_torch_s": ctor,
                        "cold_stats": {k: v.as_dict() for k, v in cs.items()}})
        s.print(f"{name:22s} {fmt_time(run):>9s} {fmt_time(kern):>9s} {fmt_time(over):>9s} "
                f"{fmt_time(tor):>9s}{cold}  {'met' if over <= TARGET_S else 'MISSED'}")
        rows.append(row)
    s.finish({"cases": rows, "target_overhead_s": TARGET_S,
              "cold_evict_bytes": EVICT_BYTES if args.cold else None})


if __name__ == "__main__":
    main()
