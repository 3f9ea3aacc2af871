"""The demo: several ops over never-seen shapes, checked against NumPy, with the tables used,
the cache counters and the number of compilations on the run path (zero)."""
import os
import time

import numpy as np

import dynshape
from dynshape.testing import count_compilations

CASES = [
    ("relu", lambda x, rng: (x,), lambda x: np.maximum(x, 0)),
    ("gelu", lambda x, rng: (x,), None),
    ("add", lambda x, rng: (x, rng.standard_normal(x.shape[-1:]).astype(x.dtype)),
     lambda x, b: x + b),
    ("exp", lambda x, rng: (x,), np.exp),
    ("copy", lambda x, rng: (x.T,), lambda xt: np.ascontiguousarray(xt)),
]
SHAPES = [(1000003,), (517, 1531), (3, 255, 257), (7, 1, 13, 5), (77, 30522), (1,), (2, 0, 3)]


def _conv_ref(x, w, pad):
    """Plain NumPy conv2d (stride 1, symmetric padding) for the demo's check."""
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, m, oh, ow))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,mc->nmhw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return y


# compute ops on never-seen shapes: (label, call, reference)
COMPUTE = [
    ("matmul 517x1531 @ 1531x77", lambda r: (r((517, 1531)), r((1531, 77))),
     lambda a, b: dynshape.run("matmul", a, b), lambda a, b: a.astype(np.float64) @ b),
    ("matmul batch 5x(33x64) @ 64x129", lambda r: (r((5, 33, 64)), r((64, 129))),
     lambda a, b: dynshape.run("matmul", a, b, activation="relu"),
     lambda a, b: np.maximum(a.astype(np.float64) @ b, 0)),
    ("conv2d 1x16x57x61, 32x16x3x3", lambda r: (r((1, 16, 57, 61)), r((32, 16, 3, 3))),
     lambda x, w: dynshape.run("conv2d", x, w, pads=(1, 1, 1, 1)),
     lambda x, w: _conv_ref(x, w, 1)),
    ("max_pool2d 3x3/2 on 2x8x113x115", lambda r: (r((2, 8, 113, 115)),),
     lambda x: dynshape.run("max_pool2d", x, kernel_shape=(3, 3), strides=(2, 2)),
     lambda x: np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
     [:, :, ::2, ::2].max(axis=(-1, -2))),
]


def main():
    t0 = time.perf_counter()
    print("loading the static kernels this demo uses (the first run on a machine compiles "
          "them once, in 20 to 75 seconds on 2 cores by the machine; later runs load them "
          "from the cache) ...", flush=True)
    # every op the demo runs is float32 (its copies run on the unary float32 driver); it
    # fuses nothing, so conv2d and matmul run no epilogue program (no step interpreter)
    pairs = [(f, "float32") for f in ("conv", "matmul", "unary", "binary", "pool")]
    done = dynshape.warm(pairs=pairs, progress=True, processes=os.cpu_count() or 1,
                         epilogues=False)
    compiled = sum(1 for d in done if d[3])
    print(f"  kernels ready in {time.perf_counter() - t0:.1f} s ({compiled} compiled, "
          f"{len(done) - compiled} loaded); {dynshape.CATALOG.describe()}", flush=True)
    rng = np.random.default_rng(0)
    dynshape.set_policy("background")
    rows, compute = [], []
    with count_compilations() as compiles:
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
        for label, make, call, ref in COMPUTE:
            a = make(lambda shape: rng.standard_normal(shape).astype(np.float32))
            t = time.perf_counter()
            y = call(*a)
            dt = time.perf_counter() - t
            r = ref(*a)
            scale = np.abs(r).max() + 1.0
            np.testing.assert_allclose(y, r, rtol=1e-4, atol=1e-4 * scale)
            compute.append((label, dt))
    print(f"\n{'op':6s} {'shape':>16s} {'first call':>12s}")
    for op, shape, dt in rows:
        print(f"{op:6s} {str(shape):>16s} {dt * 1e3:10.3f} ms")
    print(f"\n{'compute op (float32)':34s} {'first call':>12s}")
    for label, dt in compute:
        print(f"{label:34s} {dt * 1e3:10.3f} ms")
    print(f"\nNumba compilations while running {len(rows) + len(compute)} calls on never-seen "
          f"shapes: {compiles.count}")
    dynshape.wait_optimized()
    print("\nThe table a (517, 1531) relu uses now (optimized in the background):")
    print(dynshape.explain("relu", (517, 1531)).describe(limit=4))
    print("\nThe table of a transposed copy (2-D tiles):")
    print(dynshape.explain("copy", np.empty((1531, 517), np.float32).T).describe(limit=4))
    print("\ncache:", dynshape.cache_stats())
    print("all results matched NumPy")
    return compiles.count


if __name__ == "__main__":
    main()
