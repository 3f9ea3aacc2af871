"""Operands the GEMM driver reads where they lie (gemm_inplace.py's micro-kernel): the in-place
slot's tiles with a row-contiguous B read A and B in place, with masked loads for the N tail
and repeated rows for the M tail; the A-rows slot reads a k-contiguous A from its rows (B
packed). Checked against NumPy on every tail, K blocking, strides of any sign and batches;
the output's surroundings stay untouched; and operands placed at the very end of a readable
page (the next page unmapped) are read without a fault."""
import os
import subprocess
import sys
import textwrap

import numpy as np
from hypothesis import HealthCheck, example, given, settings, strategies as st

from dynshape.testing.matmul_direct import gemm
from dynshape_kernels.abi.tiles import MATMUL_A_ROWS_SLOT as A_ROWS, MATMUL_INPLACE_SLOT as SLOT

SETTINGS = settings(max_examples=50, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _a(rng, M, K, dt, layout):
    if layout == "c":
        return rng.standard_normal((M, K)).astype(dt)
    if layout == "t":
        return rng.standard_normal((K, M)).astype(dt).T
    if layout == "neg":
        return rng.standard_normal((M, 2 * K)).astype(dt)[::-1, ::-2]
    return rng.standard_normal((3 * M, K + 5)).astype(dt)[::3, 2:K + 2]


def _b(rng, K, N, dt, layout, nb):
    """(nb, K, N) with unit column stride (the in-place condition), framed by NaN: a read past
    a row's last column would only reach NaN, which must never show in the result."""
    wide = np.full((nb, 2 * K + 1, N + 17), np.nan, dt)
    wide[:, :, 3:N + 3] = rng.standard_normal((nb, 2 * K + 1, N))
    if layout == "c":
        return wide[:, :K, 3:N + 3]
    if layout == "rev":                  # negative row stride
        return wide[:, K - 1::-1, 3:N + 3]
    return wide[:, 1::2, 3:N + 3]        # every other row


@SETTINGS
@example(nb=2, M=17, N=33, K=64, dt=np.float32, la="c", lb="c", seed=0)
@example(nb=1, M=13, N=49, K=300, dt=np.float32, la="t", lb="rev", seed=1)
@example(nb=1, M=48, N=192, K=520, dt=np.float64, la="c", lb="c", seed=2)
# one or two columns past whole vectors: dot products (DOT_TAIL), K in one and in three blocks
@example(nb=2, M=13, N=34, K=96, dt=np.float32, la="rows", lb="rows", seed=3)
@example(nb=1, M=7, N=17, K=520, dt=np.float64, la="c", lb="rev", seed=4)
@example(nb=1, M=5, N=66, K=31, dt=np.float32, la="c", lb="c", seed=5)     # K too short: masked
@example(nb=1, M=5, N=18, K=40, dt=np.float32, la="t", lb="c", seed=6)     # A not k-contiguous
@given(nb=st.integers(1, 3), M=st.integers(1, 60),
       N=st.one_of(st.integers(1, 200), st.sampled_from([1, 15, 16, 17, 31, 32, 33, 47, 48, 49])),
       K=st.one_of(st.integers(1, 80), st.integers(250, 530)),
       dt=st.sampled_from([np.float32, np.float64]), la=st.sampled_from(["c", "t", "neg", "rows"]),
       lb=st.sampled_from(["c", "rev", "rows"]), seed=st.integers(0, 2**31))
def test_inplace_slot_matches_numpy(nb, M, N, K, dt, la, lb, seed):
    """Every M tail (rows mod 6), N tail (1, 2 and 3 vectors, any lane count; one or two
    columns past whole vectors as dot products when A is k-contiguous and the K block long
    enough), K in one and in several blocks (accumulating), and the output written only
    inside its frame."""
    rng = np.random.default_rng(seed)
    a = np.stack([_a(rng, M, K, dt, la) for _ in range(nb)])
    b = _b(rng, K, N, dt, lb, nb)
    frame = np.full((nb, M + 2, N + 4), 7.0, dt)
    out = frame[:, 1:M + 1, 2:N + 2]
    gemm(a, b, out=out, slot=SLOT)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    tol = (3e-5 if dt == np.float32 else 1e-12) * max(1.0, K ** 0.5) * max(1.0, np.abs(ref).max())
    np.testing.assert_allclose(out, ref, rtol=0, atol=tol)
    inner = np.zeros(frame.shape, bool)
    inner[:, 1:M + 1, 2:N + 2] = True
    assert (frame[~inner] == 7.0).all()


@SETTINGS
@example(M=17, N=70, K=64, dt=np.float32, la="rev", lb="t", seed=0)
@example(M=200, N=130, K=600, dt=np.float64, la="rows", lb="c", seed=1)
@given(M=st.integers(7, 220), N=st.integers(1, 140),
       K=st.one_of(st.integers(1, 80), st.integers(250, 600)),
       dt=st.sampled_from([np.float32, np.float64]), la=st.sampled_from(["c", "rev", "rows"]),
       lb=st.sampled_from(["c", "t"]), seed=st.integers(0, 2**31))
def test_a_rows_slot_matches_numpy(M, N, K, dt, la, lb, seed):
    """The A-rows slot with a k-contiguous A (rows in order, reversed, or every third row of a
    wider array): every M tail, several A panels and K blocks, B packed from either layout."""
    rng = np.random.default_rng(seed)
    wide = rng.standard_normal((3 * M, K + 4)).astype(dt)
    a = {"c": wide[:M, :K], "rev": wide[M - 1::-1, 2:K + 2], "rows": wide[::3, 1:K + 1]}[la]
    b = rng.standard_normal((K, N)).astype(dt) if lb == "c" else \
        rng.standard_normal((N, K)).astype(dt).T
    frame = np.full((M + 2, N + 2), 7.0, dt)
    out = frame[1:M + 1, 1:N + 1]
    gemm(a, b, out=out, slot=A_ROWS)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = (3e-5 if dt == np.float32 else 1e-12) * max(1.0, K ** 0.5) * max(1.0, np.abs(ref).max())
    np.testing.assert_allclose(out, ref, rtol=0, atol=tol)
    inner = np.zeros(frame.shape, bool)
    inner[1:M + 1, 1:N + 1] = True
    assert (frame[~inner] == 7.0).all()


def test_inplace_slot_with_epilogue():
    """alpha, beta with C_in, bias and relu after an in-place tile."""
    rng = np.random.default_rng(3)
    M, N, K = 23, 41, 70
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = rng.standard_normal((M, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    out = gemm(a, b, alpha=0.5, beta=-1.0, c=c, bias=bias, act="relu", slot=SLOT)
    ref = np.maximum(0.5 * (a.astype(np.float64) @ b) - c + bias, 0)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-4)


_GUARD = textwrap.dedent("""
    import ctypes, mmap
    import numpy as np
    from dynshape.testing.matmul_direct import gemm
    from dynshape_kernels.abi.tiles import MATMUL_A_ROWS_SLOT as A_ROWS, MATMUL_INPLACE_SLOT as SLOT
    PAGE = mmap.PAGESIZE
    libc = ctypes.CDLL(None, use_errno=True)

    def at_page_end(shape, dt):
        # an array whose last byte is the last byte of a page followed by an unmapped page
        m = mmap.mmap(-1, 2 * PAGE)
        raw = np.frombuffer(m, np.uint8)
        base = raw.ctypes.data
        assert libc.mprotect(ctypes.c_void_p(base + PAGE), PAGE, 0) == 0
        n = int(np.prod(shape)) * np.dtype(dt).itemsize
        x = np.frombuffer(m, dt, count=int(np.prod(shape)), offset=PAGE - n).reshape(shape)
        keep.append(m)
        return x

    keep = []
    rng = np.random.default_rng(0)
    for dt, (M, K, N) in ((np.float32, (17, 31, 33)), (np.float32, (5, 20, 1)),
                          (np.float64, (11, 9, 19)), (np.float32, (3, 300, 3))):
        a = at_page_end((M, K), dt)
        b = at_page_end((K, N), dt)
        a[...] = rng.standard_normal((M, K))
        b[...] = rng.standard_normal((K, N))
        # the output too: a plain product is stored (and, over several K blocks, added to)
        # in place, with the N tail's lanes masked
        out = at_page_end((M, N), dt)
        gemm(a, b, out=out, slot=SLOT)
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=0, atol=1e-3)
    # the A-rows slot: an M-tail micro-tile's extra rows repeat A's last row, never past it
    for dt, (M, K, N) in ((np.float32, (17, 40, 70)), (np.float64, (13, 30, 9))):
        a = at_page_end((M, K), dt)
        a[...] = rng.standard_normal((M, K))
        b = rng.standard_normal((K, N)).astype(dt)
        out = gemm(a, b, slot=A_ROWS)
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=0, atol=1e-4)
    print("ok")
""")


def test_inplace_slot_reads_nothing_past_its_operands():
    """B's, A's and the output's last rows end a readable page; the next page is unmapped. A
    full (unmasked) vector load of B's N tail or of the output's (when K blocks add up), an
    unmasked store, or a read of an M-tail row past A's last row (in-place and A-rows slots)
    would kill the process with a segmentation fault (run in a child process for a clean
    report)."""
    r = subprocess.run([sys.executable, "-c", _GUARD], capture_output=True, text=True,
                       env=dict(os.environ), timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stderr[-2000:])


def test_prefetch_distance_emits_prefetches():
    """``pf_dist > 0`` adds ``llvm.prefetch`` calls to the plain form's loop (one per line of
    a B row, its last item's line included) and nothing else; the window form refuses it."""
    import pytest
    from numba import njit
    from dynshape_kernels.cpu.gemm_inplace import make_inplace_ukernel

    def ir_of(uk):
        @njit
        def run(kc, a, b, c):
            uk(kc, a, 0, 4, 1, 2, b, 0, 40, 33, c, 0, 40, 0)
        a, b, c = np.ones(8, np.float32), np.ones(200, np.float32), np.zeros(80, np.float32)
        run(4, a, b, c)
        assert c[:33].tolist() == [4.0] * 33 and c[33:40].tolist() == [0.0] * 7
        return run.inspect_llvm(run.signatures[0])

    with_pf = ir_of(make_inplace_ukernel(6, 3, pf_dist=16))
    calls = [line for line in with_pf.splitlines() if "call void @llvm.prefetch" in line]
    # 3 x 64 bytes of float32: lines at 0, 64, 128 and 191, per step (LLVM may unroll)
    assert calls and len(calls) % 4 == 0
    assert "llvm.prefetch" not in ir_of(make_inplace_ukernel(6, 3))
    with pytest.raises(ValueError, match="pf_dist"):
        make_inplace_ukernel(6, 3, window=True, pf_dist=16)
