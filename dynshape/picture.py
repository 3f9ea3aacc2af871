"""Pictures of a table's tiling (seed 004, Fig. 11): the inner plane and the tile of every entry.

:func:`tile_rectangles` is the geometry: the region each entry writes at a plane shape, classed
as a *full* tile (it writes a whole kernel tile), a *tail* (a tile cut short at the plane's
end: variable, partial or discard tail) or an *overlap* tile (an OVERLAP tail anchored back
from the end, a full tile that rewrites elements another entry wrote). For DISCARD tails the
kernel computes the whole tile and drops the part outside the plane: that part is reported
too. :func:`figure` draws the geometry with matplotlib and :func:`plot_table` saves it as a
PNG. matplotlib is only imported for drawing (the ``plot`` extra).
"""
import os
from collections import Counter
from dataclasses import dataclass

from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.common_area import E_MODE0, E_MODE1
from dynshape_kernels.abi.tail_mode import DISCARD, OVERLAP

from .errors import ShapeError

KINDS = ("full", "tail", "overlap")
COLOURS = {"full": "#4c8bd6", "tail": "#f2a93b", "overlap": "#d6443c",
           "discarded": "#7f7f7f"}
LABELS = {"full": "full tiles", "tail": "tails", "overlap": "overlap tiles",
          "discarded": "discarded (computed, not written)"}


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


def _matplotlib():
    try:
        import matplotlib  # noqa: F401  (the package itself first: a clear error if absent)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.collections import PatchCollection
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch, Rectangle
    except ImportError as exc:
        raise ImportError("drawing a parameter table needs matplotlib; install the plot "
                          "extra: pip install 'dynshape[plot]'", name="matplotlib") from exc
    return FigureCanvasAgg, PatchCollection, Figure, Patch, Rectangle


def figure(table, shape=None, catalog=None, title=None):
    """A matplotlib Figure of the tiling (no pyplot, no global state). Each kind is one
    PatchCollection whose ``gid`` is the kind ("full", "tail", "overlap", "discarded")."""
    FigureCanvasAgg, PatchCollection, Figure, Patch, Rectangle = _matplotlib()
    m, n = plane_shape(table, shape)
    rects = tile_rectangles(table, (m, n), catalog)
    num = counts(rects)
    width = 10.0
    height = min(max(width * m / n, 1.6), 10.0) + 1.2
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    lw = 0.8 if len(rects) <= 2000 else 0.2
    for kind in KINDS:
        patches = [Rectangle((r.col, r.row), r.cols, r.rows) for r in rects if r.kind == kind]
        if not patches:
            continue
        alpha = 0.55 if kind == "overlap" else 0.9
        coll = PatchCollection(patches, facecolor=COLOURS[kind], edgecolor="black",
                               linewidth=lw, alpha=alpha, hatch="//" if kind == "overlap"
                               else None)
        coll.set_gid(kind)
        ax.add_collection(coll)
    dropped = [Rectangle((r.col, r.row), r.discarded[1], r.discarded[0]) for r in rects
               if r.discarded != (0, 0)]
    far_r, far_c = m, n
    if dropped:
        coll = PatchCollection(dropped, facecolor=COLOURS["discarded"], alpha=0.35,
                               edgecolor="black", linewidth=lw, linestyle="--", zorder=0.5)
        coll.set_gid("discarded")
        ax.add_collection(coll)
        far_r = max(far_r, max(r.row + r.discarded[0] for r in rects))
        far_c = max(far_c, max(r.col + r.discarded[1] for r in rects))
    ax.add_patch(Rectangle((0, 0), n, m, fill=False, edgecolor="black", linewidth=1.6))
    ax.set_xlim(0, far_c)
    ax.set_ylim(far_r, 0)
    ax.set_xlabel("columns")
    ax.set_ylabel("rows")
    ax.set_aspect("equal" if 0.05 <= m / n <= 20 else "auto")
    handles = [Patch(facecolor=COLOURS[k], edgecolor="black", label=f"{LABELS[k]}: {num[k]}")
               for k in KINDS if num[k]]
    if num["discarded"]:
        handles.append(Patch(facecolor=COLOURS["discarded"], alpha=0.35, edgecolor="black",
                             linestyle="--",
                             label=f"{LABELS['discarded']}: {num['discarded']}"))
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.set_title(title or f"{table.op} {table.dtype} ({table.variant}): plane {m}x{n}, "
                 f"{len(table)} entries", fontsize=10)
    fig.tight_layout()
    return fig


def plot_table(table, path, shape=None, catalog=None, title=None):
    """Save the picture of ``table``'s tiling at plane ``shape`` as a PNG at ``path``.

    Returns the counts per kind (see :func:`counts`). Raises ImportError naming the ``plot``
    extra when matplotlib is missing, ShapeError for a shape outside the table's bucket."""
    if table is None:
        raise ShapeError("no table to draw: the result is empty, no kernel runs")
    fig = figure(table, shape, catalog, title)
    path = os.fspath(path)
    fig.savefig(path, format="png")
    return counts(tile_rectangles(table, shape, catalog))
