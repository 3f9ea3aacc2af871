"""How the parallel drivers deal their work items to threads (``reduce_runs.chunk_start``).

A driver loops ``prange`` over N_CHUNKS chunks, and Numba gives each thread a contiguous
block of them; chunk c takes the items ``chunk_start(c), + N_CHUNKS, ...``. A bucketed
table's empty entries sit at its end, so the items must reach the threads cyclically, or the
last thread gets all the empty ones and the first all the work."""
import numba
import numpy as np
import pytest

import dynshape
from dynshape_kernels.cpu.elementwise import SERIAL_ELEMENTS
from dynshape_kernels.cpu.reduce_runs import N_CHUNKS, chunk_start


@pytest.mark.parametrize("threads", [1, 2, 4, 8, 16, 32, 64])
def test_a_threads_contiguous_chunks_deal_it_one_residue_class_of_the_items(threads):
    """With T threads (a power of 2 up to N_CHUNKS) each thread runs the items of one
    residue class mod T (thread t: the class of t with its bits reversed), so any prefix of
    the items, the real work of a bucketed table, is shared within one item per thread."""
    items = 1000
    per_thread = N_CHUNKS // threads
    classes = set()
    for t in range(threads):
        mine = sorted(i for c in range(t * per_thread, (t + 1) * per_thread)
                      for i in range(chunk_start(c), items, N_CHUNKS))
        assert mine == list(range(mine[0], items, threads)) and mine[0] < threads
        classes.add(mine[0])
    assert classes == set(range(threads))


def test_chunk_starts_are_a_permutation_of_the_chunks():
    assert sorted(chunk_start(c) for c in range(N_CHUNKS)) == list(range(N_CHUNKS))


@pytest.fixture
def two_threads():
    was = numba.get_num_threads()
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    yield
    numba.set_num_threads(was)


@pytest.mark.parametrize("n", [983041, SERIAL_ELEMENTS, 3 * N_CHUNKS * 4096 + 5])
def test_elementwise_drivers_run_every_item_of_a_table_with_empty_tail_entries(n, two_threads):
    """Shapes at a bucket's low end (entries past the shape), at the parallel threshold, and
    with fewer items than chunks hold no stale element: every output element is written."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    if n == 983041:
        assert "lie past this shape" in str(dynshape.explain("exp", x))
    o = np.full(n, np.nan, np.float32)
    dynshape.run("exp", x, out=o)
    np.testing.assert_allclose(o, np.exp(x), rtol=3e-7)
    o[:] = np.nan
    dynshape.run("add", x, y, out=o)
    np.testing.assert_array_equal(o, x + y)
    o2 = np.full((n // 7, 7), np.nan, np.float32)       # rows: runs of entries per item
    x2 = x[:o2.size].reshape(o2.shape)
    dynshape.run("mul", x2, y[:7], out=o2)
    np.testing.assert_array_equal(o2, x2 * y[:7])
