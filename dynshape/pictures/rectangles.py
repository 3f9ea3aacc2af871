"""The plane geometry of a table: the region each entry writes at a plane shape, classed as
a *full* tile (a whole kernel tile), a *tail* (a tile cut short at the plane's end: variable,
partial or discard tail) or an *overlap* tile (an OVERLAP tail anchored back from the end, a
full tile that rewrites elements another entry wrote). For DISCARD tails the kernel computes
the whole tile and drops the part outside the plane: that part is reported too."""
from collections import Counter
from dataclasses import dataclass

from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.common_area import E_MODE0, E_MODE1
from dynshape_kernels.abi.tail_mode import DISCARD, OVERLAP

from dynshape.errors import ShapeError

KINDS = ("full", "tail", "overlap")


@dataclass(frozen=True)
class TileRect:
    """The plane region one entry writes: rows ``row..row+rows``, columns ``col..col+cols``.

    ``tile``: the kernel's tile shape; ``discarded``: (rows, cols) the kernel computes beyond
    the plane and drops (DISCARD tails; (0, 0) otherwise)."""
    entry: int
    kernel_id: int
    kind: str
    row: int
    col: int
    rows: int
    cols: int
    tile: tuple
    discarded: tuple = (0, 0)


def plane_shape(table, shape=None):
    """The (rows, columns) plane to draw: ``shape``, else the shape the table was built for,
    else the largest its bucket serves. Raises ShapeError outside the table's bucket."""
    if shape is None:
        shape = table.shape or tuple(hi for _, hi in table.bucket)
    try:
        m, n = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ShapeError(f"a plane shape is (rows, columns), got {shape!r}") from None
    if not table.serves(m, n):
        (lo0, hi0), (lo1, hi1) = table.bucket
        raise ShapeError(f"the table serves planes of rows {lo0 + 1}..{hi0} and columns "
                         f"{lo1 + 1}..{hi1}, not {m}x{n}")
    return m, n


def tile_rectangles(table, shape=None, catalog=None):
    """One :class:`TileRect` per entry that writes something at ``shape`` (see
    :func:`plane_shape`), in entry order; entries past the plane's end are left out."""
    catalog = catalog or CATALOG
    m, n = plane_shape(table, shape)
    res = table.resolved(m, n, catalog)
    modes = table.entries[:, [E_MODE0, E_MODE1]]
    rects = []
    for i, (kid, o0, v0, o1, v1) in enumerate(res.tolist()):
        if v0 == 0 or v1 == 0:
            continue
        tile = tuple(catalog[kid].tile)
        if OVERLAP in modes[i]:
            kind = "overlap"
        elif (v0, v1) == tile:
            kind = "full"
        else:
            kind = "tail"
        discarded = (0, 0)
        if DISCARD in modes[i] and (v0, v1) != tile:
            d0 = tile[0] if modes[i][0] == DISCARD else v0
            d1 = tile[1] if modes[i][1] == DISCARD else v1
            if (d0, d1) != (v0, v1):
                discarded = (d0, d1)
        rects.append(TileRect(i, kid, kind, o0, o1, v0, v1, tile, discarded))
    return rects


def counts(rects):
    """Number of rectangles per kind, and of DISCARD tails with a discarded part."""
    c = Counter(r.kind for r in rects)
    out = {k: c.get(k, 0) for k in KINDS}
    out["discarded"] = sum(1 for r in rects if r.discarded != (0, 0))
    return out
