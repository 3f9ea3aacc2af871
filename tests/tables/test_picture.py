"""The tiling picture (seed 004, Fig. 11): geometry checked against the table's coverage,
the figure's patches against the geometry, the PNG as a file; never pixels."""
import re
import sys

import numpy as np
import pytest
from hypothesis import given

import dynshape
from dynshape import cli, testing
from dynshape.errors import ShapeError
from dynshape.tables.param_table import ParamTable
from dynshape.pictures.drawing import colours
from dynshape.pictures.geometry import label
from dynshape.pictures.picture import KINDS, counts, figure, plot_table, plane_geometry, tile_rectangles
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.tiles import square_tile
from dynshape_kernels.abi.common_area import E_MODE0, E_MODE1
from dynshape_kernels.abi.tail_mode import ANCHOR_END, ANCHOR_START, DISCARD, OVERLAP, VARIABLE_FULL

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _kid(slot):
    return CATALOG.kernel_id("unary", "relu", "float32", slot)


def _slot(tile):
    return [t[:2] for t in CATALOG.families["unary"].tiles].index(tile)


def _table(entries, bucket, shape):
    fam = CATALOG.families["unary"]
    return ParamTable("unary", "relu", "float32", "cpu", CATALOG.hash, bucket,
                      np.array(entries, dtype=np.int64), np.zeros(0), 2,
                      CATALOG.family_base("unary", "float32"), fam.op_base, "optimized", 0.0,
                      "hand-made", shape)


#: the elementwise family's square tile (T0 x T1), the one 2-D slot
T0, T1 = square_tile(CATALOG.families["unary"].tiles)


def _hand_made():
    """Planes of rows 2*T0+1..3*T0 and columns T1+1..2*T1 with T0 x T1 tiles. Rows: bands at
    0 and T0, a VARIABLE_FULL tail band at 2*T0. Columns: a tile at 0, a DISCARD tail at T1,
    an OVERLAP tile anchored T1 back from the end, and one at 2*T1 that is always past the
    end. Built for (2*T0 + 8) x (T1 + 36)."""
    k = _kid(_slot((T0, T1)))
    S, E = ANCHOR_START, ANCHOR_END
    rows = [(VARIABLE_FULL, 0, S), (VARIABLE_FULL, T0, S), (VARIABLE_FULL, 2 * T0, S)]
    cols = [(VARIABLE_FULL, 0, S), (DISCARD, T1, S), (OVERLAP, T1, E),
            (VARIABLE_FULL, 2 * T1, S)]
    # kid, mode rows, mode cols, row off, row anchor, col off, col anchor
    entries = [(k, rm, cm, ro, ra, co, ca) for rm, ro, ra in rows for cm, co, ca in cols]
    return _table(entries, ((2 * T0, 3 * T0), (T1, 2 * T1)), (2 * T0 + 8, T1 + 36))


def test_hand_made_table_has_the_expected_kinds():
    rects = tile_rectangles(_hand_made())                  # at the built shape
    got = {(r.row, r.col): (r.kind, r.rows, r.cols, r.discarded) for r in rects}
    assert got == {
        (0, 0): ("full", T0, T1, (0, 0)), (0, T1): ("tail", T0, 36, (T0, T1)),
        (0, 36): ("overlap", T0, T1, (0, 0)),
        (T0, 0): ("full", T0, T1, (0, 0)), (T0, T1): ("tail", T0, 36, (T0, T1)),
        (T0, 36): ("overlap", T0, T1, (0, 0)),
        (2 * T0, 0): ("tail", 8, T1, (0, 0)), (2 * T0, T1): ("tail", 8, 36, (8, T1)),
        (2 * T0, 36): ("overlap", 8, T1, (0, 0))}
    assert [r.entry for r in rects] == [0, 1, 2, 4, 5, 6, 8, 9, 10]
    assert counts(rects) == {"full": 2, "tail": 4, "overlap": 3, "discarded": 3}
    # two tiles wide, the DISCARD column is a whole tile: nothing is discarded
    assert counts(tile_rectangles(_hand_made(), (2 * T0 + 8, 2 * T1))) == {
        "full": 4, "tail": 2, "overlap": 3, "discarded": 0}


def _paint(rects, m, n, which=None):
    counts_ = np.zeros((m, n), dtype=np.int64)
    for r in rects:
        if which is None or r.kind in which:
            counts_[r.row:r.row + r.rows, r.col:r.col + r.cols] += 1
    return counts_


@given(testing.tables(max_side=700))
def test_geometry_matches_the_tables_coverage_and_entry_kinds(case):
    table, (m, n) = case.table, case.shape
    rects = tile_rectangles(table)
    assert np.array_equal(_paint(rects, m, n), testing.coverage(table, m, n))
    e = table.entries
    ov = (e[:, E_MODE0] == OVERLAP) | (e[:, E_MODE1] == OVERLAP)
    assert np.array_equal(_paint(rects, m, n, {"overlap"}),
                          testing.coverage(table, m, n, which=ov))
    for r in rects:
        tile = CATALOG[int(e[r.entry, 0])].tile
        assert r.tile == tile
        assert r.kind == ("overlap" if ov[r.entry] else
                          "full" if (r.rows, r.cols) == tile else "tail")
        if r.discarded != (0, 0):
            assert DISCARD in e[r.entry, [E_MODE0, E_MODE1]]
            assert r.rows <= r.discarded[0] <= tile[0] and r.cols <= r.discarded[1] <= tile[1]
    assert sum(counts(rects)[k] for k in KINDS) == len(rects)


