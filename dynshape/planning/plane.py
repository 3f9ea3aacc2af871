"""Combination algorithm: cover an inner plane bucket with static-kernel tiles (seed 004).

A table for a bucket ``(lo, hi]`` per dimension must be right for every size in the bucket.
Per dimension, a *segmentation* lays full tiles from the start over ``[0, lo)`` (a mix of
tile lengths, largest first) and covers the rest ``[pos, n)`` with tail tiles whose tail mode
makes them right for any ``n`` in the bucket:

* VARIABLE_FULL / DISCARD: tail tiles at fixed offsets; a tile past ``n`` has length 0.
* OVERLAP: tail tiles anchored back from the end (``n - k*T``), always full; needs ``lo >= k*T``.
* VARIABLE_PARTIAL: full tiles then one tile whose length stays in its window ``T-w..T``
  for every n in the bucket.

Entries are the product of a row segmentation and a column segmentation.

``simplified``: one tile shape chosen by layout, VARIABLE_FULL tails: a few NumPy calls.
``optimized``: every tile group, bulk mix, tail length and tail mode allowed, priced by the
cost model at the requested shape; the simplified candidate is among them, so the optimized
table never costs more.
"""
from dataclasses import dataclass

import numpy as np
from numba import njit
from dynshape_kernels.abi.common_area import (E_ANCH0, E_ANCH1, E_KID, E_MODE0, E_MODE1, E_NCOL,
                                          E_OFF0, E_OFF1)
from dynshape_kernels.abi.storage import carrier
from dynshape_kernels.abi.tail_mode import (ANCHOR_END, ANCHOR_START, DISCARD, OVERLAP,
                                        VARIABLE_FULL, VARIABLE_PARTIAL)

from dynshape.planning import cost_model

#: the largest 2-D tile, in bytes, a table may use: the drivers allocate a scratch tile per
#: 2-D work item, and a float64 128 x 128 one (128 KiB, glibc's default mmap threshold) made
#: a 600 x 601 transposed add 18% slower than 64 x 64 tiles (138-141 -> 164-171 us, 2
#: threads), where float32's 64 KiB one is no slower
SCRATCH_BYTES = 64 * 1024


@dataclass
class Segmentation:
    """One dimension's tiles: offsets, anchors, tile lengths and tail modes (arrays)."""
    off: np.ndarray
    anchor: np.ndarray
    tile: np.ndarray
    mode: np.ndarray

    def valid(self, size):
        """Resolved valid length of every tile at ``size`` (same rule as the drivers)."""
        o = np.where(self.anchor == ANCHOR_END, size - self.off, self.off)
        v = np.minimum(self.tile, size - o)
        return np.where((o < 0) | (o >= size), 0, v)


