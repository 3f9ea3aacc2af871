"""Properties of the combination algorithm and its tables (seed 004, Fig. 10-12)."""
import numpy as np
import pytest
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.tail_mode import (ANCHOR_END, DISCARD, OVERLAP, VARIABLE_FULL,
                                        VARIABLE_PARTIAL, TailMode)
from hypothesis import given
from hypothesis import strategies as st

from dynshape import testing
from dynshape.bucket import bucket, buckets_upto
from dynshape.combination import segment


@given(testing.tables(), st.data())
def test_table_covers_every_shape_of_its_bucket(case, data):
    """Exactly once (overlap: again, identically, by full tiles), never out of bounds, for the
    shape it was built for and for any other shape of the bucket."""
    testing.check_coverage(case.table, case.shape)
    other = data.draw(testing.sizes_in_bucket(case.table))
    testing.check_coverage(case.table, other)


@given(testing.tables(variant="optimized"))
def test_optimized_never_costs_more_than_simplified(case):
    simple = case.tiling.simplified()
    assert case.table.cost <= simple.cost + 1e-9


@given(testing.tables())
def test_overlap_only_when_allowed(case):
    e = case.table.entries
    used = set(np.unique(e[:, 1:3]).tolist())
    assert used <= {int(m) for m in case.tiling.modes}


@given(testing.tables())
def test_tables_validate_against_the_catalog(case):
    case.table.validate(CATALOG)
    kids = case.table.entries[:, 0]
    assert all(CATALOG[int(k)].op == "relu" and CATALOG[int(k)].dtype == "float32" for k in kids)


def _cover_1d(seg, n):
    v = seg.valid(n)
    o = np.where(seg.anchor == ANCHOR_END, n - seg.off, seg.off)
    cnt = np.zeros(n, int)
    for oo, vv in zip(o, v):
        cnt[oo:oo + vv] += 1
    return cnt, o, v


def test_fig10_tail_modes_on_a_worked_example():
    """n in (8, 12] with T = 4: bulk 0..8 in full tiles, then the tail tile per mode."""
    var = segment(8, 12, [4], 4, 0, VARIABLE_FULL)
    cnt, o, v = _cover_1d(var, 10)
    assert o.tolist() == [0, 4, 8] and v.tolist() == [4, 4, 2] and (cnt == 1).all()
    disc = segment(8, 12, [4], 4, 0, DISCARD)
    assert disc.mode.tolist() == [VARIABLE_FULL, VARIABLE_FULL, DISCARD]
    ov = segment(8, 12, [4], 4, 0, OVERLAP)
    cnt, o, v = _cover_1d(ov, 10)
    assert o.tolist() == [0, 4, 6] and v.tolist() == [4, 4, 4]
    assert cnt.tolist() == [1] * 6 + [2, 2, 1, 1]
    # partial window 4-1..4: only sizes 11 and 12 of the bucket keep the tail in the window
    assert segment(8, 12, [4], 4, 1, VARIABLE_PARTIAL) is None
    part = segment(10, 12, [4], 4, 2, VARIABLE_PARTIAL)
    for n in (11, 12):
        cnt, o, v = _cover_1d(part, n)
        assert (cnt == 1).all() and v[-1] >= 2


def test_overlap_needs_a_full_tile_inside_the_tensor():
    assert segment(0, 3, [4], 4, 0, OVERLAP) is None


def test_mixed_bulk_tiles_largest_first():
    seg = segment(9000, 9500, [4096, 512], 512, 0, VARIABLE_FULL)
    assert seg.tile.tolist()[:2] == [4096, 4096]
    cnt, _, _ = _cover_1d(seg, 9300)
    assert (cnt == 1).all()


@given(st.integers(1, 10**9), st.sampled_from([1, 32, 512]), st.sampled_from([0, 8, 32]))
def test_bucket_contains_size_and_is_consistent(n, q, w):
    lo, hi = bucket(n, q, w)
    assert lo < n <= hi
    assert bucket(lo + 1, q, w) == (lo, hi) == bucket(hi, q, w)
    assert hi - lo <= max(q, n // 8 + q)


def test_bucket_count_grows_logarithmically():
    assert buckets_upto(16 * 32, 32) == 16
    assert buckets_upto(10**9, 32) < 16 + 8 * 25
    assert bucket(0, 32) == (0, 0)


@pytest.mark.parametrize("mode", list(TailMode))
def test_each_tail_mode_is_reachable_by_the_optimizer(mode):
    """The optimized combination has a real choice: for some shape each mode wins alone."""
    from dynshape.combination import Tiling
    found = False
    for n in (4095, 4100, 5000, 9000, 20000, 33000, 70000, 100):
        for m in (1, 3, 40):
            t = Tiling(CATALOG, "unary", "relu", "float32",
                       (bucket(m, 1), bucket(n, 32, 32)), (m, n), 1, False,
                       frozenset({VARIABLE_FULL, mode}))
            cands = list(t.candidates())
            if any(mode in set(c[2].mode.tolist()) | set(c[1].mode.tolist()) for c in cands):
                found = True
    assert found