def test_a_shape_outside_the_bucket_is_refused():
    want = f"rows {2 * T0 + 1}..{3 * T0} and columns {T1 + 1}..{2 * T1}"
    with pytest.raises(ShapeError, match=want):
        tile_rectangles(_hand_made(), (20, 3 * T1))
    with pytest.raises(ShapeError, match=r"\(rows, columns\)"):
        tile_rectangles(_hand_made(), (2 * T0 + 8,))


def test_figure_has_one_collection_per_category_with_matching_patches():
    pytest.importorskip("matplotlib", reason="the picture needs the plot extra (matplotlib)")
    from matplotlib.colors import to_rgba
    table = _hand_made()
    for shape in [(2 * T0 + 8, T1 + 36), (2 * T0 + 8, 2 * T1)]:
        geo = plane_geometry(table, shape)
        rects = tile_rectangles(table, shape)
        assert geo.runs == len(rects) == sum(geo.counts.values())
        # categories: full tiles by tile shape, tails by mode, overlaps apart
        want = {}
        for r in rects:
            modes = tuple(table.entries[r.entry, [E_MODE0, E_MODE1]])
            short = [md for md, v, t in zip(modes, (r.rows, r.cols), r.tile) if v < t]
            cat = (("overlap", r.tile, "overlap") if r.kind == "overlap" else
                   ("full", r.tile, None) if r.kind == "full" else
                   ("tail", r.tile, "discard" if DISCARD in short else "variable full"))
            want[cat] = want.get(cat, 0) + 1
        assert geo.counts == want
        ax = figure(table, shape).axes[0]
        colls = {c.get_gid(): c for c in ax.collections}
        style = colours(geo.counts)
        assert set(colls) == {label(c) for c in want}
        for cat, n in want.items():
            coll = colls[label(cat)]
            assert len(coll.get_paths()) == n, cat
            assert np.allclose(coll.get_facecolor()[0][:3], to_rgba(style[cat][0])[:3])
            assert (coll.get_hatch() == "//") == (cat[0] == "overlap")
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert sorted(legend) == sorted(f"{label(c)}: {n}" for c, n in want.items())


def test_plot_table_writes_a_valid_png(tmp_path):
    pytest.importorskip("matplotlib", reason="the picture needs the plot extra (matplotlib)")
    import matplotlib.image
    t = dynshape.explain("add", (300, 257), (257,))
    path = tmp_path / "tiles.png"
    geo = plot_table(t, path)
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 100 and height > 100
    assert matplotlib.image.imread(str(path)).shape[:2] == (height, width)
    # the user's 300x257 grid, every entry that runs counted once
    assert geo.grid == (300, 257) and geo.runs == sum(geo.counts.values())
    assert geo.runs == len(tile_rectangles(t, (300, 257))) > 0


def test_picture_legend_counts_add_up_for_a_coalesced_call():
    pytest.importorskip("matplotlib", reason="the picture needs the plot extra (matplotlib)")
    t = dynshape.explain("relu", (517, 1531))
    ax = figure(t).axes[0]
    legend = ax.get_legend()
    nums = [int(x.get_text().rsplit(": ", 1)[1]) for x in legend.get_texts()]
    live = int(((lambda r: (r[:, 2] > 0) & (r[:, 4] > 0))(
        t.resolved(1, 517 * 1531, CATALOG))).sum())
    assert sum(nums) == live == int(legend.get_title().get_text().split(": ")[1])
    assert "517x1531" in ax.get_title() and f"{live} entries run" in ax.get_title()
    assert ax.get_xlim() == (0, 1531) and ax.get_ylim() == (517, 0)


def test_plot_table_refuses_no_table(tmp_path):
    with pytest.raises(ShapeError, match="empty"):
        plot_table(dynshape.explain("relu", (0, 4)), tmp_path / "x.png")


def test_missing_matplotlib_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"dynshape\[plot\]"):
        plot_table(_hand_made(), tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_cli_explain_saves_the_picture(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib", reason="the picture needs the plot extra (matplotlib)")
    path = tmp_path / "add.png"
    assert cli.main(["explain", "add", "40x150", "1x150", "--png", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ParamTable" in out and f"picture: {path} (" in out
    # the counts printed add up to the entries run, drawn on the user's 40x150 tensor
    runs, kinds = re.search(r"picture: .*\((\d+) entries run: (.*)\)", out).groups()
    assert sum(int(k.split(" x ")[0]) for k in kinds.split(", ") if " x " in k) == int(runs)
    assert "call: add float32 40x150" in out
    assert path.read_bytes()[:8] == PNG_MAGIC
    monkeypatch.chdir(tmp_path)
    assert cli.main(["explain", "relu", "3x1000", "--png"]) == 0
    assert (tmp_path / "relu_3x1000_tiles.png").read_bytes()[:8] == PNG_MAGIC


def test_cli_without_matplotlib_says_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert cli.main(["explain", "relu", "3x1000", "--png", str(tmp_path / "x.png")]) == 2
    assert "dynshape[plot]" in capsys.readouterr().err
