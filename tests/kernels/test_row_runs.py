"""The unary and binary drivers run consecutive one-row entries as one run
(``elementwise._run_length``: one op-switch call over the rows of a binary run, one decoded
entry for the rows of a unary run). Driven here with hand-built tables: rows in any order,
row tiles of two lengths, rows anchored at either end, both column tail modes, batches and
reversed rows, against NumPy; padding around the output rows must stay untouched."""
import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

import dynshape
from dynshape.runtime.layout import plane
from dynshape.tables.param_table import ParamTable
from dynshape_kernels import drivers
from dynshape_kernels.abi.tail_mode import (ANCHOR_END, ANCHOR_START, VARIABLE_FULL,
                                            VARIABLE_PARTIAL)
from dynshape_kernels.abi.tiles import ELEMENTWISE_TILES
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.cpu.elementwise import RUN_ENTRIES, SERIAL_ELEMENTS


@st.composite
def cases(draw):
    batch = draw(st.integers(1, 3))
    m = draw(st.integers(2, 40))        # sizes of 1 would be merged away
    n = draw(st.integers(2, 700))
    rows = [(draw(st.sampled_from((0, 1))),                   # tile slot (1x512 or 1x4096)
             draw(st.sampled_from((VARIABLE_FULL, VARIABLE_PARTIAL))),
             draw(st.booleans()))                           # row anchored at the end
            for _ in range(m)]
    order = draw(st.sampled_from(("rows", "columns", "reversed", "shuffled")))
    seed = draw(st.integers(0, 2**31 - 1))
    family = draw(st.sampled_from(("binary", "unary")))
    side = draw(st.sampled_from(("row", "column")))         # bias per column or per row
    run_block = draw(st.booleans())     # the executor's run block after the store block
    return batch, m, n, rows, order, draw(st.booleans()), seed, family, side, run_block


@settings(max_examples=40, deadline=None)
@given(cases())
# neighbouring rows of the two tile lengths: a run must not take in a row of another kernel
@example((2, 6, 600, [(i % 2, VARIABLE_FULL, False) for i in range(6)], "columns", False, 1,
          "binary", "row", True))
@example((2, 6, 600, [(i % 2, VARIABLE_FULL, False) for i in range(6)], "columns", False, 1,
          "unary", "row", True))
# short rows (expanded side) and long ones (a scalar call per row), one value per row
@example((3, 40, 70, [(0, VARIABLE_FULL, False)] * 40, "rows", False, 2, "binary", "column",
          False))
@example((3, 40, 300, [(0, VARIABLE_FULL, False)] * 40, "rows", True, 3, "binary", "column",
          False))
@example((3, 40, 70, [(0, VARIABLE_FULL, False)] * 40, "rows", True, 4, "binary", "row", False))
# rows in order: the run block lets the drivers take the runs without comparing entries
@example((3, 40, 70, [(0, VARIABLE_FULL, False)] * 40, "rows", False, 5, "binary", "row", True))
@example((3, 40, 300, [(0, VARIABLE_PARTIAL, False)] * 40, "rows", True, 6, "unary", "row",
          True))
@example((3, 40, 70, [(0, VARIABLE_FULL, False)] * 40, "rows", False, 7, "binary", "column",
          True))
# rows wider than their tile (two 1x512 tiles side by side): runs of whole rows
@example((2, 30, 700, [(0, VARIABLE_FULL, False)] * 30, "rows", False, 8, "binary", "row",
          False))
@example((2, 30, 700, [(i % 2, VARIABLE_FULL, i % 3 == 0) for i in range(30)], "rows", True, 9,
          "binary", "column", False))
