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
    return batch, m, n, rows, order, draw(st.booleans()), seed, family, side


@settings(max_examples=40, deadline=None)
@given(cases())
# neighbouring rows of the two tile lengths: a run must not take in a row of another kernel
@example((2, 6, 600, [(i % 2, VARIABLE_FULL, False) for i in range(6)], "columns", False, 1,
          "binary", "row"))
@example((2, 6, 600, [(i % 2, VARIABLE_FULL, False) for i in range(6)], "columns", False, 1,
          "unary", "row"))
# short rows (expanded side) and long ones (a scalar call per row), one value per row
@example((3, 40, 70, [(0, VARIABLE_FULL, False)] * 40, "rows", False, 2, "binary", "column"))
@example((3, 40, 300, [(0, VARIABLE_FULL, False)] * 40, "rows", True, 3, "binary", "column"))
@example((3, 40, 70, [(0, VARIABLE_FULL, False)] * 40, "rows", True, 4, "binary", "row"))
def test_runs_of_row_entries_match_numpy(case):
    batch, m, n, rows, order, reverse, seed, family, side = case
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
