"""Planner of the pool family: tiles of the output plane (OH x OW), VARIABLE_FULL tails only;
a tile's cost counts its window taps."""
import numpy as np

from dynshape.planning import cost_model
from dynshape.planning.makespan import makespan
from dynshape.planning.plane import Tiling

# cost constants (ns), measured roughly on the project's machine (3x3 stride-2 windows:
# about 150 ns per entry and 40 ns per output row of fixed cost, one tile of 4 x 57 outputs
# in 0.7 us)
ENTRY_NS = 150.0     # per work item: decode, offsets, padding columns of the row buffer
ROW_NS = 40.0        # per tile row: window rows clipped, views, pass set-up
TAP_NS = 0.1         # per output and window tap on the vector path


class PoolTiling(Tiling):
    """Tiling of the output plane; a tile's cost counts its window taps."""

    def __init__(self, *args, taps=9, **kw):
        super().__init__(*args, **kw)
        self.taps = taps

    def default_tile(self):
        """The narrowest tile whose width covers the bucket's widest output row."""
        hi1 = self.bucket[1][1]
        fitting = [t for t in self.slots if t[1] >= hi1]
        return min(fitting, key=lambda t: t[1]) if fitting else max(self.slots,
                                                                    key=lambda t: t[1])

    def cost(self, t0, rows, cols, model=None):
        model = model or self.model or cost_model.MODEL
        if hasattr(model, "walk_costs"):           # a device model: blocks of window taps
            c = model.tile_costs(t0, rows.valid(self.shape[0]), rows.mode,
                                 cols.valid(self.shape[1]) * self.taps, cols.mode, cols.tile,
                                 False)
            return model.makespan(c, self.n_outer)
        m, n = self.shape
        vr = rows.valid(m).astype(np.float64)[:, None]
        vc = cols.valid(n).astype(np.float64)[None, :]
        cost = ENTRY_NS + vr * (ROW_NS + vc * self.taps * TAP_NS)
        cost = np.where((vr == 0) | (vc == 0), ENTRY_NS, cost)
        return makespan(cost, model.threads, self.n_outer, "cyclic")
