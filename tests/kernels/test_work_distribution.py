"""How the parallel drivers share their work items among threads.

A bucketed table's empty entries (wholly past the call's shape) sit at its end; split
contiguously, they would all go to the last thread. The reduce, row-wise, pool and fused
drivers loop ``prange`` over N_CHUNKS chunks, Numba giving each thread a contiguous block of
them, and chunk c takes the items ``chunk_start(c), + N_CHUNKS, ...``. The elementwise
drivers keep neighbouring tiles on one thread (their tile copies share cache lines) and
leave the trailing empty entries out of the items they split (``live_total``)."""
import numba
import numpy as np
import pytest

import dynshape
from dynshape_kernels.cpu.elementwise import SERIAL_ELEMENTS, live_total
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
    """At a bucket's low end (entries past the shape), at the parallel threshold, and with a
    partial last tile, on 2 threads, every output element is written (the outputs start
    as NaN), by unit-stride, broadcast and row-run entries alike."""
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


def _expected_live_total(table):
    """Entries x outer indices, less the trailing entries that write nothing (from the
    table's own description of each entry's valid rows and columns)."""
    from dynshape_kernels.abi.common_area import C_M, C_N, C_NOUTER
    from dynshape_kernels.catalog import CATALOG
    res = table.resolved(int(table.common[C_M]), int(table.common[C_N]), CATALOG)
    writes = (res[:, 2] > 0) & (res[:, 4] > 0)
    trailing = len(writes) - (int(np.flatnonzero(writes)[-1]) + 1 if writes.any() else 0)
    return len(writes) * int(table.common[C_NOUTER]) - trailing


@pytest.mark.parametrize("make", [
    lambda: np.zeros(983041, np.float32),                    # a bucket's low end
    lambda: np.zeros(256 * 4096, np.float32),                # no empty entry
    lambda: np.zeros((3, 2, 700001), np.float32).transpose(1, 0, 2),   # outer indices
    lambda: np.zeros((300, 700), np.float32).T,              # 2-D tiles
], ids=["bucket-low-end", "exact", "outer", "transposed"])
def test_live_total_leaves_out_the_trailing_entries_past_the_shape_and_only_those(make):
    x = make()
    table = dynshape.explain("exp", x)
    got = live_total(table.common, table.entries)
    assert got == _expected_live_total(table)
    if x.shape == (983041,):
        assert got < table.entries.shape[0]                  # the case trims something


@pytest.mark.parametrize("batches", [1, 3])
@pytest.mark.parametrize("below", [True, False])
def test_matmuls_on_either_side_of_the_serial_threshold_are_right(batches, below):
    """A matmul of fewer than SERIAL_MACS multiply-adds runs every tile on the calling thread
    (no thread-pool launch), a larger one splits its tiles between the threads: both give
    NumPy's product, for every tile of a table of several tiles and batches."""
    from dynshape_kernels.cpu.gemm import SERIAL_MACS
    k = 32
    n = 64
    m = SERIAL_MACS // (k * n * batches) + (-3 if below else 3)
    assert (m * n * k * batches < SERIAL_MACS) == below
    r = np.random.default_rng(m)
    a = r.standard_normal((batches, m, k)).astype(np.float32)
    b = r.standard_normal((batches, k, n)).astype(np.float32)
    got = dynshape.run("matmul", a, b)
    np.testing.assert_allclose(got, np.matmul(a.astype(np.float64), b), rtol=1e-4, atol=1e-4)