def test_runs_of_row_entries_match_numpy(case):
    batch, m, n, rows, order, reverse, seed, family, side, run_block = case
    op = "add" if family == "binary" else "relu"
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((batch, m, n + 3)).astype(np.float32)
    bias = rng.standard_normal(n if side == "row" else m).astype(np.float32)
    a = base[:, :, :n]                                      # rows of a strided view
    a = a[:, ::-1] if reverse else a                        # rows with a negative stride
    pad = np.full((batch, m + 2, n), -7.0, np.float32)      # output rows framed by padding
    out = pad[:, 1:m + 1]
    # a real table of this call gives the family's id and op bases
    bias_b = bias if side == "row" else bias[:, None]      # broadcast against a's rows
    real = dynshape.explain(op, a, bias_b) if family == "binary" else dynshape.explain(op, a)
    entries = []
    for r, (slot, mode1, at_end) in enumerate(rows):
        kid = CATALOG.kernel_id(family, op, "float32", slot)
        t1 = ELEMENTWISE_TILES[slot][1]
        off0, anch0 = (m - r, ANCHOR_END) if at_end else (r, ANCHOR_START)
        for c0 in range(0, n, t1):
            entries.append([kid, VARIABLE_FULL, mode1, off0, anch0, c0, ANCHOR_START])
    entries = np.array(entries, np.int64)
    if order == "columns":                  # column blocks outermost: runs of rows
        entries = entries[np.lexsort((np.arange(len(entries)), entries[:, 5]))]
    elif order == "reversed":
        entries = entries[::-1].copy()
    elif order == "shuffled":
        entries = entries[rng.permutation(len(entries))]
    table = ParamTable(family, op, "float32", "cpu", CATALOG.hash, real.bucket, entries,
                       np.zeros(0), real.n_operands, real.id_base, real.op_base, "simplified",
                       0)
    operands = (out, a, np.broadcast_to(bias_b, a.shape))[:3 if family == "binary" else 2]
    p = plane(a.shape, [[s // 4 for s in arr.strides] for arr in operands])
    assert p.m == m and p.n == n            # the view's row gaps keep rows apart
    offsets = [1 * n, (m - 1) * (n + 3) if reverse else 0, 0][:len(operands)]
    common = table.bind(p, offsets)
    if run_block:
        common = np.concatenate([common, [0, table.rows_in_order]])
    if family == "binary":
        drivers.get("binary", "float32")(base.ravel(), bias, pad.reshape(-1), common, entries)
        np.testing.assert_array_equal(out, a + bias_b)
    else:
        drivers.get("unary", "float32")(base.ravel(), pad.reshape(-1), common, entries,
                                        np.zeros(2, np.float32))
        np.testing.assert_array_equal(out, np.maximum(a, 0))
    assert (pad[:, 0] == -7).all() and (pad[:, -1] == -7).all()


def test_the_run_length_and_the_parallel_path_are_exercised():
    """The cases above reach the parallel path (several runs per call) and the serial one."""
    assert 3 * 40 * 700 > SERIAL_ELEMENTS > 1 and RUN_ENTRIES > 1


def _row_table(family, op, rows, n, slot=0):
    """A table of ``rows`` one-row entries in order (row i at entry i), one column tile."""
    kid = CATALOG.kernel_id(family, op, "float32", slot)
    entries = np.array([[kid, VARIABLE_FULL, VARIABLE_FULL, r, ANCHOR_START, 0, ANCHOR_START]
                        for r in range(rows)], np.int64)
    real = dynshape.explain(op, np.zeros((rows, n), np.float32), np.zeros(n, np.float32))
    return ParamTable(family, op, "float32", "cpu", CATALOG.hash, real.bucket, entries,
                      np.zeros(0), real.n_operands, real.id_base, real.op_base, "simplified", 0)


def test_rows_in_order_is_computed_from_the_entries():
    """The flag holds only when entry i is row i from the start with entry 0's kernel, tail
    modes and columns; any other table (a gap, a row anchored at the end, another kernel,
    mode or column, two column tiles per row, no entry) says no."""
    t = _row_table("binary", "add", 50, 16)
    assert t.rows_in_order

    def with_entries(e):
        return ParamTable(t.family, t.op, t.dtype, t.target, t.catalog_hash, t.bucket, e,
                          np.zeros(0), t.n_operands, t.id_base, t.op_base, t.variant, 0)

    def changed(row, col, value):
        e = t.entries.copy()
        e[row, col] = value
        return with_entries(e)
    kid1 = CATALOG.kernel_id("binary", "add", "float32", 1)
    for row, col, value in [(7, 3, 8), (7, 4, ANCHOR_END), (49, 0, kid1),
                            (3, 2, VARIABLE_PARTIAL), (3, 1, VARIABLE_PARTIAL), (0, 5, 64),
                            (30, 6, ANCHOR_END)]:
        assert not changed(row, col, value).rows_in_order, (row, col, value)
    two = np.repeat(t.entries, 2, axis=0)
    two[1::2, 5] = 512
    assert not with_entries(two).rows_in_order
    assert not with_entries(t.entries[:0]).rows_in_order


def test_the_executor_binds_the_run_block():
    """A call's common area ends with the store block and the run block; the run block's
    flag is the table's: 1 for rows that each fit one row tile, 0 for a square-tiled
    transposed copy."""
    from dynshape.runtime.plane import PLANE
    from dynshape.runtime.replay import REPLAY
    from dynshape_kernels.abi.common_area import RUN_BLOCK, STORE_BLOCK, W_ROWS, common_size
    x = np.ones((3000, 300), np.float32)
    b = np.ones(300, np.float32)
    table = dynshape.explain("add", x, b)
    assert table.rows_in_order, table.describe()
    bound = []
    orig = PLANE.bind

    def bind(launch, p, tbl):
        c = orig(launch, p, tbl)
        bound.append((tbl, c))
        return c
    PLANE.bind = bind
    try:
        REPLAY.clear()
        dynshape.clear_cache()
        dynshape.run("add", x, b)
        dynshape.run("copy", np.ones((300, 200), np.float32).T)
    finally:
        del PLANE.bind
    (t1, c1), (t2, c2) = bound
    assert t1.rows_in_order and c1.size == common_size(3) + STORE_BLOCK + RUN_BLOCK
    assert c1[common_size(3) + STORE_BLOCK + W_ROWS] == 1
    assert not t2.rows_in_order and c2.size == common_size(2) + STORE_BLOCK + RUN_BLOCK
    assert c2[common_size(2) + STORE_BLOCK + W_ROWS] == 0


def test_a_run_of_rows_in_order_stops_at_the_plane_and_inside_the_operands():
    """Rows in order past the call's rows (a bucket's table) are not run; and a run block that
    claims rows in order for entries that are not (a hand-built common area) still writes
    only rows of the plane: the drivers bound the run by the plane, not by the flag."""
    m, n, extra = 300, 16, 40
    t = _row_table("binary", "add", m + extra, n)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((m, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    pad = np.full((m + 2 * extra, n), -7.0, np.float32)
    out = pad[extra:extra + m]
    p = plane(a.shape, [[s // 4 for s in arr.strides]
                        for arr in (out, a, np.broadcast_to(bias, a.shape))])
    common = np.concatenate([t.bind(p, [extra * n, 0, 0]), [0, 1]])
    drivers.get("binary", "float32")(a.ravel(), bias, pad.reshape(-1), common, t.entries)
    np.testing.assert_array_equal(out, a + bias)
    assert (pad[:extra] == -7).all() and (pad[extra + m:] == -7).all()
    # entries in reverse order under a false claim: each run starts at its entry's row and
    # stops at the plane's last row
    pad[:] = -7.0
    rev = t.entries[::-1].copy()
    drivers.get("binary", "float32")(a.ravel(), bias, pad.reshape(-1), common, rev)
    assert (pad[:extra] == -7).all() and (pad[extra + m:] == -7).all()
    written = out != -7
    np.testing.assert_array_equal(out[written], (a + bias)[written])


def _wide_table(rows, n, drop=None):
    """Rows of ``n`` columns in 1x512 tiles side by side, row after row (entry ``drop``
    left out)."""
    kid = CATALOG.kernel_id("binary", "add", "float32", 0)
    entries = [[kid, VARIABLE_FULL, VARIABLE_FULL, r, ANCHOR_START, c0, ANCHOR_START]
               for r in range(rows) for c0 in range(0, n, 512)]
    if drop is not None:
        del entries[drop]
    return np.array(entries, np.int64)


def test_whole_rows_are_the_rows_their_tiles_cover_side_by_side():
    """``_whole_rows``: the complete rows from the first entry, and the entries they take;
    a row with a tile missing, out of place or past the plane ends them."""
    from dynshape.runtime.layout import plane as plane_of
    from dynshape_kernels.cpu.elementwise import _whole_rows
    n = 1300                                   # three tiles a row: 512, 512, 276
    t = _row_table("binary", "add", 4, n)
    p = plane_of((6, n), [[n + 3, 1]] * 3)      # rows apart: not merged into one
    assert (p.m, p.n) == (6, n)
    common = t.bind(p, [0, 0, 0])

    def whole(entries, idx, end, r0):
        return tuple(_whole_rows(common, entries, np.int64(idx), np.int64(end), np.int64(r0)))
    e = _wide_table(6, n)
    assert whole(e, 0, len(e), 0) == (6, 18)
    assert whole(e, 3, len(e), 1) == (5, 15)
    assert whole(e, 0, 8, 0) == (2, 6)         # the item ends inside row 2
    assert whole(e, 0, 18, 1) == (0, 0)        # entry 0 is row 0, not row 1
    assert whole(_wide_table(6, n, drop=4), 0, 17, 0) == (1, 3)     # row 1 misses a tile
    moved = e.copy()
    moved[7, 5] = 1024                         # row 2's second tile is not its second piece
    assert whole(moved, 0, len(e), 0) == (2, 6)
    assert whole(_wide_table(8, n), 0, 24, 0) == (6, 18)            # rows 6, 7 lie past m


def test_items_hold_whole_rows_only_for_rows_in_one_row_tiles():
    """``tiles_per_row``: the tiles of the first row when a second row follows within 64
    entries (the parallel items are rounded to whole rows); 1 for rows of one tile, for
    one row in many tiles (items of 64 tiles of a merged row made an add 2x slower) and
    for taller tiles."""
    from dynshape_kernels.cpu.elementwise import tiles_per_row
    t = _row_table("binary", "add", 4, 1300)
    common = t.bind(plane((6, 1300), [[1303, 1]] * 3), [0, 0, 0])
    assert tiles_per_row(common, _wide_table(6, 1300)) == 3
    assert tiles_per_row(common, t.entries) == 1
    assert tiles_per_row(common, _wide_table(1, 512 * 70)) == 1
    assert tiles_per_row(common, _wide_table(1, 512 * 20)) == 1      # one row, no second
    tall = _wide_table(6, 1300)
    tall[:, 0] = CATALOG.kernel_id("binary", "add", "float32", 3)    # a square tile
    assert ELEMENTWISE_TILES[3][0] > 1
    assert tiles_per_row(common, tall) == 1
