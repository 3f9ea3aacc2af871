"""Register blocks of the GEMM micro-kernels (``cpu.gemm_ukernel.register_blocks``): a
micro-tile whose accumulators do not fit the target's vector registers (AVX2: 16 of 32
bytes, each of the kernels' 64-byte vectors taking two) runs as blocks that do, each with its
own k loop. Checked: the blocks cover the tile exactly once and each fits; the catalog's
tiles are one block on AVX-512; and, on this host, the compiled micro-kernels keep their
accumulators in registers (no vector spilled to the stack) and compute the right product."""
import re

import numpy as np
import pytest
from numba import njit

from dynshape_kernels.cpu import gemm_operands as ops
from dynshape_kernels.cpu.gemm_ukernel import VEC_BYTES, block_registers, register_blocks

TARGETS = {"avx512": (64, 32), "avx2": (32, 16)}
#: (rows, vectors) of every micro-kernel the catalog instantiates (gemm_operands, conv_inplace)
CATALOG_TILES = [(6, 4), (6, 3), (24, 1), (8, 3), (3, 8), (6, 1), (6, 2), (8, 1), (8, 2)]


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 6, 8, 13, 24])
@pytest.mark.parametrize("vecs", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("spare,a_vectors", [(0, False), (1, False), (0, True)])
@pytest.mark.parametrize("max_rows", [None, 2])
def test_blocks_cover_the_tile_once_and_fit(target, rows, vecs, spare, a_vectors, max_rows):
    reg_bytes, reg_count = TARGETS[target]
    blocks = register_blocks(rows, vecs, spare, a_vectors, max_rows, reg_bytes=reg_bytes,
                             reg_count=reg_count)
    seen = [(r, v) for rs, vs in blocks for r in rs for v in vs]
    assert sorted(seen) == [(r, v) for r in range(rows) for v in range(vecs)]
    per = VEC_BYTES // reg_bytes
    for rs, vs in blocks:
        assert block_registers(len(rs), len(vs), spare, a_vectors, per) <= reg_count or \
            blocks == [(tuple(range(rows)), tuple(range(vecs)))]
        assert list(rs) == list(range(rs[0], rs[0] + len(rs)))   # contiguous runs
        assert len(blocks) == 1 or max_rows is None or len(rs) <= max_rows
        assert list(vs) == list(range(vs[0], vs[0] + len(vs)))


@pytest.mark.parametrize("rows,vecs", CATALOG_TILES)
def test_catalog_tiles_are_one_block_on_avx512(rows, vecs):
    whole = [(tuple(range(rows)), tuple(range(vecs)))]
    if (rows, vecs) == (3, 8):      # the inner-product kernel
        assert register_blocks(rows, vecs, a_vectors=True, reg_bytes=64, reg_count=32) == whole
        return
    assert register_blocks(rows, vecs, reg_bytes=64, reg_count=32) == whole
    if rows in (6, 8):            # in-place and window kernels, masked
        # lane masks live in mask registers there: the masked kernels are one block too
        assert register_blocks(rows, vecs, spare=1, max_rows=2, reg_bytes=64,
                               reg_count=32) == whole


def test_avx2_blocks_are_the_classic_kernel():
    """6 x 4 vectors (6 x 64 float32) on AVX2: four 6 x 16 blocks of 12 accumulators."""
    assert register_blocks(6, 4, reg_bytes=32, reg_count=16) == [
        ((0, 1, 2, 3, 4, 5), (v,)) for v in range(4)]


def test_a_tile_that_cannot_fit_is_refused():
    with pytest.raises(ValueError, match="no block"):
        register_blocks(2, 2, spare=20, reg_bytes=32, reg_count=16)


def _spills(asm):
    """Vector instructions in an innermost loop (from a label to a branch back to it) that
    read the stack (AT&T syntax: source first): reloads of spilled accumulators, or FMAs on
    them. (Reloads between the loops, where a block's results are stored, cost nothing per
    k step; the wrapper's stores of array structs are not reads.)"""
    lines = asm.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines)
              for m in [re.match(r"(\.LBB\w+):", line)] if m}
    reads = re.compile(r"\bv\w+\s+-?\d*\(%rsp\),[^\n]*%[xyz]mm\d+")
    loops = []
    for i, line in enumerate(lines):
        m = re.match(r"\s*j\w+\s+(\.LBB\w+)", line)
        if m and labels.get(m.group(1), i) < i:
            loops.append((labels[m.group(1)], i))
    inner = [(a, b) for a, b in loops if not any(a <= c and d <= b and (c, d) != (a, b)
                                                 for c, d in loops)]
    return [x for a, b in inner for x in lines[a:b] if reads.search(x)]


