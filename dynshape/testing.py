"""Public testing helpers: hypothesis strategies for shapes, strided arrays and tables, a
coverage checker for parameter tables, and a compilation counter.

Needs the ``test`` extra (hypothesis). Typical use::

    from hypothesis import given
    from dynshape import testing

    @given(testing.tables())
    def test_cover(case):
        testing.check_coverage(case.table, case.shape)
"""
import contextlib
from dataclasses import dataclass

import numpy as np
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.common_area import E_MODE0, E_MODE1
from dynshape_kernels.tail_mode import OVERLAP, TailMode
from hypothesis import strategies as st

from .bucket import bucket
from .combination import Tiling
from .param_table import ParamTable

# ---------------------------------------------------------------- compilation counting


class CompileCounter:
    """Counts Numba compilations (cache loads are not compilations)."""

    def __init__(self):
        self.count = 0
        self.functions = []


@contextlib.contextmanager
def count_compilations():
    """``with count_compilations() as c: ...`` then ``c.count`` is the number of compiles."""
    from numba.core import event

    counter = CompileCounter()

    class _Listener(event.Listener):
        def on_start(self, ev):
            counter.count += 1
            counter.functions.append(str(ev.data.get("dispatcher", "?")))

        def on_end(self, ev):
            pass

    with event.install_listener("numba:compile", _Listener()):
        yield counter


# ---------------------------------------------------------------- coverage


def coverage(table, m, n, catalog=CATALOG, which=None):
    """Count array (m, n): how many entries write each element of an (m, n) inner plane.

    ``which``: optional boolean mask selecting entries. Raises AssertionError if a resolved
    tile leaves the plane or has a negative length.
    """
    counts = np.zeros((m, n), dtype=np.int64)
    res = table.resolved(m, n, catalog)
    if which is not None:
        res = res[which]
    for kid, o0, v0, o1, v1 in res:
        assert v0 >= 0 and v1 >= 0, "negative valid length"
        if v0 == 0 or v1 == 0:
            continue
        assert 0 <= o0 and o0 + v0 <= m, f"rows {o0}..{o0 + v0} outside 0..{m}"
        assert 0 <= o1 and o1 + v1 <= n, f"columns {o1}..{o1 + v1} outside 0..{n}"
        counts[o0:o0 + v0, o1:o1 + v1] += 1
    return counts


def check_coverage(table, shape, catalog=CATALOG):
    """Assert the invariant on the plane ``shape=(m, n)``: every element is written, entries
    without OVERLAP tails never write an element twice, and OVERLAP entries are full tiles
    (their rewrites recompute the identical value). Returns the count array."""
    m, n = shape
    e = table.entries
    ov = (e[:, E_MODE0] == OVERLAP) | (e[:, E_MODE1] == OVERLAP)
    plain = coverage(table, m, n, catalog, ~ov)
    twice = np.argwhere(plain > 1)
    assert twice.size == 0, (f"{len(twice)} elements written twice by non-overlap entries, "
                             f"first {twice[:3].tolist()}")
    res = table.resolved(m, n, catalog)[ov]
    for kid, o0, v0, o1, v1 in res:
        assert (v0, v1) == catalog[int(kid)].tile, \
            f"OVERLAP entry of kernel {kid} is not a full tile: {v0}x{v1}"
    counts = plain + coverage(table, m, n, catalog, ov)
    missing = np.argwhere(counts == 0)
    assert missing.size == 0, f"{len(missing)} elements never written, first {missing[:3].tolist()}"
    return counts


# ---------------------------------------------------------------- strategies


def shapes(max_rank=6, max_side=40, min_side=0):
    """Shapes of rank 0..max_rank, with 0- and 1-sized dimensions well represented."""
    side = st.one_of(st.sampled_from([0, 1, 1, 2, 3]), st.integers(min_side, max_side))
    return st.lists(side, min_size=0, max_size=max_rank).map(tuple)


def views(draw_shape, dtype=np.float32, allow_negative=True):
    """Strategy: arrays of the given shape that are views with random strides (sliced with
    steps, negative steps, transposed), over random data."""

    @st.composite
    def _v(draw):
        shape = draw_shape if isinstance(draw_shape, tuple) else draw(draw_shape)
        steps = [draw(st.sampled_from([1, 1, 2, 3] + ([-1, -2] if allow_negative else [])))
                 for _ in shape]
        base_shape = [max(1, n) * abs(s) for n, s in zip(shape, steps)]
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        base = (rng.standard_normal(base_shape) * 4).astype(dtype)
        if np.dtype(dtype).kind in "iu":
            base = rng.integers(-50, 50, size=base_shape).astype(dtype)
        sl = tuple(slice(None, n * s, s) if s > 0 else slice(None, None, s)
                   for n, s in zip(shape, steps))
        v = base[sl]
        v = v[tuple(slice(0, n) for n in shape)] if shape else base.reshape(())[...]
        if v.ndim >= 2 and draw(st.booleans()):
            perm = draw(st.permutations(range(v.ndim)))
            inv = np.argsort(perm)
            v = np.ascontiguousarray(v.transpose(perm)).transpose(inv) if draw(st.booleans()) \
                else v
        assert v.shape == tuple(shape)
        return v
    return _v()


def tail_mode_sets():
    """Non-empty sets of allowed tail modes (VARIABLE_FULL is always possible)."""
    return st.sets(st.sampled_from(list(TailMode))).map(
        lambda s: frozenset(s | {TailMode.VARIABLE_FULL}))


@dataclass
class TableCase:
    table: ParamTable
    shape: tuple          # (m, n) the table was built for
    tiling: Tiling


