"""``explain`` in the user's coordinates: the geometry of every family mapped back onto the
tensor's last two dims, checked against expectations computed here from the table's raw
entries and the shapes (never from the geometry code); the text and the CLI."""
import math

import numpy as np
import pytest

import dynshape
from dynshape import cli
from dynshape.pictures.calls import call_geometry
from dynshape.pictures.picture import geometry

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _paint(geo):
    """How many pieces cover each cell of the first batch's grid, and which entry."""
    R, C = geo.grid
    count = np.zeros((R, C), np.int64)
    owner = np.full((R, C), -1, np.int64)
    for p in geo.pieces:
        assert 0 <= p.row and p.row + p.rows <= R and 0 <= p.col and p.col + p.cols <= C, p
        count[p.row:p.row + p.rows, p.col:p.col + p.cols] += 1
        owner[p.row:p.row + p.rows, p.col:p.col + p.cols] = p.entry
    return count, owner


def _live_plane_entries(t, m, n):
    """Entry index -> (row off, rows, col off, cols) of a plane table's entries that write
    at plane m x n, from the raw table (ParamTable.resolved)."""
    res = t.resolved(m, n, dynshape.CATALOG)
    return {i: (o0, v0, o1, v1) for i, (_, o0, v0, o1, v1) in enumerate(res.tolist())
            if v0 and v1}


def _check_counts(geo):
    assert sum(geo.counts.values()) == geo.runs
    for c in {p.category for p in geo.pieces}:
        assert geo.counts[c] >= len({p.entry for p in geo.pieces if p.category == c})


# ---- plane families ------------------------------------------------------------------------
def test_relu_is_drawn_on_the_users_grid_not_the_coalesced_row():
    t = dynshape.explain("relu", (517, 1531))
    geo = call_geometry(t)
    assert geo.grid == (517, 1531) and geo.batch == () and geo.shape == (517, 1531)
    count, owner = _paint(geo)
    assert (count == 1).all()
    # independently: the table runs on one row of 517*1531 elements; entry i writes the flat
    # range [o1, o1 + v1) of the row-major tensor
    live = _live_plane_entries(t, 1, 517 * 1531)
    want = np.full(517 * 1531, -1, np.int64)
    for i, (o0, v0, o1, v1) in live.items():
        assert (o0, v0) == (0, 1)
        want[o1:o1 + v1] = i
    assert np.array_equal(owner.reshape(-1), want)
    assert geo.runs == len(live) == sum(geo.counts.values())
    assert geo.table_entries == len(t) and geo.runs < len(t)     # bucket-wide table
    _check_counts(geo)
    assert "plane 1x" not in geo.title() and "517x1531" in geo.title()
    assert f"{len(live)} entries run" in geo.title()
    text = t.describe()
    assert "517x1531 contiguous: coalesced to one row of 791527 elements" in text
    assert f"call: relu float32 517x1531: {len(live)} entries run" in text


def test_broadcast_add_rows_and_batches():
    t = dynshape.explain("add", (40, 150), (1, 150))
    geo = call_geometry(t)
    assert geo.grid == (40, 150)
    count, owner = _paint(geo)
    assert (count == 1).all()
    live = _live_plane_entries(t, 40, 150)
    assert geo.runs == len(live) == sum(geo.counts.values())
    for i, (o0, v0, o1, v1) in live.items():
        assert (owner[o0:o0 + v0, o1:o1 + v1] == i).all()
    assert "input 1 (0, 1)" in t.describe()          # the broadcast operand's strides
    # batch dims: the plane merges the batch into the rows; batch 0 is drawn
    t = dynshape.explain("add", (3, 40, 50), (50,))
    geo = call_geometry(t)
    assert geo.grid == (40, 50) and geo.batch == (3,)
    assert "batch dims d0=3" in geo.title()
    count, _ = _paint(geo)
    assert (count == 1).all()
    m, n = 120, 50                       # 3x40 rows merged (every operand walks them as one)
    assert geo.runs == len(_live_plane_entries(t, m, n)) == sum(geo.counts.values())


def test_coalesced_row_with_batches_draws_batch_zero():
    t = dynshape.explain("relu", (3, 5, 700))
    geo = call_geometry(t)
    assert geo.grid == (5, 700) and geo.batch == (3,)
    count, owner = _paint(geo)
    assert (count == 1).all()
    live = _live_plane_entries(t, 1, 3 * 5 * 700)
    want = np.full(3 * 5 * 700, -1, np.int64)
    for i, (_, _, o1, v1) in live.items():
        want[o1:o1 + v1] = i
    assert np.array_equal(owner.reshape(-1), want[:5 * 700])
    assert geo.runs == len(live)


