"""Pictures of a table's tiling (seed 004, Fig. 11).

:func:`plot_table` and :func:`figure` draw the call a table answered in the user's
coordinates (``geometry.call_geometry``: the tensor's last two dims as the grid). A table
that records no call is drawn on its own inner plane. :func:`tile_rectangles` (``rectangles.py``) is the plane
geometry. matplotlib is only imported for drawing (the ``plot`` extra).
"""
import os
from collections import Counter

from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.common_area import E_MODE0, E_MODE1

from dynshape.errors import ShapeError
from dynshape.pictures.calls import call_geometry
from dynshape.pictures.drawing import draw, matplotlib_parts
from dynshape.pictures.geometry import Geometry, Piece, _category
from dynshape.pictures.rectangles import (KINDS, TileRect, counts, plane_shape,  # noqa: F401
                                          tile_rectangles)

def plane_geometry(table, shape=None, catalog=None):
    """A :class:`geometry.Geometry` of the table's own plane at ``shape`` (see
    :func:`plane_shape`): the picture of a table that records no call."""
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
        return call_geometry(table)
    return plane_geometry(table, shape, catalog)


def figure(table, shape=None, catalog=None, title=None):
    """A matplotlib Figure of the tiling (see :func:`geometry` and ``drawing.draw``)."""
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
    fig = draw(geo, title)
    fig.savefig(os.fspath(path), format="png")
    return geo