def _packed(uk, MR, NR, kc, dt):
    @njit
    def call(pa, pb, cb):
        uk(kc, pa, 0, pb, 0, NR, cb, 0, NR, 0)
    rng = np.random.default_rng(0)
    pa, pb = rng.random(kc * MR).astype(dt), rng.random(kc * NR).astype(dt)
    cb = np.full(MR * NR, np.nan, dt)
    call(pa, pb, cb)
    ref = pa.reshape(kc, MR).T.astype(np.float64) @ pb.reshape(kc, NR)
    return call, cb.reshape(MR, NR), ref


def _inplace(uk, MR, NR, kc, dt, ncols, rows):
    @njit
    def call(a, b, cb):
        uk(kc, a, 0, kc, 1, rows, b, 0, NR, ncols, cb, 0, NR, 1)
    rng = np.random.default_rng(1)
    a, b = rng.random((MR, kc)).astype(dt), rng.random((kc, NR)).astype(dt)
    cb = np.zeros(MR * NR, dt)
    call(a.ravel(), b.ravel(), cb)
    ref = np.zeros((MR, NR))
    ref[:rows, :ncols] = a[:rows].astype(np.float64) @ b[:, :ncols]
    return call, cb.reshape(MR, NR), ref


def _dot(MR, NR, kc, dt):
    @njit
    def call(a, bt, cb):
        ops._ukd4(kc, a, 0, kc, bt, 0, kc, cb, 0, NR, 0)
    rng = np.random.default_rng(2)
    a, bt = rng.random((MR, kc)).astype(dt), rng.random((NR, kc)).astype(dt)
    cb = np.full(MR * NR, np.nan, dt)
    call(a.ravel(), bt.ravel(), cb)
    return call, cb.reshape(MR, NR), a.astype(np.float64) @ bt.T


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", ["uk0", "uk1", "uk2", "dot", "ukf3", "ukf3-1row", "uki3",
                                    "uki1"])
def test_micro_kernels_keep_accumulators_in_registers(kernel, dt):
    w = VEC_BYTES // np.dtype(dt).itemsize
    cases = {
        "uk0": lambda: _packed(ops._uk0, 6, 4 * w, 64, dt),
        "uk1": lambda: _packed(ops._uk1, 6, 3 * w, 64, dt),
        "uk2": lambda: _packed(ops._uk2, 24, w, 64, dt),
        "dot": lambda: _dot(3, 8, 3 * w, dt),      # a multiple of the vector: no tail
        "ukf3": lambda: _inplace(ops._ukf3, 6, 3 * w, 40, dt, 3 * w, 6),
        # one valid row: the blocks past it (AVX2) are skipped, nothing past it is written
        "ukf3-1row": lambda: _inplace(ops._ukf3, 6, 3 * w, 40, dt, 3 * w, 1),
        "uki3": lambda: _inplace(ops._uki3, 6, 3 * w, 40, dt, 3 * w - 3, 5),
        "uki1": lambda: _inplace(ops._uki1, 6, w, 40, dt, w - 5, 2),
    }
    call, got, ref = cases[kernel]()
    np.testing.assert_allclose(got, ref, rtol=1e-5 if dt == np.float32 else 1e-12)
    assert not _spills(call.inspect_asm(call.signatures[0])), \
        f"{kernel} spills vector registers to the stack on this target"