@pytest.mark.parametrize("how", ["api", "cli-transposed", "cli-axes"])
def test_transposed_copy_is_explained(how, capsys):
    if how == "api":
        x = np.empty((1531, 517), np.float32).T
        t = dynshape.explain("copy", x)
        text = t.describe()
    else:
        opt = ["--transposed"] if how == "cli-transposed" else ["--axes", "1,0"]
        assert cli.main(["explain", "copy", "517x1531", *opt, "--limit", "0"]) == 0
        text = capsys.readouterr().out
        t = dynshape.last_table()
    assert "copy float32 (moves 4-byte items: float32 kernels)" in text
    assert "input 0 (1, 517)" in text and "not coalesced" in text
    geo = call_geometry(t)
    assert geo.grid == (517, 1531)
    count, _ = _paint(geo)
    assert (count == 1).all()
    assert geo.runs == len(_live_plane_entries(t, 517, 1531))


def test_cli_attributes(capsys):
    assert cli.main(["explain", "sum", "5x6x7", "--attr", "axis=1,2", "--attr",
                     "keepdims=true", "--limit", "0"]) == 0
    out = capsys.readouterr().out
    assert "call: sum float32 5x6x7" in out and "axes 1, 2 (42 elements" in out
    with pytest.raises(SystemExit):
        cli.main(["explain", "sum", "5x6", "--attr", "axis"])
    assert "NAME=VALUE" in capsys.readouterr().err


def test_axes_order_of_a_3d_view(capsys):
    assert cli.main(["explain", "relu", "4x30x50", "--axes", "2,0,1", "--limit", "0"]) == 0
    out = capsys.readouterr().out
    # the view of a (30, 50, 4) array: element strides (1, 200, 4); 30 and 50 still merge
    assert "call: relu float32 4x30x50 (grid 30x50 of batch 0; batch dims d0=4)" in out
    assert "input 0 (1, 200, 4)" in out and "merged" in out and "plane 4x1500" in out
    assert cli.main(["explain", "relu", "4x30", "--axes", "0,0"]) == 2
    assert "not an order" in capsys.readouterr().err


# ---- reductions and row-wise ops: rows tiled, the reduced axis walked in the kernel -------
@pytest.mark.parametrize("op,shape,axis,walk", [
    ("sum", (4, 77, 100), 2, "columns"),
    ("max", (77, 100), 0, "rows"),
    ("softmax", (77, 30522), -1, "columns"),
    ("layer_norm", (6, 33, 64), -1, "columns"),
    ("sum", (5, 6, 7), (1, 2), "grid"),
])
def test_reductions_tile_the_kept_elements(op, shape, axis, walk):
    t = dynshape.explain(op, shape, axis=axis)
    geo = call_geometry(t)
    axes = [a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))]
    assert geo.grid == shape[-2:] and geo.walk == walk
    assert geo.batch == shape[:-2]
    count, _ = _paint(geo)
    assert (count == 1).all()
    for p in geo.pieces:                  # the reduced axis is covered whole by every tile
        if walk in ("columns", "grid"):
            assert (p.col, p.cols) == (0, shape[-1])
        if walk in ("rows", "grid"):
            assert (p.row, p.rows) == (0, shape[-2])
    kept = math.prod(s for d, s in enumerate(shape) if d not in axes)
    assert geo.runs == len(_live_plane_entries(t, 1, kept)) == sum(geo.counts.values())
    text = t.describe()
    which = f"axis {axes[0]}" if len(axes) == 1 else "axes " + ", ".join(map(str, axes))
    assert f"{which} ({math.prod(shape[a] for a in axes)} elements per kept element)" in text
    assert "walked inside each kernel" in text


# ---- matmul, conv, pool: output tiles --------------------------------------------------------
@pytest.mark.parametrize("a,b", [((517, 1531), (1531, 77)), ((3, 64, 100), (100, 50))])
def test_matmul_output_tiles_and_k_blocks(a, b):
    t = dynshape.explain("matmul", a, b)
    geo = call_geometry(t)
    M, K, N = a[-2], a[-1], b[-1]
    nb = math.prod(a[:-2])
    assert geo.grid == (M, N) and geo.batch == a[:-2]
    count, _ = _paint(geo)
    assert (count == 1).all()
    e = t.entries
    runs = int(((e[:, 1] < M) & (e[:, 2] < N) & (e[:, 5] < nb)).sum())
    assert geo.runs == runs == sum(geo.counts.values()) == nb * len(geo.pieces)
    from dynshape_kernels.abi.tiles import MATMUL_SLOTS_F32 as SLOTS_F32
    kc = SLOTS_F32[int(e[0, 0])][4]
    assert f"K={K} is walked inside each tile in {-(-K // kc)} blocks of {kc}" in t.describe()


def _conv_out(size, k, s, d, p0, p1):
    return (size + p0 + p1 - d * (k - 1) - 1) // s + 1


