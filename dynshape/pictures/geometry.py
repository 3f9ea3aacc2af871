"""A table's tiling in the user's coordinates: what ``explain`` prints and the picture draws.

``dispatcher.explain`` records the call it answered on the table it returns (``table.call``:
a :class:`Call`, the latest call explained with that table; tables are shared by a bucket).
:func:`call_geometry` maps the table's entries back onto the user's tensor: the tensor's last
two dimensions are the grid, the others are batch dimensions, and each entry that runs at
this shape becomes the rectangles it writes in the first batch (a tile of a coalesced plane
can span several rows of the user's grid). Every family is covered: plane families
(elementwise, copy), reductions and row-wise ops (kept elements tiled, the reduced axes
walked inside each kernel), pooling, matmul/gemm (output tiles, K walked in blocks) and
conv2d (output tiles, one input window and its halo).
"""
import math
from dataclasses import dataclass

import numpy as np
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.common_area import E_MODE0, E_MODE1
from dynshape_kernels.abi.tail_mode import DISCARD, OVERLAP, VARIABLE_PARTIAL

from dynshape.pictures.rectangles import tile_rectangles


@dataclass(frozen=True)
class Piece:
    """A rectangle of the user's grid (first batch) written by table entry ``entry``."""
    entry: int
    category: tuple      # (kind, tile, mode): kind in full, tail, overlap
    row: int
    col: int
    rows: int
    cols: int


@dataclass
class Geometry:
    """The user-coordinate picture of one call: ``grid`` = (rows, columns) of the tensor's
    last two dims, ``batch`` = the other dims; ``counts`` per category of the entries the call
    runs (``runs`` = their sum); ``pieces`` what they write in the first batch."""
    op: str
    dtype: str
    shape: tuple
    grid: tuple
    batch: tuple
    batch_names: tuple
    pieces: list
    counts: dict
    runs: int
    table_entries: int
    work_items: int
    notes: list
    walk: str = None            # "rows" or "columns": the reduced axis walked in a kernel
    window: dict = None         # conv/pool: one tile's input window (input coordinates)
    subtitle: str = ""          # what the grid does not show (e.g. matmul's K blocking)

    def title(self):
        shape = "x".join(map(str, self.shape)) or "scalar"
        head = f"{self.op} {self.dtype} {shape}"
        if self.batch:
            names = ", ".join(f"{n}={s}" for n, s in zip(self.batch_names, self.batch))
            head += f" (grid {self.grid[0]}x{self.grid[1]} of batch 0; batch dims {names})"
        skipped = self.table_entries - self.runs
        run = f"{self.runs} {'entry runs' if self.runs == 1 else 'entries run'}" + (
            f" ({skipped} of the table's {self.table_entries} lie past this shape)"
            if skipped > 0 else "")
        if self.work_items != self.runs:
            run += f", {self.work_items} kernel calls"
        return f"{head}: {run}"


def label(category):
    kind, tile, mode = category
    t = f"{tile[0]}x{tile[1]}"
    if kind == "full":
        return f"{t} full"
    if kind == "overlap":
        return f"{t} overlap (recomputes)"
    return f"{t} tail, {mode}"


def _dims(shape):
    return "x".join(map(str, shape)) or "scalar"


# ---- mapping a kept flat range onto the user's grid ------------------------------------
def _grid_axes(shape):
    nd = len(shape)
    if nd >= 2:
        return nd - 2, nd - 1
    return None, (0 if nd == 1 else None)


def _grid(shape):
    r, c = _grid_axes(shape)
    return (shape[r] if r is not None else 1, shape[c] if c is not None else 1)


