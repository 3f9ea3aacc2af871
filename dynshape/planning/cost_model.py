"""Cost model of the CPU elementwise drivers, in nanoseconds, calibrated on this machine.

The model prices a table at a given shape: per work item (entry x outer index) a fixed cost,
per row of a tile a fixed cost, per element a cost that depends on the path (contiguous
vector loop, strided gather/scatter, discard scratch), and a parallel makespan over the
driver's threads. ``dynshape calibrate`` measures the constants on the host that runs them
(:mod:`dynshape.planning.calibration` says where they are kept); without a calibration the
defaults below are used and ``explain`` says so.
"""
import json
from dataclasses import asdict, dataclass

import numpy as np

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
        from dynshape_kernels.abi.tail_mode import DISCARD
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
        """The plane drivers' makespan (see :mod:`dynshape.planning.makespan`)."""
        from dynshape.planning.makespan import makespan
        return makespan(costs, self.threads, n_outer, "bound")


def use(model, source):
    """Price every table built from now on with ``model`` (``source`` says where it came
    from, for ``explain``)."""
    global MODEL, SOURCE
    MODEL, SOURCE = model, source


def reload():
    """Read this host's calibration again (after ``dynshape calibrate`` or a new table
    directory)."""
    from dynshape.planning import calibration
    use(*calibration.load())


MODEL, SOURCE = CostModel(), "defaults"
reload()


def calibrate(repeats=9):
    """Measure the constants by running the float32 unary driver on crafted tables.

    Each constant comes from a case where it dominates: empty entries (entry_ns), one-element
    rows (row_ns), long contiguous rows in cache (vec_ns), a transposed copy walked by row
    tiles and by 16x64 tiles (gather_ns and line_ns), DISCARD tails (discard_ns, alloc_ns).
    """
    import time

    import numba
    from dynshape_kernels import drivers
    from dynshape_kernels.catalog import CATALOG
    from dynshape_kernels.abi.tail_mode import DISCARD

    from dynshape.runtime.layout import plane
    from dynshape.tables.param_table import ParamTable

    threads = numba.get_num_threads()
    drv = drivers.get("unary", "float32")
    attrs = np.zeros(2, np.float32)

    def run(x, out, shape, strides, t0, t1, entries):
        t = ParamTable("unary", "relu", "float32", "cpu", CATALOG.hash, ((0, 1), (0, 1)),
                       entries, np.zeros(0), 2, CATALOG.family_base("unary", "float32"), 0,
                       "simplified", 0.0)
        p = plane(shape, strides)
        common = t.bind(p, [0, 0])
        xb, ob = x.reshape(-1), out.reshape(-1)
        drv(xb, ob, common, t.entries, attrs)
        best = float("inf")
        for _ in range(repeats):
            s = time.perf_counter()
            drv(xb, ob, common, t.entries, attrs)
            best = min(best, time.perf_counter() - s)
        return best * 1e9 * threads          # ns of work summed over threads

    def grid(m, n, t0, t1, mode=2):
        kid = CATALOG.kernel_id("unary", "relu", "float32",
                                [k[:2] for k in CATALOG.families["unary"].tiles].index((t0, t1)))
        r = np.arange(0, m, t0)
        c = np.arange(0, n, t1)
        e = np.zeros((len(r) * len(c), 7), np.int64)
        e[:, 0] = kid
        e[:, 1] = e[:, 2] = mode
        e[:, 3] = np.repeat(r, len(c))
        e[:, 5] = np.tile(c, len(r))
        return e

    n = 1 << 18
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    o = np.empty_like(x)
    flat = [(1,), (1,)]
    e_long = grid(1, n, 1, 16384)
    vec = run(x, o, (n,), flat, 1, 16384, e_long) / n
    empty = grid(1, n, 1, 512)
    empty[:, 5] += 10 * n                       # every entry resolves to nothing
    entry = run(x, o, (n,), flat, 1, 512, empty) / len(empty)
    rows = x.reshape(-1, 1)[: 1 << 15]
    e_rows = grid(1 << 15, 1, 16, 64)
    row = max(run(rows, o[: 1 << 15].reshape(-1, 1), rows.shape, [(1, 1), (1, 1)], 16, 64,
                  e_rows) / (1 << 15) - vec - entry / 16, 0.1)
    a = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
    out = np.empty_like(a)
    tr = [(1, 1024), (1024, 1)]
    per_row_tiles = (run(a, out, a.shape, tr, 1, 512, grid(1024, 1024, 1, 512)) / a.size
                     - row / 512)
    per_square = run(a, out, a.shape, tr, 16, 64, grid(1024, 1024, 16, 64)) / a.size \
        - row / 64 - entry / 1024
    line_elems = 16
    # row tiles: gather + line; 16-row tiles: gather + line / 16
    line = max((per_row_tiles - per_square) * line_elems / (line_elems - 1), 0.0)
    gather = max(per_row_tiles - line, vec)
    # DISCARD: 1024 outer rows of 256 valid columns in a 1x512 tile (a half-valid tail each)
    base = np.random.default_rng(2).standard_normal((1024, 512)).astype(np.float32)
    xo = base[:, :256]
    oo = np.empty_like(base)[:, :256]
    d = run(base, oo.base, xo.shape, [(512, 1), (512, 1)], 1, 512, grid(1, 256, 1, 512, DISCARD))
    discard = max((d / 1024 - entry - 512 * vec - 60.0) / (2 * 256), 0.05)
    return CostModel(entry_ns=round(entry, 2), row_ns=round(row, 2), vec_ns=round(vec, 4),
                     gather_ns=round(gather, 3), line_ns=round(line, 3),
                     line_elems=line_elems, discard_ns=round(discard, 3), alloc_ns=60.0,
                     threads=threads)


if __name__ == "__main__":
    from dynshape.planning import calibration
    m = calibrate()
    print(json.dumps(asdict(m), indent=1))
    print("written to", calibration.save(m))
