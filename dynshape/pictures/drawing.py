"""Drawing a :class:`geometry.Geometry` with matplotlib (seed 004, Fig. 11).

The grid is the user's tensor (its last two dims; batch dims named in the title), each
rectangle one table entry's write in the first batch, coloured by kernel tile shape (full
tiles) or by tail mode (tails; overlap tiles hatched). The legend counts the entries the call
runs per kind; they add up to the count in the title. A conv or pool picture has a second
panel: the input, with one tile's window (dashed) and its stride footprint (solid) outlined;
the ring between them is the halo that neighbouring tiles read too. matplotlib is imported
here only, by :func:`draw` (the ``plot`` extra).
"""
import textwrap

from dynshape.pictures.geometry import label

FULL_COLOURS = ("#4c8bd6", "#5fb26a", "#8c6bc8", "#3bb0b5", "#2f5f9e", "#9bc27a")
TAIL_COLOURS = {"variable full": "#f2a93b", "variable partial": "#e6d23c",
                "discard": "#9e9e9e", "clipped (variable)": "#f2a93b"}
OVERLAP_COLOUR = "#d6443c"


def matplotlib_parts():
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


def order(categories):
    rank = {"full": 0, "tail": 1, "overlap": 2}
    return sorted(categories, key=lambda c: (rank[c[0]], tuple(c[1]), c[2] or ""))


def colours(categories):
    """Category -> (face colour, hatch): full tiles by tile shape, tails by tail mode."""
    out, k = {}, 0
    for c in order(categories):
        if c[0] == "full":
            out[c] = (FULL_COLOURS[k % len(FULL_COLOURS)], None)
            k += 1
        elif c[0] == "overlap":
            out[c] = (OVERLAP_COLOUR, "//")
        else:
            out[c] = (TAIL_COLOURS.get(c[2], "#f2a93b"), None)
    return out


def draw(geo, title=None):
    """A matplotlib Figure of ``geo`` (no pyplot, no global state). The grid axes hold one
    PatchCollection per category whose ``gid`` is the category's label."""
    FigureCanvasAgg, PatchCollection, Figure, Patch, Rectangle = matplotlib_parts()
    from matplotlib.colors import to_rgb
    R, C = geo.grid
    panels = 2 if geo.window else 1
    pw = 8.0 if panels == 1 else 6.0
    width = pw + 2.5 + 4.5 * (panels - 1)
    height = min(max(pw * R / C, 2.0), 8.0) + 2.0
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, panels, 1)
    cats = set(geo.counts) | {p.category for p in geo.pieces}
    style = colours(cats)
    # many slivers (a coalesced row wrapping over the grid): no edges, and alternate
    # entries are shaded lighter so that neighbouring tiles stay apart
    edges = len(geo.pieces) <= 400
    for c in order(cats):
        mine = [p for p in geo.pieces if p.category == c]
        if not mine:
            continue
        face, hatch = style[c]
        rgb = to_rgb(face)
        shade = [rgb if p.entry % 2 == 0 or edges else tuple(0.55 * v + 0.45 for v in rgb)
                 for p in mine]
        coll = PatchCollection([Rectangle((p.col, p.row), p.cols, p.rows) for p in mine],
                               facecolor=shade, edgecolor="black" if edges else "none",
                               linewidth=0.7 if edges else 0, alpha=0.6 if hatch else 0.9,
                               hatch=hatch)
        coll.set_gid(label(c))
        ax.add_collection(coll)
    ax.add_patch(Rectangle((0, 0), C, R, fill=False, edgecolor="black", linewidth=1.6))
    ax.set_xlim(0, C)
    ax.set_ylim(R, 0)
    ax.set_xlabel(f"columns (last dim, {C})")
    ax.set_ylabel(f"rows ({R})")
    ax.set_aspect("equal" if 0.05 <= R / C <= 20 else "auto")
    if geo.walk:
        _walk_arrow(ax, geo.walk, R, C)
    handles = [Patch(facecolor=style[c][0], hatch=style[c][1], edgecolor="black",
                     label=f"{label(c)}: {geo.counts.get(c, 0)}") for c in order(geo.counts)]
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
                  title=f"entries run: {geo.runs}", title_fontsize=8)
    if geo.window:
        _window_panel(fig.add_subplot(1, panels, 2), ax, geo.window, Rectangle)
    head = textwrap.wrap(title or geo.title(), 90) + textwrap.wrap(geo.subtitle, 90)
    ax.set_title("\n".join(head), fontsize=9)
    notes = "\n".join("\n".join(textwrap.wrap(n, 150)) for n in geo.notes)
    fig.text(0.01, 0.01, notes, fontsize=7, va="bottom", ha="left")
    fig.tight_layout(rect=(0, 0.04 + 0.025 * notes.count("\n"), 1, 1))
    return fig


def _walk_arrow(ax, walk, R, C):
    if walk in ("columns", "grid"):
        ax.annotate("", xy=(C, R / 2), xytext=(0, R / 2),
                    arrowprops=dict(arrowstyle="->", lw=2, color="black"))
        what = "reduced axis" if walk == "columns" else "reduced axes: the whole grid is"
        ax.text(C / 2, R / 2, f"{what} walked inside each kernel", ha="center",
                va="bottom", fontsize=8, backgroundcolor="white")
    else:
        ax.annotate("", xy=(C / 2, R), xytext=(C / 2, 0),
                    arrowprops=dict(arrowstyle="->", lw=2, color="black"))
        ax.text(C / 2, R / 2, "reduced axis: walked inside each kernel", ha="center",
                va="center", rotation=90, fontsize=8, backgroundcolor="white")


def _window_panel(ax, out_ax, w, Rectangle):
    r, c, vh, vw = w["tile"]
    out_ax.add_patch(Rectangle((c, r), vw, vh, fill=False, edgecolor="black", linewidth=2.5,
                               gid="tile"))
    H, W = w["input"]
    ih, iw, wh, ww = w["window"]
    _, _, ch, cw = w["core"]
    ax.add_patch(Rectangle((0, 0), W, H, facecolor="#eeeeee", edgecolor="black", lw=1.2))
    ax.add_patch(Rectangle((iw, ih), ww, wh, facecolor="#f2a93b", alpha=0.35,
                           edgecolor="black", linestyle="--", lw=1.5, gid="window",
                           label=f"input window {wh}x{ww} (halo: dashed ring)"))
    ax.add_patch(Rectangle((iw, ih), cw, ch, fill=False, edgecolor="black", lw=2,
                           gid="core", label=f"stride footprint {ch}x{cw}"))
    ax.set_xlim(min(0, iw) - 1, max(W, iw + ww) + 1)
    ax.set_ylim(max(H, ih + wh) + 1, min(0, ih) - 1)
    ax.set_aspect("equal" if 0.05 <= H / max(W, 1) <= 20 else "auto")
    ax.set_title(f"input {H}x{W}: the window of the outlined tile\n"
                 f"(rows {ih}..{ih + wh - 1}, columns {iw}..{iw + ww - 1}; <0 or past the "
                 f"end: padding)", fontsize=8)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), fontsize=7)
