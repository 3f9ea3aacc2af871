"""FusedTable: the ParamTable of a fused call (tiles of the inner plane plus the per-tile step
sequence)."""
import numpy as np
from dynshape_kernels.abi.common_area import E_ANCH0, E_ANCH1, E_NCOL, E_OFF0, E_OFF1
from dynshape_kernels.abi.step_program import K_CONST_L, K_CONST_R, K_SIDE_L, K_SIDE_R, K_UNARY
from dynshape_kernels.abi.tail_mode import ANCHOR_END, ANCHOR_START
from dynshape_kernels.catalog import CATALOG

from dynshape.errors import TableFormatError
from dynshape.fusion.program import _KIND_NAMES, K_ROWWISE
from dynshape.tables.param_table import TABLE_CLASSES, ParamTable, call_lines


class FusedTable(ParamTable):
    """The parameter table of a fused call: tiles of the inner plane plus the step sequence.

    ``entries``: int64 (E, 7) as every table (common_area.E_*), each entry one tile of
    ``tile`` = (rows, columns) that runs the whole sequence; ``steps``: int64 (S, 5), per step
    (catalog kernel id, kind, op code, side index, attribute index), the same for every tile:
    the kinds are steps.K_* (K_ROWWISE / K_REDUCE: the row-wise or reduction kernel that ends
    the elementwise part); ``pattrs``: the attribute values in the chain dtype. A ParamTable:
    cached, saved and loaded like every table (``meta`` holds tile, steps, attributes, tail
    and the chain's text and side names)."""

    @classmethod
    def of(cls, fused, dtype, target, bucket_, entries, tile, steps, pattrs, tail, shape):
        meta = {"chain": repr(fused), "sides": list(fused.prog_sides), "tile": list(tile),
                "steps": np.asarray(steps, np.int64).tolist(),
                "pattrs": np.asarray(pattrs, np.float64).tolist(), "tail": int(tail)}
        return cls("fused", "fused", dtype, target, CATALOG.hash, bucket_, entries,
                   np.zeros(0, np.int64), 2 + len(fused.prog_sides), 0, 0, "optimized", 0.0,
                   f"{tile[0]}x{tile[1]} tiles running {len(steps)} kernels", shape, meta)

    @property
    def tile(self):
        return tuple(self.meta["tile"])

    @property
    def steps(self):
        return np.asarray(self.meta["steps"], np.int64).reshape(-1, 5)

    @property
    def pattrs(self):
        return np.asarray(self.meta["pattrs"], np.dtype(self.dtype))

    @property
    def tail(self):
        return self.meta["tail"]

    def kernel_ids(self):
        """The per-tile sequence of catalog kernel ids (every tile runs all of them)."""
        return [int(k) for k in self.steps[:, 0]]

    def validate(self, catalog=CATALOG):
        """Refuse entries the fused driver could not run: the plane layout, known kernel ids
        in every step, variable tails anchored at the start."""
        e = self.entries
        if e.ndim != 2 or e.shape[1] != E_NCOL:
            raise TableFormatError(f"fused entries must have shape (E, {E_NCOL}), got {e.shape}")
        if len(e) and (e[:, [E_OFF0, E_OFF1]].min() < 0
                       or (e[:, [E_ANCH0, E_ANCH1]] != ANCHOR_START).any()):
            raise TableFormatError("fused entries are tiles anchored at the start, offsets >= 0")
        kids = self.steps[:, 0]
        if len(kids) == 0 or kids.min() < 0 or kids.max() >= len(catalog):
            raise TableFormatError("fused steps name kernel ids outside the catalog")
        if any(t < 1 for t in self.tile):
            raise TableFormatError(f"fused tile {self.tile} is empty")

    def resolved(self, m, n):
        """Per entry: (row offset, valid rows, column offset, valid columns) at (m, n)."""
        e = self.entries
        out = []
        for size, t, co, ca in ((m, self.tile[0], E_OFF0, E_ANCH0),
                                (n, self.tile[1], E_OFF1, E_ANCH1)):
            o = np.where(e[:, ca] == ANCHOR_END, size - e[:, co], e[:, co])
            bad = (o < 0) | (o >= size)
            out.append((np.where(bad, 0, o), np.where(bad, 0, np.minimum(t, size - o))))
        (o0, v0), (o1, v1) = out
        return np.stack([o0, v0, o1, v1], axis=1)

    def describe(self, limit=8):
        (lo0, hi0), (lo1, hi1) = self.bucket
        lines = [f"FusedTable {self.meta['chain']} {self.dtype} {self.target} (catalog "
                 f"{self.catalog_hash})",
                 f"  bucket: rows {lo0 + 1}..{hi0}, columns {lo1 + 1}..{hi1}"
                 + (f"; built for {self.shape}" if self.shape else ""),
                 f"  {len(self)} entries of {self.tile[0]}x{self.tile[1]} tiles, each running "
                 f"{len(self.steps)} kernels in order:",
                 "  step: kernel id, family/op, kind, side, attributes"]
        lines[2:2] = call_lines(self)
        for k, (kid, kind, code, side, attr) in enumerate(self.steps):
            sk = CATALOG[int(kid)]
            extra = ""
            if kind == K_UNARY and sk.op in ("leaky_relu", "clip"):
                extra = f"attrs {self.pattrs[attr]:g}, {self.pattrs[attr + 1]:g}"
            elif kind in (K_CONST_R, K_CONST_L):
                extra = f"constant {self.pattrs[attr]:g}"
            elif kind in (K_SIDE_R, K_SIDE_L):
                extra = f"side {int(side)} ({self.meta['sides'][int(side)]})"
            elif kind == K_ROWWISE and sk.op in ("layer_norm", "rms_norm"):
                extra = f"epsilon {self.pattrs[attr]:g}"
            lines.append(f"    {k}: {int(kid):5d} {sk.family}/{sk.op:12s} "
                         f"{_KIND_NAMES[int(kind)]:18s} {extra}")
        lines.append("  entry: row offset, column offset (variable tails)")
        for row in self.entries[:limit]:
            lines.append(f"    {int(row[E_OFF0]):8d} {int(row[E_OFF1]):8d}")
        if len(self) > limit:
            lines.append(f"    ... {len(self) - limit} more")
        return "\n".join(lines)


TABLE_CLASSES["fused"] = FusedTable
