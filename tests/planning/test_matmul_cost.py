"""The matmul combination's cost model and its choice over a bucket (planning.matmul)."""
import numpy as np
from dynshape_kernels.abi.tiles import MATMUL_INPLACE_SLOT, MATMUL_SERIAL_MACS
from hypothesis import given
from hypothesis import strategies as st

from dynshape.planning import matmul as pm
from dynshape.runtime.matmul import build_table, matmul_key

sizes = st.integers(1, 700)
dtypes = st.sampled_from(["float32", "float64"])


@given(sizes, sizes, sizes, dtypes)
def test_calls_under_the_serial_threshold_are_priced_on_one_thread(M, N, K, dt):
    """The driver runs a call of fewer than MATMUL_SERIAL_MACS multiply-adds on the calling
    thread: priced for 2 threads it costs what it costs on 1 (no split, no pool start); a
    larger call on 2 threads pays the pool's start."""
    for slot, tm, tn in pm.tilings(M, N, K, dt, True, 2, 1):
        one = pm.cost(M, N, K, 1, dt, slot, tm, tn, 1)
        two = pm.cost(M, N, K, 1, dt, slot, tm, tn, 2)
        if M * N * K < MATMUL_SERIAL_MACS:
            assert two == one
        else:
            assert two >= pm.LAUNCH_NS
            assert two <= one + pm.LAUNCH_NS + 1e-6


@given(st.integers(0, 300), st.integers(1, 300), st.integers(0, 300), st.integers(1, 300),
       sizes)
def test_bucket_points_are_the_ends_of_m_and_n(m_lo, m_span, n_lo, n_span, K):
    M, N = m_lo + m_span, n_lo + n_span
    pts = pm.bucket_points(M, N, K, (m_lo, n_lo))
    assert pts == sorted(pts) and len(set(pts)) == len(pts)
    assert {p[0] for p in pts} == {m_lo + 1, M} and {p[1] for p in pts} == {n_lo + 1, N}
    assert all(p[2] == K for p in pts)
    assert pm.bucket_points(M, N, K) == [(M, N, K)]


@given(st.integers(1, 8), st.integers(1, 300), sizes, dtypes)
def test_the_choice_has_the_smallest_worst_ratio_over_the_bucket(m, N, K, dt):
    """Brute force: no candidate is within a smaller factor of the cheapest at every priced
    size than the chosen one, and its reported worst ratio is exactly that factor."""
    key = matmul_key(dt, m, N, K)
    (m_lo, M), (n_lo, Nh), (_, Kh), _ = key.bucket
    pts = pm.bucket_points(M, Nh, Kh, (m_lo, n_lo))
    cands = pm.tilings(M, Nh, Kh, dt, True, 2, 1)
    worst, chosen, c = pm.choose(cands, pts, 1, dt, 2, True, True)
    priced = np.array([[pm.cost(*p, 1, dt, *cand, 2) for p in pts] for cand in cands])
    ratios = (priced / priced.min(axis=0)).max(axis=1)
    assert worst == ratios[cands.index(chosen)] == ratios.min()
    assert c == priced[cands.index(chosen), -1]        # the cost at the bucket's upper end


def test_a_bucket_of_one_to_eight_rows_is_not_priced_at_eight_only():
    """M = 1..8 share a table. Priced at M = 8 only, 1 x 768 @ 768 x 768 float32 ran on the
    skinny-M slot (8 rows computed for 1): 51 us, against 37 us on the in-place slot that
    the choice over the bucket takes (its worst case, M = 8, 62 us against 46)."""
    key = matmul_key("float32", 1, 768, 768)
    assert key.bucket[0] == (0, 8)
    hi_only = pm.combine(8, 768, 768, 1, "float32", True, True, 2, "optimized")
    bucket = build_table(key, "optimized")
    if pm.SKINNY_UNBLOCKED_SCALE == 1.0:    # AVX-512 (without it the skinny slot is slower)
        assert hi_only.slot != MATMUL_INPLACE_SLOT
    assert bucket.entries[0, 0] == MATMUL_INPLACE_SLOT
    assert "priced at 4 sizes of the bucket" in bucket.description