class _KeptMap:
    """Maps ranges of the kept flat index (C order over the ``kept`` axes of ``shape``) to
    rectangles of the first batch's grid; reduced grid axes are covered whole."""

    def __init__(self, shape, kept):
        self.R, self.C = _grid(shape)
        gr, gc = _grid_axes(shape)
        self.rows_kept = gr is not None and gr in kept
        self.cols_kept = gc is None or gc in kept
        self.W = (self.R if self.rows_kept else 1) * (self.C if self.cols_kept and gc is not None
                                                     else 1)

    def rects(self, a, b):
        """Rectangles (row, col, rows, cols) of the inner flat range [a, b) of batch 0."""
        R, C = self.R, self.C
        a, b = max(a, 0), min(b, self.W)
        if a >= b:
            return []
        if self.rows_kept and self.cols_kept:
            out = []
            r0, c0 = divmod(a, C)
            r1, c1 = divmod(b, C)
            if r0 == r1:
                return [(r0, c0, 1, c1 - c0)]
            if c0:
                out.append((r0, c0, 1, C - c0))
                r0 += 1
            if r1 > r0:
                out.append((r0, 0, r1 - r0, C))
            if c1:
                out.append((r1, 0, 1, c1))
            return out
        if self.cols_kept:
            return [(0, a, R, b - a)]
        if self.rows_kept:
            return [(a, 0, b - a, C)]
        return [(0, 0, R, C)]


def _merge(rects):
    """Merge vertically adjacent rectangles of equal column range."""
    out = []
    for r in sorted(rects, key=lambda t: (t[1], t[3], t[0])):
        if out and out[-1][1] == r[1] and out[-1][3] == r[3] and \
                out[-1][0] + out[-1][2] == r[0]:
            p = out[-1]
            out[-1] = (p[0], p[1], p[2] + r[2], p[3])
        else:
            out.append(r)
    return out


