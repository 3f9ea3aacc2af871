"""Packing for the matmul (and conv) micro-kernels: A into MR-row panels, B into NR-column
panels (row-major inside a panel, zero-padded to whole micro-tiles), and the KC blocking
that balances K over blocks. Index arithmetic through ``load_at``/``store_at`` (no
negative-index wrap-around). Half-precision operands (carriers, ``half.py``) are widened to
float32 as they are packed, so the float32 micro-kernels run on them unchanged."""
import numpy as np

from .callee import callee
from .gemm_ukernel import load_at, store_at
from .half import load


@callee(cache=True)
def _kc_block(K, KCmax, W):
    """K block size: <= KCmax, blocks balanced (no tiny last block), a
    multiple of W when K is split; at least 1."""
    if K <= KCmax:
        return max(K, 1)
    nkb = (K + KCmax - 1) // KCmax
    kc = (K + nkb - 1) // nkb
    return min(KCmax, (kc + W - 1) // W * W)


@callee(cache=True)
def pack_a(a, off, rs, cs, mv, kc, MR, dst):
    """Pack A[0:mv, 0:kc] (element (i, k) at ``off + i*rs + k*cs``) into
    ``ceil(mv/MR)`` micro-panels in ``dst``: panel p, element (k, r) at
    ``p*MR*kc + k*MR + r``.  Rows past ``mv`` are zero (tail path)."""
    npan = (mv + MR - 1) // MR
    for p in range(npan):
        r0 = p * MR
        rows = min(MR, mv - r0)
        base = p * MR * kc
        s0 = off + r0 * rs
        if rows == MR:  # full-panel path, no per-element bounds tests
            if rs == 1:  # column-major A: MR contiguous elements per k
                for k in range(kc):
                    s = s0 + k * cs
                    d = base + k * MR
                    for r in range(MR):
                        store_at(dst, d + r, load(load_at(a, s + r)))
            elif cs == 1:
                for k in range(kc):
                    d = base + k * MR
                    for r in range(MR):
                        store_at(dst, d + r, load(load_at(a, s0 + r * rs + k)))
            else:
                for k in range(kc):
                    d = base + k * MR
                    s = s0 + k * cs
                    for r in range(MR):
                        store_at(dst, d + r, load(load_at(a, s + r * rs)))
        else:  # tail path: zero padded rows
            for k in range(kc):
                d = base + k * MR
                s = s0 + k * cs
                for r in range(rows):
                    store_at(dst, d + r, load(load_at(a, s + r * rs)))
                for r in range(rows, MR):
                    store_at(dst, d + r, 0)


@callee(cache=True)
def pack_b(b, off, rs, cs, kc, nv, NR, dst, dbase):
    """Pack B[0:kc, 0:nv] (element (k, j) at ``off + k*rs + j*cs``) into
    ``ceil(nv/NR)`` micro-panels at ``dst[dbase:]``: panel p, element (k, j)
    at ``dbase + p*NR*kc + k*NR + j``.  Columns past ``nv`` are zero."""
    npan = (nv + NR - 1) // NR
    for p in range(npan):
        j0 = p * NR
        cols = min(NR, nv - j0)
        base = dbase + p * NR * kc
        s0 = off + j0 * cs
        if cols == NR:
            if cs == 1:
                for k in range(kc):
                    s = s0 + k * rs
                    d = base + k * NR
                    for j in range(NR):
                        store_at(dst, d + j, load(load_at(b, s + j)))
            elif rs == 1:  # column-major B: contiguous reads along k
                for j in range(NR):
                    s = s0 + j * cs
                    for k in range(kc):
                        store_at(dst, base + k * NR + j, load(load_at(b, s + k)))
            else:
                for k in range(kc):
                    s = s0 + k * rs
                    d = base + k * NR
                    for j in range(NR):
                        store_at(dst, d + j, load(load_at(b, s + j * cs)))
        else:  # tail path: zero padded columns
            for k in range(kc):
                s = s0 + k * rs
                d = base + k * NR
                for j in range(cols):
                    store_at(dst, d + j, load(load_at(b, s + j * cs)))
                for j in range(cols, NR):
                    store_at(dst, d + j, 0)


@callee(cache=True)
def _pack_rows(a, off, rs, cs, rows, kc, MR, dst):
    """A[0:rows, 0:kc] -> dst row-major MR x kc (row r at r*kc), rows past
    ``rows`` zeroed.  Used by the dot slot when A is not k-contiguous."""
    for r in range(MR):
        d = r * kc
        if r < rows:
            s = off + r * rs
            if cs == 1:
                for k in range(kc):
                    store_at(dst, d + k, load(load_at(a, s + k)))
            else:
                for k in range(kc):
                    store_at(dst, d + k, load(load_at(a, s + k * cs)))
        else:
            for k in range(kc):
                store_at(dst, d + k, 0)


@callee(cache=True)
def _pack_bt(b, off, rs, cs, kc, nv, NR, dst, dbase):
    """B[0:kc, 0:nv] -> transposed panels: panel p, element (j, k) at
    ``dbase + p*NR*kc + j*kc + k``; columns past nv are zero."""
    npan = (nv + NR - 1) // NR
    for j in range(npan * NR):
        d = dbase + j * kc
        if j < nv:
            s = off + j * cs
            if rs == 1:
                for k in range(kc):
                    store_at(dst, d + k, load(load_at(b, s + k)))
            else:
                for k in range(kc):
                    store_at(dst, d + k, load(load_at(b, s + k * rs)))
        else:
            for k in range(kc):
                store_at(dst, d + k, 0)


@callee(cache=True)
def _aligned_empty(n, dtype_like):
    """1-D buffer of ``n`` elements whose first element is 64-byte aligned."""
    extra = 64 // dtype_like.itemsize
    raw = np.empty(n + extra, dtype_like.dtype)
    mis = (raw.ctypes.data % 64) // dtype_like.itemsize
    s = (extra - mis) % extra
    return raw[s:s + n]
