"""Planner of the walk families (reduce, row-wise): tiles of the kept plane whose every
element walks the reduced (normalized) elements inside the kernel. Same candidates as the
plane planner; the cost prices a tile by the elements it walks."""
import numpy as np
from dynshape_kernels.abi.common_area import STRAT_COLUMNS, STRAT_LANES

from dynshape.planning import cost_model
from dynshape.planning.makespan import makespan
from dynshape.planning.plane import Tiling

# cost constants (ns) of the walk drivers, measured roughly on the project's machine
ENTRY_NS = 80.0      # per work item: decode, scratch allocation
ROW_NS = 5.0         # per tile row
OUT_NS = 12.0        # LANES: per output element (run setup, final lane combine)
STEP_NS = 60.0       # COLUMNS: per reduced index and tile row: a new strided row (its
                     # lines missed by the prefetcher: 128-wide strips run at 1/4 the
                     # bandwidth of 1024-wide ones, measured)
ELEM_NS = 0.1        # per element and pass on the vector path


class WalkTiling(Tiling):
    """Tiling of a kept plane whose every element walks ``count`` reduced elements.

    Same candidates as :class:`Tiling`; the cost prices a tile by the reduced elements it
    walks with the strategy's per-output (LANES) or per-step (COLUMNS) overhead.
    """

    def __init__(self, *args, count=1, strategy=STRAT_LANES, passes=1, **kw):
        super().__init__(*args, **kw)
        self.count = max(int(count), 1)
        self.strategy = strategy
        self.passes = passes

    def cost(self, t0, rows, cols, model=None):
        model = model or self.model or cost_model.MODEL
        if hasattr(model, "walk_costs"):           # a device model prices walks itself
            return model.makespan(model.walk_costs(self, t0, rows, cols), self.n_outer)
        m, n = self.shape
        vr = rows.valid(m).astype(np.float64)[:, None]
        vc = cols.valid(n).astype(np.float64)[None, :]
        el = ELEM_NS * self.passes
        if self.strategy == STRAT_COLUMNS:
            per_row = self.count * self.passes * (STEP_NS + vc * el)
        else:
            per_row = vc * (OUT_NS + self.count * el)
        cost = ENTRY_NS + vr * (ROW_NS + per_row)
        cost = np.where((vr == 0) | (vc == 0), ENTRY_NS, cost)
        return makespan(cost, model.threads, self.n_outer, "cyclic")

    def default_tile(self):
        tiles = sorted(self.slots, key=lambda t: t[0] * t[1])
        if self.strategy == STRAT_COLUMNS:
            return max(self.slots, key=lambda t: (t[1], -t[0]))
        work = self.count * self.passes
        if work >= 4096:
            return tiles[0]
        if work >= 64:
            return tiles[len(tiles) // 2 - 1] if len(tiles) > 2 else tiles[0]
        return tiles[-1]
