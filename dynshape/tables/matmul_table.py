"""MatmulTable: the ParamTable of matmul, one entry per output tile (``abi.matmul_table``)."""
import numpy as np
from dynshape_kernels.abi.matmul_table import TABLE_COLS
from dynshape_kernels.abi.tiles import MATMUL_NSLOTS as NSLOTS, matmul_slots as _slots_for
from dynshape_kernels.catalog import catalog_for

from dynshape.errors import TableFormatError
from dynshape.tables.param_table import TABLE_CLASSES, ParamTable, call_lines


class MatmulTable(ParamTable):
    """Output tiles ``(slot, m0, n0, tm, tn, batch)`` (int64 entries) for every problem of a
    bucket: ``bucket`` = ((lo, hi] of M, N, K, batch count); ``shape`` = the (M, N, K, batch)
    it was built for (the bucket's upper ends). A ParamTable: saved, loaded and checked like
    every table (no common area: a call's sizes, strides and batch offsets are arguments)."""

    @classmethod
    def of(cls, dtype, target, bucket, shape, comb):
        cat = catalog_for(target)
        return cls("matmul", "matmul", dtype, target, cat.hash, bucket, comb.entries,
                   np.zeros(0, np.int64), 3, cat.family_base("matmul", dtype), 0,
                   comb.variant, comb.cost, comb.description, shape)

    def __len__(self):
        return len(self.entries)

    def kernel_ids(self):
        return self.id_base + self.entries[:, 0]

    def validate(self, catalog=None):
        """Raise TableFormatError unless every row names a slot of the catalog, fits its
        macro tile and lies inside the built shape, and no output element is listed twice."""
        catalog = catalog.on(self.target) if catalog is not None else catalog_for(self.target)
        e = self.entries
        if e.ndim != 2 or e.shape[1] != TABLE_COLS:
            raise TableFormatError(f"matmul table: entries must be (E, {TABLE_COLS}), got "
                                   f"{e.shape}")
        if self.dtype not in catalog.families["matmul"].dtypes or \
                self.id_base != catalog.family_base("matmul", self.dtype):
            raise TableFormatError(f"matmul table: no matmul kernels for {self.dtype} at id "
                                   f"{self.id_base} in the catalog")
        if self.shape is None or len(self.shape) != 4 or len(self.bucket) != 4 or any(
                not lo <= s <= hi for s, (lo, hi) in zip(self.shape, self.bucket)):
            raise TableFormatError(f"matmul table: shape {self.shape} is not in its bucket "
                                   f"{self.bucket}")
        M, N, _, nb = self.shape
        if len(e) == 0:
            return
        tiles = catalog.families["matmul"].tiles_for(self.dtype)
        nslots = NSLOTS if self.target == "cpu" else len(tiles)
        if e[:, 0].min() < 0 or e[:, 0].max() >= nslots:
            raise TableFormatError(f"matmul table: slot outside 0..{nslots - 1}")
        if self.target == "cpu":
            cfg = np.array(_slots_for(self.dtype), dtype=np.int64)
            mc, nc = cfg[e[:, 0], 2], cfg[e[:, 0], 3]
        else:
            cfg = np.array(tiles, dtype=np.int64)
            mc, nc = cfg[e[:, 0], 0], cfg[e[:, 0], 1]
        if ((e[:, 3] < 1) | (e[:, 4] < 1) | (e[:, 3] > mc) | (e[:, 4] > nc)).any():
            raise TableFormatError("matmul table: a tile is empty or exceeds its slot's "
                                   "macro tile")
        if ((e[:, 1] < 0) | (e[:, 2] < 0) | (e[:, 5] < 0) | (e[:, 1] >= M) | (e[:, 2] >= N)
                | (e[:, 5] >= nb)).any():
            raise TableFormatError("matmul table: a tile starts outside the built shape")
        # exactly-once coverage of every batch's M x N: the tiles form a grid whose row
        # and column intervals partition [0, M) and [0, N), each cell listed once
        rows = np.unique(e[:, [1, 3]], axis=0)
        cols = np.unique(e[:, [2, 4]], axis=0)
        for iv, size in ((rows, M), (cols, N)):
            ends = iv[:, 0] + iv[:, 1]
            if iv[0, 0] != 0 or ends[-1] != size or (iv[1:, 0] != ends[:-1]).any():
                raise TableFormatError("matmul table: the tiles do not cover the output "
                                       "exactly once")
        cells = np.unique(e[:, [1, 2, 5]], axis=0)
        if len(cells) != len(e) or len(e) != len(rows) * len(cols) * nb:
            raise TableFormatError("matmul table: the tiles do not cover the output exactly "
                                   "once")

    def describe(self, catalog=None, limit=20):
        (ml, mh), (nl, nh), (kl, kh), (bl, bh) = self.bucket
        rows = [f"ParamTable matmul/{self.dtype} on {self.target} ({self.variant}), catalog "
                f"{self.catalog_hash}",
                f"  bucket: M in ({ml}, {mh}], N in ({nl}, {nh}], K in ({kl}, {kh}], batches "
                f"in ({bl}, {bh}]; built for M={self.shape[0]} N={self.shape[1]} "
                f"K={self.shape[2]} batches={self.shape[3]}",
                f"  {self.description}; model cost {self.cost / 1e3:.1f} us",
                "  K is walked inside each tile in the slot's K blocks (never tiled, never "
                "overlapped); tiles past the real M/N/batch are clipped by the driver",
                "     kid  slot     m0     n0     tm     tn  batch"]
        rows[3:3] = call_lines(self)
        for r in self.entries[:limit]:
            rows.append(f"  {self.id_base + r[0]:6d}  {r[0]:4d} {r[1]:6d} {r[2]:6d} {r[3]:6d} "
                        f"{r[4]:6d} {r[5]:6d}")
        if len(self.entries) > limit:
            rows.append(f"  ... {len(self.entries) - limit} more")
        return "\n".join(rows)

    def __repr__(self):
        return f"<MatmulTable {self.dtype} {self.variant} {len(self)} tiles {self.description}>"


TABLE_CLASSES["matmul"] = MatmulTable
