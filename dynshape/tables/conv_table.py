"""ConvTable: the ParamTable of conv2d, one entry per output tile (layout ``abi.conv_table``)."""
import numpy as np
from dynshape_kernels.abi.conv_table import (ENTRY_COLUMNS, T_KID, T_M0, T_MV, T_N, T_NCOL,
                                              T_OH0, T_OW0, T_VH, T_VW)
from dynshape_kernels.abi.tiles import (CONV_DIRECT_SLOT as DIRECT_SLOT, CONV_TILES,
                                        CONV_WINDOW_TILES)
from dynshape_kernels.catalog import CATALOG, catalog_for

from dynshape.errors import TableFormatError
from dynshape.tables.param_table import TABLE_CLASSES, ParamTable, call_lines

FAMILY = "conv"
N_SLOTS = len(CONV_TILES)


class ConvTable(ParamTable):
    """A conv2d parameter table: entries (E, 11) int64 (layout ``abi.conv_table``) valid for
    every shape of its bucket; ``meta`` holds the geometry it was built for (``geo``), the
    kernel slot and the thread count it was balanced for. Saved and loaded like every
    ParamTable."""

    @classmethod
    def of(cls, dtype, target, bucket_, entries, geo, slot, nthreads, cost, variant="optimized"):
        cat = catalog_for(target)
        t = cls(FAMILY, "conv2d", dtype, target, cat.hash, bucket_, entries,
                np.zeros(0, np.int64), 4, cat.family_base(FAMILY, dtype), 0, variant,
                cost, f"slot {slot}, {nthreads} threads", None,
                {"geo": dict(geo), "slot": int(slot), "nthreads": int(nthreads)})
        t.validate(cat)
        return t

    @property
    def geo(self):
        return self.meta["geo"]

    @property
    def slot(self):
        return self.meta["slot"]

    @property
    def nthreads(self):
        return self.meta["nthreads"]

    def validate(self, catalog=CATALOG):
        """Refuse entries the driver could not run safely (ids, tile caps, negative counts)."""
        tiles = catalog.on(self.target).families[FAMILY].tiles if hasattr(catalog, "on") \
            else CONV_TILES
        e = self.entries
        if e.ndim != 2 or e.shape[1] != T_NCOL:
            raise TableFormatError(f"conv entries must have shape (E, {T_NCOL}), got {e.shape}")
        if not len(e):
            return
        slots = e[:, T_KID] - self.id_base
        if slots.min() < 0 or slots.max() >= len(tiles):
            raise TableFormatError(f"conv kernel ids outside {self.id_base}.."
                                   f"{self.id_base + len(tiles) - 1}")
        caps = np.array(tiles, dtype=np.int64)[slots]
        if (e[:, [T_MV, T_VH, T_VW]] < 0).any() or (e[:, T_MV] > caps[:, 0]).any() or \
                (e[:, T_VH] * e[:, T_VW] > caps[:, 1]).any():
            raise TableFormatError("conv entries exceed their kernel's tile (channels, "
                                   "positions)")

    def resolved(self, N, OH, OW):
        """Entries with counts clipped to a real shape, as the driver runs them (rows that do
        nothing have zero counts)."""
        e = self.entries.copy()
        mg = self.geo["Mg"]
        for start, count, size in ((T_M0, T_MV, mg), (T_OH0, T_VH, OH), (T_OW0, T_VW, OW)):
            ok = (e[:, start] >= 0) & (e[:, start] < size)
            e[:, count] = np.where(ok, np.minimum(e[:, count], size - e[:, start]), 0)
        dead = (e[:, T_N] >= N) | (e[:, T_N] < 0)
        e[dead, T_MV] = 0
        return e

    def describe(self, limit=12):
        g = self.geo
        (n0, n1), (h0, h1), (w0, w1) = self.bucket
        kinds = {0: "implicit GEMM 6x4 vectors", 1: "implicit GEMM 6x3 vectors",
                 DIRECT_SLOT: "direct, vectorized along the output width"}
        if self.target == "cpu" and str(self.dtype) in ("float32", "float64"):
            tiles = " or ".join(f"{m}x1-{v}" for m, v in CONV_WINDOW_TILES)
            kinds[0] = kinds[1] = (f"implicit GEMM {tiles} vectors (by channels), "
                                   "window read in place")
        lines = [f"conv2d table {self.dtype} {self.target} (catalog {self.catalog_hash}), "
                 f"{len(self)} entries, {self.nthreads} threads, model cost {self.cost:.3g}",
                 f"  bucket: N {n0 + 1}..{n1}, OH {h0 + 1}..{h1}, OW {w0 + 1}..{w1}; built for "
                 f"x (N={g['N']}, C={g['C']}, H={g['H']}, W={g['W']}) -> (M={g['M']}, "
                 f"OH={g['OH']}, OW={g['OW']})",
                 f"  kernel {g['KH']}x{g['KW']} group {g['G']} strides {(g['sh'], g['sw'])} "
                 f"dilations {(g['dh'], g['dw'])} pads {g['pads']}; K = {g['Cg']}x"
                 f"{g['KH']}x{g['KW']} = {g['Cg'] * g['KH'] * g['KW']} walked inside each tile",
                 f"  slot {self.slot}: {kinds[self.slot]}, tile <= {CONV_TILES[self.slot][0]} "
                 f"channels x {CONV_TILES[self.slot][1]} positions",
                 "  entry: " + " ".join(f"{c:>5s}" for c in ENTRY_COLUMNS)]
        lines[4:4] = call_lines(self)
        for row in self.entries[:limit]:
            lines.append("         " + " ".join(f"{int(v):5d}" for v in row))
        if len(self) > limit:
            lines.append(f"         ... {len(self) - limit} more")
        return "\n".join(lines)


TABLE_CLASSES[FAMILY] = ConvTable
