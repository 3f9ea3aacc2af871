"""PoolTable: a ParamTable whose entries carry each tile's input offsets
(``abi.pool_table.E_IH0``, ``E_IW0``)."""
from dynshape_kernels.abi.common_area import E_ANCH0, E_ANCH1, E_NCOL
from dynshape_kernels.abi.pool_table import E_IH0, E_IW0, POOL_NCOL
from dynshape_kernels.abi.tail_mode import ANCHOR_START

from dynshape.errors import TableFormatError
from dynshape.tables.param_table import TABLE_CLASSES, ParamTable


class PoolTable(ParamTable):
    """A ParamTable whose entries carry two more columns: the input offsets of each tile
    (``E_IH0``, ``E_IW0``; negative where the first window starts in the padding)."""

    def describe(self, catalog=None, limit=12):
        text = super().describe(catalog, limit)
        e = self.entries
        rows = ["  input offsets (ih0, iw0) of the tiles: "
                + ", ".join(f"({int(a)}, {int(b)})" for a, b in e[:limit, E_IH0:E_IW0 + 1])
                + (f", ... {len(e) - limit} more" if len(e) > limit else "")]
        return text + "\n" + "\n".join(rows)

    def validate(self, catalog):
        e = self.entries
        if e.ndim != 2 or e.shape[1] != POOL_NCOL:
            raise TableFormatError(f"pool entries must have shape (E, {POOL_NCOL}), got "
                                   f"{e.shape}")
        plain = ParamTable.__new__(ParamTable)
        plain.__dict__.update(self.__dict__)
        plain.entries = e[:, :E_NCOL]
        ParamTable.validate(plain, catalog)
        if len(e) and (e[:, [E_ANCH0, E_ANCH1]] != ANCHOR_START).any():
            raise TableFormatError("pool entries are anchored at the start of the plane")


TABLE_CLASSES["pool"] = PoolTable
