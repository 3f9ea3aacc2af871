"""Pictures of a table's tiling (seed 004, Fig. 11).

:func:`plot_table` and :func:`figure` draw the call a table answered in the user's
coordinates (``geometry.call_geometry``: the tensor's last two dims as the grid). A table
that records no call is drawn on its own inner plane. :func:`tile_rectangles` is the plane
geometry: the region each entry writes at a plane shape, classed
as a *full* tile (it writes a whole kernel tile), a *tail* (a tile cut short at the plane's
end: variable, partial or discard tail) or an *overlap* tile (an OVERLAP tail anchored back
from the end, a full tile that rewrites elements another entry wrote). For DISCARD tails the
kernel computes the whole tile and drops the part outside the plane: that part is reported
too. matplotlib is only imported for drawing (the ``plot`` extra).
"""
import os
from collections import Counter
from dataclasses import dataclass

from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.common_area import E_MODE0, E_MODE1
from dynshape_kernels.abi.tail_mode import DISCARD, OVERLAP

from dynshape.errors import ShapeError
from dynshape.pictures.geometry import Piece

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


def plane_geometry(table, shape=None, catalog=None):
    """A :class:`geometry.Geometry` of the table's own plane at ``shape`` (see
    :func:`plane_shape`): the picture of a table that records no call."""
    from dynshape.pictures.geometry import Geometry, _category
    catalog = catalog or CATALOG
    m, n = plane_shape(table, shape)
    modes = table.entries[:, [E_MODE0, E_MODE1]]
    pieces = []
    for r in tile_rectangles(table, (m, n), catalog):
        cat = _category(r.kind, r.tile, tuple(modes[r.entry]), (r.rows, r.cols))
        pieces.append(Piece(r.entry, cat, r.row, r.col, r.rows, r.cols))
    num = Counter(p.category for p in pieces)
    return Geometry(f"{table.op} plane", table.dtype, (m, n), (m, n), (), (), pieces, dict(num),
                    len(pieces), len(table), len(pieces),
                    [f"the table's inner plane {m}x{n} (no call recorded)"])


def geometry(table, shape=None, catalog=None):
    """The user-coordinate geometry of the call ``table`` answered (``dynshape.explain``),
    or, with ``shape`` = (rows, columns) or for a table that records no call, of its plane."""
    if shape is None and getattr(table, "call", None) is not None:
        from dynshape.pictures.geometry import call_geometry
        return call_geometry(table)
    return plane_geometry(table, shape, catalog)


def figure(table, shape=None, catalog=None, title=None):
    """A matplotlib Figure of the tiling (see :func:`geometry` and ``drawing.draw``)."""
    from dynshape.pictures.drawing import draw, matplotlib_parts
    matplotlib_parts()
    return draw(geometry(table, shape, catalog), title)


def plot_table(table, path, shape=None, catalog=None, title=None):
    """Save the picture of ``table``'s tiling as a PNG at ``path``: in the coordinates of the
    call it answered (``dynshape.explain``), or of its plane at ``shape``.

    Returns the :class:`geometry.Geometry` drawn (``counts``: entries run per kind). Raises
    ImportError naming the ``plot`` extra when matplotlib is missing, ShapeError for a shape
    outside the table's bucket."""
    if table is None:
        raise ShapeError("no table to draw: the result is empty, no kernel runs")
    geo = geometry(table, shape, catalog)
    from dynshape.pictures.drawing import draw
    fig = draw(geo, title)
    fig.savefig(os.fspath(path), format="png")
    return geo