def _plane_pieces(kmap, p, rows):
    """Pieces of batch 0 from plane rectangles ``rows`` = [(entry, category, r0, v0, c0,
    v1)] of plane ``p`` (outer dims x m x n, C-order flat like the kept axes)."""
    m, n = p.m, p.n
    n_o = -(-kmap.W // (m * n))              # outer plane indices that reach batch 0
    pieces = []
    for entry, cat, r0, v0, c0, v1 in rows:
        rects = []
        for o in range(n_o):
            for i in range(r0, r0 + v0):
                base = (o * m + i) * n
                if base + c0 >= kmap.W:
                    break
                rects += kmap.rects(base + c0, base + c0 + v1)
        pieces += [Piece(entry, cat, *r) for r in _merge(rects)]
    return pieces


def _category(kind, tile, modes, valid):
    if kind == "overlap" or OVERLAP in modes:
        return ("overlap", tile, "overlap")
    if tuple(valid) == tuple(tile):
        return ("full", tile, None)
    short = [md for md, v, t in zip(modes, valid, tile) if v < t]
    if DISCARD in short:
        mode = "discard"
    elif VARIABLE_PARTIAL in short:
        mode = "variable partial"
    else:
        mode = "variable full"
    return ("tail", tile, mode)


def _plane_rows(table, p):
    """(entry, category, r0, v0, c0, v1) of every entry that runs at plane ``p``."""
    modes = table.entries[:, [E_MODE0, E_MODE1]]
    return [(r.entry, _category(r.kind, r.tile, tuple(modes[r.entry]), (r.rows, r.cols)),
             r.row, r.rows, r.col, r.cols) for r in tile_rectangles(table, (p.m, p.n))]


def _counts(cats):
    out = {}
    for c in cats:
        out[c] = out.get(c, 0) + 1
    return out


def coalescing_note(shape, p, why):
    """One line: how the user's dims became the table's plane, and why."""
    plane = f"{p.m}x{p.n}" + (f" inside outer {_dims(p.outer)}" if p.outer else "")
    user = [s for s in shape if s != 1]
    if p.outer == () and p.m == 1 and len(user) > 1:
        return (f"{_dims(shape)} {why}: coalesced to one row of {p.n} elements, tiled as a "
                f"1x{p.n} plane")
    if p.rank < len(user):
        return f"{_dims(shape)}: dimensions merged where {why}; tiled as plane {plane}"
    return (f"{_dims(shape)}: not coalesced (the operands' strides do not let neighbouring "
            f"dimensions merge); tiled as plane {plane}")


def _why(launch):
    arrays = [launch.out] + list(launch.inputs)
    if all(a.flags.c_contiguous for a in arrays):
        if len({a.shape for a in arrays}) == 1:
            return "contiguous"
        return "every operand walks them as one run (contiguous, broadcast alike)"
    return "every operand walks them as one run"


def _user_strides(shape, a):
    from dynshape.runtime.layout import broadcast_strides, element_strides
    st = element_strides(a)
    return tuple(broadcast_strides(shape, a.shape, st)) if st is not None else "(bytes)"


def _batch(shape, names=None):
    gr, _ = _grid_axes(shape)
    nb = len(shape) - 2 if gr is not None else 0
    b = tuple(shape[:nb])
    return b, tuple(names[:nb]) if names else tuple(f"d{i}" for i in range(nb))


# ---- per family ---------------------------------------------------------------------------
def _plane_family(table, call):
    from dynshape.runtime.plane import plane_of
    launch = call.launch
    p = plane_of(launch)
    shape = tuple(launch.out.shape)
    rows = _plane_rows(table, p)
    notes = [coalescing_note(shape, p, _why(launch))]
    if _why(launch) != "contiguous":
        names = ["out"] + [f"input {k}" for k in range(len(launch.inputs))]
        st = [_user_strides(shape, a) for a in [launch.out] + list(launch.inputs)]
        notes.append("operand strides in elements over " + _dims(shape) + " (0: broadcast): "
                     + "; ".join(f"{n} {s}" for n, s in zip(names, st)))
    if launch.op == "copy":
        notes.append(f"copy {call.dtype} (moves {np.dtype(call.dtype).itemsize}-byte items: "
                     f"{table.dtype} kernels)")
    return _geom(table, call, shape, tuple(range(len(shape))), p, rows, notes)


def _geom(table, call, shape, kept, p, rows, notes, walk=None, window=None, dtype=None):
    kmap = _KeptMap(shape, kept)
    pieces = _plane_pieces(kmap, p, rows)
    counts = _counts(r[1] for r in rows)
    batch, names = _batch(shape)
    return Geometry(call.op, dtype or call.dtype, shape, _grid(shape), batch, names, pieces,
                    counts, len(rows), len(table), len(rows) * math.prod(p.outer), notes,
                    walk, window)


def _walked(call, shape, axes, kept_plane):
    gr, gc = _grid_axes(shape)
    red = math.prod(shape[a] for a in axes)
    which = (f"axis {axes[0]}" if len(axes) == 1 else
             "axes " + ", ".join(map(str, axes)))
    verb = "is" if len(axes) == 1 else "are"
    what = "normalized" if call.executor == "rowwise" else "reduced"
    kept = [shape[d] for d in range(len(shape)) if d not in axes]
    note = (f"{_dims(shape)}: the kept elements ({_dims(kept) if kept else 'one'}) are tiled "
            f"as plane {kept_plane.m}x{kept_plane.n}; the {what} {which} ({red} elements per "
            f"kept element) {verb} walked inside each kernel")
    walk = ("grid" if gc in axes and gr is not None and gr in axes else
            "columns" if gc in axes else "rows" if gr in axes else None)
    return note, walk


def _reduce_family(table, call):
    from dynshape.runtime.walk import reduce_geometry, rowwise_geometry
    launch = call.launch
    x = launch.inputs[0]
    shape = tuple(x.shape)
    axes = tuple(sorted(launch.extra["axes"]))
    p = (reduce_geometry(launch) if call.executor == "reduce"
         else rowwise_geometry(launch))[0]
    kept = tuple(d for d in range(len(shape)) if d not in axes)
    note, walk = _walked(call, shape, axes, p)
    return _geom(table, call, shape, kept, p, _plane_rows(table, p), [note], walk)


def _fused_family(table, call):
    launch = call.launch
    p, shape = launch.extra["plane"], launch.extra["shape"]
    res = table.resolved(p.m, p.n)
    modes = table.entries[:, [E_MODE0, E_MODE1]]
    rows = [(i, _category("tile", table.tile, tuple(modes[i]), (v0, v1)), o0, v0, o1, v1)
            for i, (o0, v0, o1, v1) in enumerate(res.tolist()) if v0 and v1]
    ops = ", ".join(f"{CATALOG[k].family}/{CATALOG[k].op}" for k in table.kernel_ids())
    notes = [coalescing_note(shape, p, _why(launch)),
             f"each tile runs the {len(table.steps)} kernels of the sequence in order: {ops}"]
    geo = _geom(table, call, shape, tuple(range(len(shape))), p, rows, notes)
    geo.op = "fused"
    return geo