def segment(lo, hi, bulk, tail_t, tail_w, mode):
    """Segmentation of a dimension for every size in (lo, hi], or None if ``mode`` can't."""
    offs, tiles = [], []
    pos = 0
    for t in bulk:
        k = (lo - pos) // t
        if k > 0:
            offs.append(pos + np.arange(k, dtype=np.int64) * t)
            tiles.append(np.full(k, t, dtype=np.int64))
            pos += k * t
    m = -(-(hi - pos) // tail_t)
    anchor_tail = ANCHOR_START
    if mode == OVERLAP:
        if lo + 1 < m * tail_t:
            return None
        tail_off = (m - np.arange(m, dtype=np.int64)) * tail_t
        anchor_tail = ANCHOR_END
    else:
        if mode == VARIABLE_PARTIAL:
            last_min = lo + 1 - pos - (m - 1) * tail_t
            if tail_w <= 0 or last_min < tail_t - tail_w:
                return None
        tail_off = pos + np.arange(m, dtype=np.int64) * tail_t
    n_bulk = sum(len(o) for o in offs)
    offs.append(tail_off)
    tiles.append(np.full(m, tail_t, dtype=np.int64))
    off = np.concatenate(offs) if len(offs) > 1 else offs[0]
    tile = np.concatenate(tiles) if len(tiles) > 1 else tiles[0]
    anchor = np.full(len(off), ANCHOR_START, dtype=np.int64)
    anchor[n_bulk:] = anchor_tail
    modes = np.full(len(off), VARIABLE_FULL, dtype=np.int64)
    modes[n_bulk:] = mode
    return Segmentation(off, anchor, tile, modes)


class Combination:
    """Entries plus their model cost; the cost may be a callable evaluated on first use (the
    simplified variant on the run path does not need it)."""

    def __init__(self, entries, cost, variant, description):
        self.entries = entries
        self._cost = cost
        self.variant = variant
        self.description = description

    @property
    def cost(self):
        if callable(self._cost):
            self._cost = self._cost()
        return self._cost


@njit("int64[:, ::1](int64, int64, int64, int64, int64, int64, int64)", cache=True, nogil=True)
def uniform_entries(lo0, hi0, t0, lo1, hi1, t1, kid):
    """Entries of the simplified variant: one tile shape, VARIABLE_FULL tails, in one pass."""
    k0 = lo0 // t0
    r = k0 + -(-(hi0 - k0 * t0) // t0)
    k1 = lo1 // t1
    c = k1 + -(-(hi1 - k1 * t1) // t1)
    e = np.empty((r * c, E_NCOL), dtype=np.int64)
    i = 0
    for a in range(r):
        for b in range(c):
            e[i, E_KID] = kid
            e[i, E_MODE0] = VARIABLE_FULL
            e[i, E_MODE1] = VARIABLE_FULL
            e[i, E_OFF0] = a * t0
            e[i, E_ANCH0] = ANCHOR_START
            e[i, E_OFF1] = b * t1
            e[i, E_ANCH1] = ANCHOR_START
            i += 1
    return e


class Tiling:
    """The combination problem of one call: family tiles, bucket, shape, layout, allowed modes."""

    def __init__(self, catalog, family, op, dtype, bucket, shape, n_outer, strided, modes,
                 model=None, repeats=False):
        self.catalog = catalog
        self.model = model            # the target's cost model (None: the CPU's, as calibrated)
        self.fam = catalog.families[family]
        self.op = op
        self.dtype = dtype
        self.bucket = bucket          # ((lo0, hi0), (lo1, hi1))
        self.shape = shape            # (m, n) the cost is evaluated at
        self.n_outer = n_outer
        self.strided = strided        # some operand walks columns with a non-unit stride
        self.modes = modes            # allowed tail modes
        self.repeats = repeats        # an input repeats one row, or one value per row
        size = np.dtype(carrier(dtype)).itemsize
        self.slots = {(t0, t1): (s, w) for s, (t0, t1, w) in enumerate(self.fam.tiles)
                      if t0 == 1 or t0 * t1 * size <= SCRATCH_BYTES}

    def kernel_ids(self, t0, tiles1):
        ids = np.empty(len(tiles1), dtype=np.int64)
        for t1 in np.unique(tiles1):
            ids[tiles1 == t1] = self.catalog.kernel_id(self.fam.name, self.op, self.dtype,
                                                       self.slots[(t0, int(t1))][0])
        return ids

    def entries(self, t0, rows, cols):
        r, c = len(rows.off), len(cols.off)
        e = np.empty((r * c, E_NCOL), dtype=np.int64)
        e[:, E_KID] = np.tile(self.kernel_ids(t0, cols.tile), r)
        e[:, E_MODE0] = np.repeat(rows.mode, c)
        e[:, E_MODE1] = np.tile(cols.mode, r)
        e[:, E_OFF0] = np.repeat(rows.off, c)
        e[:, E_ANCH0] = np.repeat(rows.anchor, c)
        e[:, E_OFF1] = np.tile(cols.off, r)
        e[:, E_ANCH1] = np.tile(cols.anchor, r)
        return e

    def cost(self, t0, rows, cols, model=None):
        model = model or self.model or cost_model.MODEL
        m, n = self.shape
        costs = model.tile_costs(t0, rows.valid(m), rows.mode, cols.valid(n), cols.mode,
                                 cols.tile, self.strided, self.repeats)
        return model.makespan(costs, self.n_outer)

    def default_tile(self):
        """The simplified variant's single tile shape, by layout."""
        if self.strided and self.shape[0] > 1:
            return min(self.slots, key=lambda t: (-t[0], t[1]))       # the square tile
        return sorted(self.slots)[1]                                   # the medium row tile

    def simplified(self):
        """One tile shape, VARIABLE_FULL tails: the entries come from one compiled call and
        the cost is only computed when asked for."""
        t0, t1 = self.default_tile()
        (lo0, hi0), (lo1, hi1) = self.bucket
        kid = self.catalog.kernel_id(self.fam.name, self.op, self.dtype, self.slots[(t0, t1)][0])
        entries = uniform_entries(lo0, hi0, t0, lo1, hi1, t1, kid)

        def cost():
            rows = segment(lo0, hi0, [t0], t0, 0, VARIABLE_FULL)
            cols = segment(lo1, hi1, [t1], t1, 0, VARIABLE_FULL)
            return self.cost(t0, rows, cols)
        return Combination(entries, cost, "simplified", f"{t0}x{t1} tiles, variable tails")

    def candidates(self):
        (lo0, hi0), (lo1, hi1) = self.bucket
        groups = {}
        for (t0, t1), (_, w) in self.slots.items():
            groups.setdefault(t0, []).append((t1, w))
        row_modes = [m for m in (VARIABLE_FULL, DISCARD, OVERLAP) if m in self.modes]
        col_modes = [m for m in (VARIABLE_FULL, VARIABLE_PARTIAL, DISCARD, OVERLAP)
                     if m in self.modes]
        for t0, cols_avail in groups.items():
            cols_avail.sort(reverse=True)
            sizes = [t for t, _ in cols_avail]
            row_opts = [(mo, segment(lo0, hi0, [t0], t0, 0, mo)) for mo in row_modes]
            col_opts = []
            for i in range(len(sizes)):
                bulk = sizes[i:]
                for tail_t, w in cols_avail[i:]:
                    for mo in col_modes:
                        seg = segment(lo1, hi1, bulk, tail_t, w, mo)
                        if seg is not None:
                            col_opts.append((f"columns {bulk} tail {tail_t}", mo, seg))
            for rmo, rows in row_opts:
                if rows is None:
                    continue
                for cdesc, cmo, cols in col_opts:
                    # an OVERLAP entry must be a full tile (its rewrite recomputes the same
                    # values): the other dimension's tiles too, which only OVERLAP ones and
                    # one-row tiles are for every size of the bucket
                    if (rmo == OVERLAP and cmo != OVERLAP) or \
                            (cmo == OVERLAP and rmo != OVERLAP and t0 > 1):
                        continue
                    yield (t0, rows, cols,
                           f"{t0}-row tiles ({_MODE_NAMES[rmo]} tails), {cdesc} "
                           f"({_MODE_NAMES[cmo]} tails)")

    def optimized(self):
        simple = self.simplified()
        best = None
        for t0, rows, cols, desc in self.candidates():
            c = self.cost(t0, rows, cols)
            if best is None or c < best[0]:
                best = (c, t0, rows, cols, desc)
        if best is None or best[0] >= simple.cost:
            return Combination(simple.entries, simple.cost, "optimized",
                               simple.description + " (simplified was cheapest)")
        c, t0, rows, cols, desc = best
        return Combination(self.entries(t0, rows, cols), c, "optimized", desc)


_MODE_NAMES = {DISCARD: "discard", OVERLAP: "overlap", VARIABLE_FULL: "variable",
               VARIABLE_PARTIAL: "partial"}
