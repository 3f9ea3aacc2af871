"""Cost model of the CPU elementwise drivers, in nanoseconds, calibrated on this machine.

The model prices a table at a given shape: per work item (entry x outer index) a fixed cost,
per row of a tile a fixed cost, per element a cost that depends on the path (contiguous
vector loop, strided gather/scatter, discard scratch), and a parallel makespan over the
driver's threads. ``dynshape calibrate`` measures the constants on the host that runs them
and :mod:`dynshape.planning.calibration` applies them; without a calibration the defaults
below are used and ``explain`` says so.
"""
from dataclasses import dataclass

import numpy as np

#: rows shorter than this expand a repeating input into a scratch tile in the CPU drivers
#: (``dynshape_kernels.cpu.elementwise.SHORT_ROW``, kept equal by a test; not imported:
#: the drivers' module would load at ``import dynshape``)
SHORT_ROW = 256
#: up to this many work items the plane drivers' makespan follows their contiguous split:
#: the bound saw 128 x 128 tiles of a 300 x 301 transposed add (3 x 3 entries: four full,
#: four edges, a corner) as balanced, where the first thread takes four full tiles and an
#: edge (float32, 2 threads, in one process: 42-43 us against 36-38 for 64 x 64 tiles)
DEALT_ITEMS = 256


@dataclass(frozen=True)
class CostModel:
    entry_ns: float = 20.0        # per work item (entry x outer index), valid or not
    run_entry_ns: float = 0.5     # per one-row entry that a run of rows takes on (see below)
    row_ns: float = 2.0           # per row of a tile
    vec_ns: float = 0.08          # per element on the contiguous vector path
    gather_ns: float = 0.6        # per element with a non-unit column stride
    line_ns: float = 6.0          # per cache line touched by a strided read, amortized by rows
    line_elems: int = 16          # elements per cache line
    discard_ns: float = 2.0       # per valid element copied to and from a discard scratch tile
    alloc_ns: float = 60.0        # scratch allocation of a discard tile
    expand_ns: float = 0.16       # per element of a repeating input expanded into a tile
    threads: int = 2

    def element_ns(self, rows, strided):
        """Per element of a tile with ``rows`` valid rows (an array is fine): a strided
        read's cache lines are shared by the rows a tile walks together, so only valid rows
        amortize them (a 1-row plane in a 64-row tile gets nothing from the other 63)."""
        if not strided:
            return self.vec_ns
        return self.gather_ns + self.line_ns / np.clip(rows, 1, self.line_elems)

    def tile_costs(self, t0, rows_valid, row_modes, cols_valid, col_modes, col_t,
                   strided, repeats=False):
        """Matrix (row segment x column segment) of per-work-item costs. ``repeats``: an
        input repeats one row for every row or one value per row (a bias)."""
        from dynshape_kernels.abi.tail_mode import DISCARD
        vr = rows_valid.astype(np.float64)[:, None]
        vc = cols_valid.astype(np.float64)[None, :]
        ct = col_t.astype(np.float64)[None, :]
        el = self.element_ns(vr, strided)
        # OVERLAP tiles are full tiles (their valid length is T by construction); a strided
        # 2-D tile runs through a scratch tile allocated per work item
        # one-row tiles each holding a whole row (one column segment) of unit-stride
        # operands: the drivers run the entries that continue each other row by row as ONE
        # switch call over those rows, so such an entry costs its run's check of it, not a
        # work item's decoding (add of a bias row over 20000 x 77, 2 threads: these tiles
        # 106-134 us, 64 x 64 tiles with a 13-column tail 162-209 us, which the model
        # without runs priced lower)
        entry = self.entry_ns
        if t0 == 1 and not strided and len(col_modes) == 1 and col_modes[0] != DISCARD:
            entry = self.run_entry_ns
        cost = entry + vr * (self.row_ns + vc * el)
        if repeats and t0 > 1 and not strided:
            # a tile of short rows copies the repeating input into a scratch tile of its
            # valid size first (elementwise._short_rows), where a run of one-row entries
            # over rows that follow each other fills one tile of whole rows once per run
            # (_repeated_row): add of a bias row over 80000 x 16 float32, driver alone, 2
            # threads: 64 x 64 tiles 210 us, one-row tiles 97 us, which the model without
            # the copy priced the higher of the two)
            cost = cost + np.where(vc < SHORT_ROW, vr * vc * self.expand_ns, 0.0)
        if strided and t0 > 1:
            cost = cost + self.alloc_ns
        disc = ((row_modes[:, None] == DISCARD) & (vr < t0)) | \
               ((col_modes[None, :] == DISCARD) & (vc < ct))
        disc_cost = (self.entry_ns + self.alloc_ns + t0 * (self.row_ns + ct * self.vec_ns)
                     + 2 * vr * vc * self.discard_ns)
        if strided:                # the scratch tile is filled by the same strided reads
            disc_cost = disc_cost + vr * vc * el
        cost = np.where(disc, disc_cost, cost)
        empty = (vr == 0) | (vc == 0)
        # (a run's empty entries are the table's rows past the shape, which the drivers
        # leave out of their work items)
        return np.where(empty, entry, cost)

    def makespan(self, costs, n_outer):
        """The plane drivers' makespan (see :mod:`dynshape.planning.makespan`): for a few
        work items, the contiguous split that ``prange`` gives them (one chunk per thread);
        for more, the bound."""
        from dynshape.planning.makespan import makespan
        items = np.size(costs) * max(int(n_outer), 1)
        return makespan(costs, self.threads, n_outer,
                        "chunks" if items <= DEALT_ITEMS else "bound")


def use(model, source):
    """Price every table built from now on with ``model`` (``source`` says where it came
    from, for ``explain``)."""
    global MODEL, SOURCE
    MODEL, SOURCE = model, source


MODEL, SOURCE = CostModel(), "defaults"


def for_target(target):
    """The cost model that prices tables of ``target``: the CPU's (calibrated where
    calibration exists) or the model a device target registered (:func:`register`)."""
    return _TARGET_MODELS.get(target) or MODEL


_TARGET_MODELS = {}


def source_for(target):
    """Where the model pricing ``target``'s tables comes from (for ``explain``)."""
    model = _TARGET_MODELS.get(target)
    if model is None:
        return SOURCE
    return getattr(model, "source", f"{type(model).__name__} defaults")


def register(target, model):
    """Price the tables of ``target`` with ``model`` (an object with the CPU model's
    ``tile_costs`` and ``makespan``, and ``walk_costs`` for reductions and row-wise ops)."""
    _TARGET_MODELS[target] = model