def test_conv2d_output_tiles_and_one_window():
    x, w = (2, 3, 57, 61), (8, 3, 3, 3)
    t = dynshape.explain("conv2d", x, w, strides=(2, 1), dilations=(2, 1), pads=(2, 1, 2, 1))
    geo = call_geometry(t)
    OH, OW = _conv_out(57, 3, 2, 2, 2, 2), _conv_out(61, 3, 1, 1, 1, 1)
    assert geo.grid == (OH, OW) and geo.batch == (2, 8) and "N=2, M=8" in geo.title()
    count, _ = _paint(geo)
    assert (count == 1).all()
    blocks = len({(int(r[3]), int(r[4])) for r in t.entries})      # channel blocks
    assert geo.runs == sum(geo.counts.values()) == 2 * blocks * len(geo.pieces)
    win = geo.window
    r, c, vh, vw = win["tile"]
    assert win["window"] == (r * 2 - 2, c * 1 - 1, (vh - 1) * 2 + 2 * 2 + 1,
                             (vw - 1) * 1 + 1 * 2 + 1)
    assert win["input"] == (57, 61)
    assert "K = 3x3x3 = 27" in t.describe() and "2x8x" in t.describe()


def test_pool_output_tiles_and_one_window():
    t = dynshape.explain("max_pool2d", (2, 5, 113, 115), kernel_shape=(3, 3), strides=(2, 2),
                         pads=(1, 1, 1, 1))
    geo = call_geometry(t)
    OH, OW = _conv_out(113, 3, 2, 1, 1, 1), _conv_out(115, 3, 2, 1, 1, 1)
    assert geo.grid == (OH, OW) and geo.batch == (2, 5) and "N=2, C=5" in geo.title()
    count, _ = _paint(geo)
    assert (count == 1).all()
    assert geo.runs == len(_live_plane_entries(t, OH, OW)) == sum(geo.counts.values())
    assert geo.work_items == geo.runs * 10           # N and C merged into 10 outer planes
    r, c, vh, vw = geo.window["tile"]
    assert geo.window["window"] == (2 * r - 1, 2 * c - 1, 2 * (vh - 1) + 3, 2 * (vw - 1) + 3)


@pytest.mark.parametrize("steps,shape,sides", [
    ([("add", "bias"), "gelu", "softmax"], (300, 77), {"bias": (77,)}),
    (["relu", "exp"], (3, 517, 153), {}),
])
def test_fused_sequence_is_drawn_on_the_users_grid(steps, shape, sides):
    f = dynshape.fuse(steps)
    t = dynshape.explain(f, shape, **sides)
    geo = call_geometry(t)
    assert geo.grid == shape[-2:] and geo.batch == shape[:-2]
    count, owner = _paint(geo)
    assert (count == 1).all()
    m, n = t.shape                       # the plane the table was built for: this call's
    res = t.resolved(m, n)
    live = [i for i, (_, v0, _, v1) in enumerate(res.tolist()) if v0 and v1]
    assert geo.runs == len(live) == sum(geo.counts.values())
    flat = np.full(m * n, -1, np.int64)  # plane rows x columns in C order = the tensor's
    for i in live:
        o0, v0, o1, v1 = res[i]
        for r in range(o0, o0 + v0):
            flat[r * n + o1:r * n + o1 + v1] = i
    R, C = shape[-2:]
    assert np.array_equal(owner.reshape(-1), flat[:R * C])
    assert "each tile runs the" in t.describe() and f"{len(live)} entr" in t.describe()


def test_a_table_without_a_call_is_drawn_on_its_plane():
    t = dynshape.explain("relu", (300, 7))
    t2 = dynshape.ParamTable.__new__(type(t))
    t2.__dict__.update({k: v for k, v in t.__dict__.items() if k != "call"})
    geo = geometry(t2)
    assert geo.grid == tuple(t2.shape) and "no call recorded" in geo.notes[0]
    assert "call:" not in t2.describe()


# ---- the CLI writes pictures of every family -------------------------------------------------
@pytest.mark.parametrize("args", [
    ["matmul", "517x1531", "1531x77"],
    ["conv2d", "1x3x30x31", "4x3x3x3", "--attr", "pads=1,1,1,1"],
    ["max_pool2d", "1x2x30x31", "--attr", "kernel_shape=3,3", "--attr", "strides=2,2"],
    ["softmax", "77x3052"],
    ["add", "40x150", "1x150"],
])
def test_cli_explain_png_for_every_family(args, tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the picture needs the plot extra (matplotlib)")
    path = tmp_path / "t.png"
    assert cli.main(["explain", *args, "--png", str(path), "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "call: " in out and f"picture: {path} (" in out and "entries run: " in out
    assert path.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize("op,shapes,attrs", [
    ("relu", [(40, 150)], {}),
    ("softmax", [(77, 305)], {"axis": -1}),
    ("sum", [(3, 17, 19)], {"axis": 1}),
    ("matmul", [(17, 64), (64, 33)], {}),
    ("matmul", [(256, 17, 64), (256, 64, 33)], {}),
    ("conv2d", [(1, 3, 30, 31), (4, 3, 3, 3)], {"pads": (1, 1, 1, 1)}),
    ("max_pool2d", [(1, 2, 30, 31)], {"kernel_shape": (3, 3), "strides": (2, 2)}),
])
def test_printing_a_table_gives_its_own_description(op, shapes, attrs):
    """``print(explain(...))`` is the family's own description (a table class that overrides
    ``describe`` is printed by it, not by the base class's plane text)."""
    t = dynshape.explain(op, *shapes, **attrs)
    assert str(t) == t.describe()
    assert len(str(t).splitlines()) > 2
