"""Cost model of the CPU elementwise drivers, in nanoseconds, calibrated on this machine.

The model prices a table at a given shape: per work item (entry x outer index) a fixed cost,
per row of a tile a fixed cost, per element a cost that depends on the path (contiguous
vector loop, strided gather/scatter, discard scratch), and a parallel makespan over the
driver's threads. ``python -m dynshape.cost_model`` re-measures the constants and writes
``cost_model_cpu.json`` next to this file; the committed file holds this machine's values.
"""
import json
import os
from dataclasses import asdict, dataclass

import numpy as np

_PATH = os.path.join(os.path.dirname(__file__), "cost_model_cpu.json")


@dataclass(frozen=True)
class CostModel:
    entry_ns: float = 20.0        # per work item (entry x outer index), valid or not
    row_ns: float = 2.0           # per row of a tile
    vec_ns: float = 0.08          # per element on the contiguous vector path
    gather_ns: float = 0.6        # per element with a non-unit column stride
    line_ns: float = 6.0          # per cache line touched by a strided read, amortized by rows
    line_elems: int = 16          # elements per cache line
    discard_ns: float = 2.0       # per valid element copied to and from a discard scratch tile
    alloc_ns: float = 60.0        # scratch allocation of a discard tile
    threads: int = 2

    def element_ns(self, t0, strided):
        if not strided:
            return self.vec_ns
        return self.gather_ns + self.line_ns / min(t0, self.line_elems)

    def tile_costs(self, t0, rows_valid, row_modes, cols_valid, col_modes, col_t,
                   strided):
        """Matrix (row segment x column segment) of per-work-item costs."""
        from dynshape_kernels.tail_mode import DISCARD
        vr = rows_valid.astype(np.float64)[:, None]
        vc = cols_valid.astype(np.float64)[None, :]
        ct = col_t.astype(np.float64)[None, :]
        el = self.element_ns(t0, strided)
        # OVERLAP tiles are full tiles (their valid length is T by construction)
        cost = self.entry_ns + vr * (self.row_ns + vc * el)
        disc = ((row_modes[:, None] == DISCARD) & (vr < t0)) | \
               ((col_modes[None, :] == DISCARD) & (vc < ct))
        disc_cost = (self.entry_ns + self.alloc_ns + t0 * (self.row_ns + ct * self.vec_ns)
                     + 2 * vr * vc * self.discard_ns)
        cost = np.where(disc, disc_cost, cost)
        empty = (vr == 0) | (vc == 0)
        return np.where(empty, self.entry_ns, cost)

    def makespan(self, costs, n_outer):
        total = float(costs.sum()) * n_outer
        biggest = float(costs.max()) if costs.size else 0.0
        return max(total / self.threads, biggest)


def load():
    if os.path.exists(_PATH):
        with open(_PATH) as f:
            data = json.load(f)
        return CostModel(**{k: v for k, v in data.items() if k in CostModel.__dataclass_fields__})
    return CostModel()


MODEL = load()


def calibrate(repeats=7):
    """Measure the model's constants with the float32 relu driver; returns a CostModel."""
    import time

    import numba

    from . import dispatcher
    from .layout import plane

    def best(fn):
        fn()
        ts = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return min(ts)

    x = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)
    o = np.empty_like(x)
    # per element, contiguous, in cache: 1M elements with large row tiles
    t_big = best(lambda: dispatcher.run("relu", x[: 1 << 18], out=o[: 1 << 18]))
    # per work item: many tiny tiles (a 32-wide strided column walk: rows of 1 element)
    xs = x[: 1 << 16].reshape(-1, 1)
    t_entries = best(lambda: dispatcher.run("relu", xs, out=o[: 1 << 16].reshape(-1, 1)))
    t_small = best(lambda: dispatcher.run("relu", x[:16], out=o[:16]))
    threads = numba.get_num_threads()
    vec = max((t_big - t_small) * 1e9 * threads / (1 << 18), 0.01)
    entry = max((t_entries - t_small) * 1e9 * threads / (1 << 16), 1.0)
    a = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
    out = np.empty_like(a)
    t_tr = best(lambda: dispatcher.run("copy", a.T, out=out))
    strided_el = max((t_tr - t_small) * 1e9 * threads / a.size, vec)
    del plane
    return CostModel(entry_ns=round(entry, 3), vec_ns=round(vec, 4),
                     gather_ns=round(strided_el / 2, 4), line_ns=round(strided_el * 2, 3),
                     threads=threads)


if __name__ == "__main__":
    m = calibrate()
    with open(_PATH, "w") as f:
        json.dump(asdict(m), f, indent=1)
    print(json.dumps(asdict(m), indent=1))
