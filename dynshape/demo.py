"""The demo: several ops over never-seen shapes, checked against NumPy, with the tables used,
the cache counters and the number of compilations on the run path (zero)."""
import time

import numpy as np

import dynshape
from dynshape import testing

CASES = [
    ("relu", lambda x, rng: (x,), lambda x: np.maximum(x, 0)),
    ("gelu", lambda x, rng: (x,), None),
    ("add", lambda x, rng: (x, rng.standard_normal(x.shape[-1:]).astype(x.dtype)),
     lambda x, b: x + b),
    ("exp", lambda x, rng: (x,), np.exp),
    ("copy", lambda x, rng: (x.T,), lambda xt: np.ascontiguousarray(xt)),
]
SHAPES = [(1000003,), (517, 1531), (3, 255, 257), (7, 1, 13, 5), (77, 30522), (1,), (2, 0, 3)]


def main():
    t0 = time.perf_counter()
    print("loading static kernels (compiled once per machine into Numba's cache; the first "
          "run on a new machine compiles them, later runs load them) ...", flush=True)
    dynshape.warm(["unary", "binary", "copy"], ["float32", "float64"])
    print(f"  kernels ready in {time.perf_counter() - t0:.1f} s; {dynshape.CATALOG.describe()}")
    rng = np.random.default_rng(0)
    dynshape.set_policy("background")
    rows = []
    with testing.count_compilations() as compiles:
        for shape in SHAPES:
            x = rng.standard_normal(shape).astype(np.float32)
            for op, args, ref in CASES:
                a = args(x, rng)
                t = time.perf_counter()
                y = dynshape.run(op, *a)
                dt = time.perf_counter() - t
                if ref is not None:
                    with np.errstate(all="ignore"):
                        np.testing.assert_allclose(y, ref(*a), rtol=2e-6, atol=1e-6)
                rows.append((op, shape, dt))
    print(f"\n{'op':6s} {'shape':>16s} {'first call':>12s}")
    for op, shape, dt in rows:
        print(f"{op:6s} {str(shape):>16s} {dt * 1e3:10.3f} ms")
    print(f"\nNumba compilations while running {len(rows)} calls on never-seen shapes: "
          f"{compiles.count}")
    dynshape.wait_optimized()
    print("\nThe table a (517, 1531) relu uses now (optimized in the background):")
    print(dynshape.explain("relu", (517, 1531)).describe(limit=4))
    print("\nThe table of a transposed copy (2-D tiles):")
    print(dynshape.explain("copy", np.empty((1531, 517), np.float32).T).describe(limit=4))
    print("\ncache:", dynshape.cache_stats())
    print("all results matched NumPy")


if __name__ == "__main__":
    main()