@st.composite
def tables(draw, family="unary", op="relu", dtype="float32", variant=None, max_side=3000):
    """Strategy: a (table, shape) from the combination algorithm for a random inner plane,
    random allowed tail modes and layout, with the simplified or the optimized variant."""
    fam = CATALOG.families[family]
    m = draw(st.one_of(st.integers(1, 4), st.integers(1, 200)))
    n = draw(st.one_of(st.integers(1, 40), st.integers(1, max_side)))
    modes = draw(tail_mode_sets())
    strided = draw(st.booleans())
    w = min(t[2] for t in fam.tiles if t[1] > t[2])
    bk = (bucket(m, fam.quanta[0]), bucket(n, fam.quanta[1], w))
    tiling = Tiling(CATALOG, family, op, dtype, bk, (m, n), draw(st.integers(1, 3)), strided,
                    modes)
    variant = variant or draw(st.sampled_from(["simplified", "optimized"]))
    comb = tiling.simplified() if variant == "simplified" else tiling.optimized()
    t = ParamTable(family, op, dtype, "cpu", CATALOG.hash, bk, comb.entries, np.zeros(0),
                   2, CATALOG.family_base(family, dtype), fam.op_base, comb.variant, comb.cost,
                   comb.description, (m, n))
    return TableCase(t, (m, n), tiling)


def sizes_in_bucket(table):
    """Strategy: a plane shape anywhere in the table's bucket (the table must serve it)."""
    (lo0, hi0), (lo1, hi1) = table.bucket
    return st.tuples(st.integers(lo0 + 1, hi0), st.integers(lo1 + 1, hi1))


# ---------------------------------------------------------------- matmul tables


def matmul_coverage(table, M, N, batch):
    """Count array (batch, M, N): how many tiles of a matmul table write each output element
    of an M x N x batch problem, with the driver's clipping of tiles at M, N and the batch
    count (the K dimension is not in the table: it is walked whole inside every tile)."""
    cover = np.zeros((batch, M, N), np.int32)
    for _, m0, n0, tm, tn, b in table.entries:
        if b < batch and m0 < M and n0 < N:
            cover[b, m0:min(m0 + tm, M), n0:min(n0 + tn, N)] += 1
    return cover


def check_matmul_coverage(table, M, N, batch):
    """Assert that the table covers an M x N x batch output exactly once and that the
    problem lies in the table's bucket."""
    for size, (lo, hi), what in zip((M, N, batch), (table.bucket[0], table.bucket[1],
                                                     table.bucket[3]), "MN" + "b"):
        assert lo < size <= hi or size == hi == 0, f"{what}={size} outside the bucket {lo, hi}"
    cover = matmul_coverage(table, M, N, batch)
    assert (cover == 1).all(), f"{int((cover == 0).sum())} elements uncovered, " \
                               f"{int((cover > 1).sum())} covered more than once"


# ---------------------------------------------------------------- conv tables


def conv_coverage(table, N, OH, OW):
    """Count array (N, M, OH, OW): how many entries of a conv2d table write each output element
    of a problem with N images and an OH x OW output, with the driver's clipping of tiles."""
    g = table.geo
    cover = np.zeros((N, g["M"], OH, OW), np.int32)
    for row in table.resolved(N, OH, OW):
        _, n, grp, m0, mv, oh0, vh, ow0, vw = (int(v) for v in row[:9])
        if mv and vh and vw:
            c0 = grp * g["Mg"] + m0
            cover[n, c0:c0 + mv, oh0:oh0 + vh, ow0:ow0 + vw] += 1
    return cover


def check_conv_table(table, N, H, W, OH, OW):
    """Assert a conv2d table's invariants for an (N, ., H, W) -> (N, ., OH, OW) problem of its
    bucket: every output element is written exactly once; K is never split (no entry column
    holds a K range: every entry walks all of C/group*KH*KW); each entry's input offset is its
    output offset mapped through stride and padding; and for every tile and kernel tap the
    input rows and columns the driver reads (the window clipped by its own column-range rule)
    lie inside x, i.e. padding is never read from memory. Returns the count array."""
    from dynshape_kernels.cpu.conv_layout import ENTRY_COLUMNS, T_NCOL
    from dynshape_kernels.cpu.conv_window import col_range
    col_range = getattr(col_range, "py_func", col_range)
    g = table.geo
    assert table.entries.shape[1] == T_NCOL and not any("k" == c[0] for c in ENTRY_COLUMNS[1:])
    cover = conv_coverage(table, N, OH, OW)
    assert (cover == 1).all(), (f"{int((cover == 0).sum())} output elements never written, "
                                f"{int((cover > 1).sum())} written more than once")
    pt, pl = g["pads"][0], g["pads"][1]
    for row in table.resolved(N, OH, OW):
        _, n, grp, m0, mv, oh0, vh, ow0, vw, ih0, iw0 = (int(v) for v in row)
        assert ih0 == oh0 * g["sh"] - pt and iw0 == ow0 * g["sw"] - pl, \
            f"input offset ({ih0}, {iw0}) of the tile at ({oh0}, {ow0}) is inconsistent"
        if not (mv and vh and vw):
            continue
        for kw in range(g["KW"]):
            iwb = iw0 + kw * g["dw"]
            lo, hi = col_range(iwb, g["sw"], W, vw)
            for j in range(vw):
                inside = 0 <= iwb + j * g["sw"] < W
                assert inside == (lo <= j < hi), f"column {j} of tap {kw}: read {lo <= j < hi}"
    return cover
