"""Static-tile GEMM kernels for dynshape (float32 / float64, CPU, Numba).

Layers (BLIS style, all our own Numba code -- nothing is delegated to BLAS):

* micro-kernels (``gemm_ukernel.py``): ``@intrinsic``s emitting explicit
  ``<W x float>`` LLVM IR (``llvm.fma``, broadcasts, vector loads/stores),
  MR x NR accumulators kept in zmm registers, one kernel per *slot*;
* packing: an MC x KC block of A into MR-row micro-panels (``(k, r)`` at
  ``k*MR + r``) and a KC x NC block of B into NR-column micro-panels
  (``(k, j)`` at ``k*NR + j``) in per-thread buffers.  Full panels take a
  branch-free path; the M/N tail panel is zero-padded ("discard" mode: the
  full micro-tile is computed, only the valid part is stored);
* K: walked in KC blocks inside the tile (blocks balanced so that no tiny
  last block occurs); the micro-kernels take ``kc`` at run time, so the K
  tail needs no zero extension;
* a per-tile macro kernel accumulating in a per-thread MC x NC buffer, then
  the epilogue ``C = act(alpha * A@B + beta * C_in + bias)`` while storing;
* ``gemm_driver``: ``@njit(parallel=True)``, ``prange`` over threads, each
  thread taking a contiguous chunk of the tile table; consecutive tiles of
  a thread with the same B panel reuse the packed B (whole K).

Special slots: 3 (skinny M, M <= 8) reads a row-contiguous B in place with
software prefetch (no B packing); 4 (narrow N) is an inner-product kernel
that reads a k-contiguous A in place (vector accumulators along k,
horizontal sums at the end) and packs B transposed.  Every slot accepts
every stride pattern (fallback packing paths).

Static kernels (slots), per dtype, ``(MR, NR, MC, NC, KC)``: see
``SLOTS_F32`` / ``SLOTS_F64``.  A table row may describe any tile with
``valid_m <= MC`` and ``valid_n <= NC`` of its slot.

All strides and offsets are in elements, int64, any sign; operands are read
in place (only per-thread panels are packed).  Index arithmetic uses
``load_at``/``store_at`` (no negative-index wrap-around: Numba's
wrap-around code turned the packing loops into gathers, 3-10x slower).
"""
import functools

import numpy as np
import numba
from numba import njit, prange, types
from numba.extending import overload

from ..abi.matmul_table import TABLE_COLS  # noqa: F401
from ..abi.step_program import MAX_SIDES, empty_program
from ..abi.tiles import (MATMUL_DOT_SLOT, MATMUL_NSLOTS, MATMUL_SLOTS_F32, MATMUL_SLOTS_F64,
                         matmul_slots)
from .steps import apply_steps, map_inplace
from .gemm_ukernel import make_ukernel, make_dot_ukernel, load_at, store_at

# --------------------------------------------------------------------------
# static kernel slots
# --------------------------------------------------------------------------
SLOTS_F32, SLOTS_F64 = MATMUL_SLOTS_F32, MATMUL_SLOTS_F64
NSLOTS = MATMUL_NSLOTS
DOT_SLOT = MATMUL_DOT_SLOT

_uk0 = make_ukernel((6, 4), (6, 4))
_uk1 = make_ukernel((6, 3), (6, 3))
_uk2 = make_ukernel((24, 1), (24, 1))
_uk3 = make_ukernel((8, 3), (8, 3), pf_dist=24)  # B read in place: prefetch
_ukd4 = make_dot_ukernel(3, 8)

# max elements of the per-thread whole-K packed-B cache (reuse across tiles)
_BREUSE_MAX_ELEMS = 2 * 1024 * 1024

_slots_for = matmul_slots


def _slot_cfg_stub(arr):
    raise NotImplementedError


@overload(_slot_cfg_stub)
def _slot_cfg_ovl(arr):
    cfg = SLOTS_F64 if arr.dtype == types.float64 else SLOTS_F32

    def impl(arr):
        return cfg
    return impl


@njit(cache=True)
def _call_uk(slot, kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, acc):
    if slot == 0:
        _uk0(kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, acc)
    elif slot == 1:
        _uk1(kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, acc)
    elif slot == 2:
        _uk2(kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, acc)
    else:
        _uk3(kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, acc)


@njit(cache=True)
def _kc_block(K, KCmax, W):
    """K block size: <= KCmax, blocks balanced (no tiny last block), a
    multiple of W when K is split; at least 1."""
    if K <= KCmax:
        return max(K, 1)
    nkb = (K + KCmax - 1) // KCmax
    kc = (K + nkb - 1) // nkb
    return min(KCmax, (kc + W - 1) // W * W)


# --------------------------------------------------------------------------
# packing
# --------------------------------------------------------------------------
@njit(cache=True)
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
                        store_at(dst, d + r, load_at(a, s + r))
            elif cs == 1:
                for k in range(kc):
                    d = base + k * MR
                    for r in range(MR):
                        store_at(dst, d + r, load_at(a, s0 + r * rs + k))
            else:
                for k in range(kc):
                    d = base + k * MR
                    s = s0 + k * cs
                    for r in range(MR):
                        store_at(dst, d + r, load_at(a, s + r * rs))
        else:  # tail path: zero padded rows
            for k in range(kc):
                d = base + k * MR
                s = s0 + k * cs
                for r in range(rows):
                    store_at(dst, d + r, load_at(a, s + r * rs))
                for r in range(rows, MR):
                    store_at(dst, d + r, 0)


@njit(cache=True)
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
                        store_at(dst, d + j, load_at(b, s + j))
            elif rs == 1:  # column-major B: contiguous reads along k
                for j in range(NR):
                    s = s0 + j * cs
                    for k in range(kc):
                        store_at(dst, base + k * NR + j, load_at(b, s + k))
            else:
                for k in range(kc):
                    s = s0 + k * rs
                    d = base + k * NR
                    for j in range(NR):
                        store_at(dst, d + j, load_at(b, s + j * cs))
        else:  # tail path: zero padded columns
            for k in range(kc):
                s = s0 + k * rs
                d = base + k * NR
                for j in range(cols):
                    store_at(dst, d + j, load_at(b, s + j * cs))
                for j in range(cols, NR):
                    store_at(dst, d + j, 0)


# --------------------------------------------------------------------------
# epilogue
# --------------------------------------------------------------------------
@njit(cache=True)
def _epilogue(ws_c, ldc, mv, nv, c_buf, c_off, c_rs, c_cs, alpha, beta,
              cin_buf, cin_off, cin_rs, cin_cs, bias_buf, bias_off, bias_s,
              has_bias, act, m0, n0, bt, prog, pattrs, sides, sgeo):
    """C[i, j] = act(alpha*acc[i, j] + beta*C_in[i, j] + bias[j]) for the
    valid mv x nv part of the accumulator tile ``ws_c`` (row stride ldc).
    ``act``: 0 none, else 1 + a unary op code of ``scalar_ops.UNARY_OPS`` that
    takes no attribute (1 = relu). Then the step program ``prog`` (steps.apply_steps; the
    tile's origin in the output is (m0, n0) of batch bt) runs on the tile, then it is stored."""
    al = ws_c.dtype.type(alpha)
    be = ws_c.dtype.type(beta)
    zero = ws_c.dtype.type(0)
    for i in range(mv):
        w = i * ldc
        if beta == 0.0:
            if alpha != 1.0:
                for j in range(nv):
                    store_at(ws_c, w + j, al * load_at(ws_c, w + j))
        else:
            ci = cin_off + i * cin_rs
            if cin_cs == 1:
                for j in range(nv):
                    store_at(ws_c, w + j, al * load_at(ws_c, w + j) + be * load_at(cin_buf, ci + j))
            else:
                for j in range(nv):
                    store_at(ws_c, w + j, al * load_at(ws_c, w + j) + be * load_at(cin_buf, ci + j * cin_cs))
        if has_bias:
            for j in range(nv):
                store_at(ws_c, w + j, load_at(ws_c, w + j) + load_at(bias_buf, bias_off + j * bias_s))
        if act > 0:  # unary op code + 1, vectorized over the row
            map_inplace(act - 1, ws_c[w:w + nv], nv, zero, zero)
    if prog.shape[0] > 0:
        apply_steps(prog, pattrs, ws_c, 0, ldc, mv, nv, m0, n0, bt, sides, sgeo)
    for i in range(mv):
        w = i * ldc
        co = c_off + i * c_rs
        if c_cs == 1:
            for j in range(nv):
                store_at(c_buf, co + j, load_at(ws_c, w + j))
        else:
            for j in range(nv):
                store_at(c_buf, co + j * c_cs, load_at(ws_c, w + j))


@njit(cache=True)
def _pack_rows(a, off, rs, cs, rows, kc, MR, dst):
    """A[0:rows, 0:kc] -> dst row-major MR x kc (row r at r*kc), rows past
    ``rows`` zeroed.  Used by the dot slot when A is not k-contiguous."""
    for r in range(MR):
        d = r * kc
        if r < rows:
            s = off + r * rs
            if cs == 1:
                for k in range(kc):
                    store_at(dst, d + k, load_at(a, s + k))
            else:
                for k in range(kc):
                    store_at(dst, d + k, load_at(a, s + k * cs))
        else:
            for k in range(kc):
                store_at(dst, d + k, 0)


@njit(cache=True)
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
                    store_at(dst, d + k, load_at(b, s + k))
            else:
                for k in range(kc):
                    store_at(dst, d + k, load_at(b, s + k * rs))
        else:
            for k in range(kc):
                store_at(dst, d + k, 0)


@njit(cache=True)
def _tile_dot(m0, n0, mv, nv, bt, K,
              a_buf, a_off, a_rs, a_cs, a_bs,
              b_buf, b_off, b_rs, b_cs, b_bs,
              c_buf, c_off, c_rs, c_cs, c_bs, alpha, beta,
              cin_buf, cin_off, cin_rs, cin_cs, cin_bs,
              bias_buf, bias_off, bias_s, has_bias, act,
              ws_a, ws_b, ws_c, b_state, prog, pattrs, sides, sgeo):
    """Tile of the inner-product slot: A rows read in place when a_cs == 1
    (else packed row-major), B packed transposed (reused across tiles)."""
    cfg = _slot_cfg_stub(c_buf)[DOT_SLOT]
    MR = cfg[0]
    NR = cfg[1]
    NC = cfg[3]
    KCmax = cfg[4]
    W = 64 // c_buf.itemsize
    ldc = NC
    mpan = (mv + MR - 1) // MR
    npan = (nv + NR - 1) // NR
    KC = _kc_block(K, KCmax, W)
    nkb = (K + KC - 1) // KC
    a0 = a_off + bt * a_bs + m0 * a_rs
    b0 = b_off + bt * b_bs + n0 * b_cs
    reuse = nkb * KC * NC <= ws_b.size
    same_b = (reuse and b_state[0] == 1 and b_state[1] == DOT_SLOT and b_state[2] == n0
              and b_state[3] == nv and b_state[4] == b_off + bt * b_bs and b_state[5] == K)
    if K == 0:
        for i in range(mv):
            for j in range(nv):
                ws_c[i * ldc + j] = 0
    for kb in range(nkb):
        pc = kb * KC
        kc = min(KC, K - pc)
        kt = kc - kc % W
        pbo = kb * KC * NC if reuse else 0
        if not same_b:
            _pack_bt(b_buf, b0 + pc * b_rs, b_rs, b_cs, kc, nv, NR, ws_b, pbo)
        acc = 1 if kb > 0 else 0
        for ir in range(mpan):
            rows = min(MR, mv - ir * MR)
            if a_cs == 1 and rows == MR:
                pa = a_buf
                pao = a0 + ir * MR * a_rs + pc
                lda = a_rs
            else:
                _pack_rows(a_buf, a0 + ir * MR * a_rs + pc * a_cs, a_rs, a_cs, rows, kc, MR, ws_a)
                pa = ws_a
                pao = 0
                lda = kc
            for jr in range(npan):
                pb0 = pbo + jr * NR * kc
                cb0 = ir * MR * ldc + jr * NR
                _ukd4(kc, pa, pao, lda, ws_b, pb0, kc, ws_c, cb0, ldc, acc)
                if kt < kc:  # K tail of the vector loop
                    for r in range(MR):
                        for j in range(NR):
                            t = load_at(ws_c, cb0 + r * ldc + j)
                            for k in range(kt, kc):
                                t += load_at(pa, pao + r * lda + k) * load_at(ws_b, pb0 + j * kc + k)
                            store_at(ws_c, cb0 + r * ldc + j, t)
    if reuse:
        b_state[0] = 1
        b_state[1] = DOT_SLOT
        b_state[2] = n0
        b_state[3] = nv
        b_state[4] = b_off + bt * b_bs
        b_state[5] = K
    else:
        b_state[0] = 0
    _epilogue(ws_c, ldc, mv, nv, c_buf, c_off + bt * c_bs + m0 * c_rs + n0 * c_cs,
              c_rs, c_cs, alpha, beta,
              cin_buf, cin_off + bt * cin_bs + m0 * cin_rs + n0 * cin_cs, cin_rs, cin_cs,
              bias_buf, bias_off + n0 * bias_s, bias_s, has_bias, act,
              m0, n0, bt, prog, pattrs, sides, sgeo)


# --------------------------------------------------------------------------
# one output tile
# --------------------------------------------------------------------------
@njit(cache=True)
def _tile(slot, m0, n0, mv, nv, bt, K,
          a_buf, a_off, a_rs, a_cs, a_bs,
          b_buf, b_off, b_rs, b_cs, b_bs,
          c_buf, c_off, c_rs, c_cs, c_bs, alpha, beta,
          cin_buf, cin_off, cin_rs, cin_cs, cin_bs,
          bias_buf, bias_off, bias_s, has_bias, act,
          ws_a, ws_b, ws_c, b_state, prog, pattrs, sides, sgeo):
    """One table row: C tile (m0:m0+mv, n0:n0+nv) of batch bt, all of K.
    Arguments as in ``gemm_driver``; ws_* are the per-thread buffers and
    ``b_state`` remembers which B panel ws_b holds (for reuse)."""
    if slot == DOT_SLOT:
        _tile_dot(m0, n0, mv, nv, bt, K, a_buf, a_off, a_rs, a_cs, a_bs,
                  b_buf, b_off, b_rs, b_cs, b_bs, c_buf, c_off, c_rs, c_cs, c_bs,
                  alpha, beta, cin_buf, cin_off, cin_rs, cin_cs, cin_bs,
                  bias_buf, bias_off, bias_s, has_bias, act, ws_a, ws_b, ws_c, b_state,
                  prog, pattrs, sides, sgeo)
        return
    cfg = _slot_cfg_stub(c_buf)[slot]
    MR = cfg[0]
    NR = cfg[1]
    NC = cfg[3]
    KC = cfg[4]
    ldc = NC
    mpan = (mv + MR - 1) // MR
    npan = (nv + NR - 1) // NR
    KC = _kc_block(K, KC, 1)  # balanced K blocks (no tiny last block)
    nkb = (K + KC - 1) // KC
    a0 = a_off + bt * a_bs + m0 * a_rs
    b0 = b_off + bt * b_bs + n0 * b_cs
    # B read in place (row-contiguous B, tile with a single A panel, so a
    # packed B would be used once): the nfull whole NR-panels are direct,
    # only the N-tail panel is packed.
    nfull = nv // NR if (b_cs == 1 and mpan == 1) else 0
    direct_b = nfull > 0
    # whole-K packed-B cache, reused by consecutive tiles with the same B panel
    reuse = (not direct_b) and nkb * KC * NC <= ws_b.size
    same_b = (reuse and b_state[0] == 1 and b_state[1] == slot and b_state[2] == n0
              and b_state[3] == nv and b_state[4] == b_off + bt * b_bs and b_state[5] == K)
    if K == 0:
        for i in range(mv):
            for j in range(nv):
                ws_c[i * ldc + j] = 0
    for kb in range(nkb):
        pc = kb * KC
        kc = min(KC, K - pc)
        pack_a(a_buf, a0 + pc * a_cs, a_rs, a_cs, mv, kc, MR, ws_a)
        acc = 1 if kb > 0 else 0
        pbo = kb * KC * NC if reuse else 0
        if direct_b:
            db0 = b0 + pc * b_rs
            for jr in range(nfull):
                _call_uk(slot, kc, ws_a, 0, b_buf, db0 + jr * NR, b_rs,
                         ws_c, jr * NR, ldc, acc)
            if nfull < npan:
                pack_b(b_buf, db0 + nfull * NR, b_rs, b_cs, kc, nv - nfull * NR, NR, ws_b, 0)
                _call_uk(slot, kc, ws_a, 0, ws_b, 0, NR, ws_c, nfull * NR, ldc, acc)
        else:
            if not same_b:
                pack_b(b_buf, b0 + pc * b_rs, b_rs, b_cs, kc, nv, NR, ws_b, pbo)
            for jr in range(npan):
                for ir in range(mpan):
                    _call_uk(slot, kc, ws_a, ir * MR * kc, ws_b, pbo + jr * NR * kc, NR,
                             ws_c, ir * MR * ldc + jr * NR, ldc, acc)
    if reuse:
        b_state[0] = 1
        b_state[1] = slot
        b_state[2] = n0
        b_state[3] = nv
        b_state[4] = b_off + bt * b_bs
        b_state[5] = K
    else:
        b_state[0] = 0
    _epilogue(ws_c, ldc, mv, nv, c_buf, c_off + bt * c_bs + m0 * c_rs + n0 * c_cs,
              c_rs, c_cs, alpha, beta,
              cin_buf, cin_off + bt * cin_bs + m0 * cin_rs + n0 * cin_cs, cin_rs, cin_cs,
              bias_buf, bias_off + n0 * bias_s, bias_s, has_bias, act,
              m0, n0, bt, prog, pattrs, sides, sgeo)


@njit(cache=True)
def _aligned_empty(n, dtype_like):
    """1-D buffer of ``n`` elements whose first element is 64-byte aligned."""
    extra = 64 // dtype_like.itemsize
    raw = np.empty(n + extra, dtype_like.dtype)
    mis = (raw.ctypes.data % 64) // dtype_like.itemsize
    s = (extra - mis) % extra
    return raw[s:s + n]


def matmul_driver(table, M, N, K, boffs,
                  a_buf, a_rs, a_cs, b_buf, b_rs, b_cs, c_buf, c_rs, c_cs,
                  alpha, beta, cin_buf, cin_rs, cin_cs,
                  bias_buf, bias_off, bias_s, has_bias, act, prog, pattrs, sides, sgeo,
                  nthreads):
    """Compute every output tile listed in ``table`` for an M x N x K problem.

    For each row ``(slot, m0, n0, tm, tn, b)`` of ``table`` (int64, (ntiles, 6)) with
    ``b < nbatch = boffs.shape[0]``, ``mv = min(tm, M - m0) > 0``, ``nv = min(tn, N - n0) > 0``
    and all ``0 <= i < mv``, ``0 <= j < nv``::

        C[b, m0+i, n0+j] = act(alpha * sum_k A[b, m0+i, k] * B[b, k, n0+j]
                               + beta * C_in[b, m0+i, n0+j] + bias[n0+j])

    with ``A[b, i, k] = a_buf[boffs[b, 0] + i*a_rs + k*a_cs]``, B, C and C_in likewise with
    ``boffs[b, 1]``, ``boffs[b, 2]``, ``boffs[b, 3]``, and ``bias[j] = bias_buf[bias_off +
    j*bias_s]``. Rows past M, N or the batch count are skipped, so one table serves every
    problem of its bucket (the tiles are clipped: VARIABLE tails; K is never tiled here).

    * buffers: 1-D float32 or float64 arrays, all of one dtype; offsets/strides int64
      elements of any sign (0 for broadcast). A, B, C_in, bias are only read; C must not
      overlap A, B, bias; C_in may be C itself (same offsets and strides) or disjoint from it.
    * ``K >= 0``; ``beta == 0`` never reads C_in; ``has_bias == 0`` never reads bias;
      ``act``: 0 none, else 1 + an attribute-free unary op code.
    * epilogue program: after the activation, ``steps.apply_steps(prog, pattrs, tile, ...,
      row0=m0, col0=n0, outer=b, sides, sgeo)`` runs on each tile before it is stored (the
      fused sequences' epilogue: elementwise steps with side inputs); ``prog`` may be empty.
    * ``slot`` in ``0..NSLOTS-1``, ``1 <= tm <= MC(slot)``, ``1 <= tn <= NC(slot)``; every
      index touched must be in bounds (not checked: the runtime validates tables).
    * ``nthreads``: number of contiguous table chunks, one per thread; consecutive rows with
      the same B panel reuse the packed B (order tables n-major: ``make_gemm_table``).
    """
    ntiles = table.shape[0]
    nbatch = boffs.shape[0]
    nth = max(1, min(nthreads, ntiles))
    cfg = _slot_cfg_stub(c_buf)
    # workspace sizes over the slots used by the table
    sa = 1
    sb = 1
    sc = 1
    W = 64 // c_buf.itemsize
    for t in range(ntiles):
        s = table[t, 0]
        MR = cfg[s][0]
        NC = cfg[s][3]
        KC = _kc_block(K, cfg[s][4], W if s == DOT_SLOT else 1)
        nkb = (K + KC - 1) // KC
        mp = (table[t, 3] + MR - 1) // MR * MR  # rows of packed A / acc tile
        sa = max(sa, mp * KC)
        sc = max(sc, mp * NC)
        if nkb * KC * NC <= _BREUSE_MAX_ELEMS:
            sb = max(sb, nkb * KC * NC)
        else:
            sb = max(sb, KC * NC)
    for th in prange(nth):
        lo = th * ntiles // nth
        hi = (th + 1) * ntiles // nth
        ws_a = _aligned_empty(sa, c_buf)
        ws_b = _aligned_empty(sb, c_buf)
        ws_c = _aligned_empty(sc, c_buf)
        b_state = np.zeros(6, np.int64)
        for t in range(lo, hi):
            bt = table[t, 5]
            m0 = table[t, 1]
            n0 = table[t, 2]
            mv = min(table[t, 3], M - m0)
            nv = min(table[t, 4], N - n0)
            if bt >= nbatch or mv <= 0 or nv <= 0:
                continue
            _tile(table[t, 0], m0, n0, mv, nv, bt, K,
                  a_buf, boffs[bt, 0], a_rs, a_cs, 0,
                  b_buf, boffs[bt, 1], b_rs, b_cs, 0,
                  c_buf, boffs[bt, 2], c_rs, c_cs, 0, alpha, beta,
                  cin_buf, boffs[bt, 3], cin_rs, cin_cs, 0,
                  bias_buf, bias_off, bias_s, has_bias, act,
                  ws_a, ws_b, ws_c, b_state, prog, pattrs, sides, sgeo)


def matmul_signature(dtype):
    """The one Numba signature of ``matmul_driver`` for ``dtype`` ("float32"/"float64")."""
    f = getattr(types, dtype)
    buf = types.Array(f, 1, "C", readonly=True)
    out = types.Array(f, 1, "C")
    i64 = types.int64
    tab = types.Array(types.int64, 2, "C", readonly=True)
    sides = types.UniTuple(buf, MAX_SIDES)
    return (tab, i64, i64, i64, tab,
            buf, i64, i64, buf, i64, i64, out, i64, i64,
            types.float64, types.float64, buf, i64, i64,
            buf, i64, i64, i64, i64, tab, buf, sides, tab, i64)


# --------------------------------------------------------------------------
# Python helpers
# --------------------------------------------------------------------------
def make_gemm_table(M, N, tile_m, tile_n, slot=0, batch=1, dtype=None):
    """Tile table covering an M x N output (per batch) with tile_m x tile_n
    tiles (tails get smaller valid sizes).  Rows ``(slot, m0, n0, mv, nv, b)``
    as int64, ordered batch-major, then n, then m (so consecutive tiles
    share their B panel).  tile_m/tile_n must not exceed the slot's MC/NC
    (checked when ``dtype`` is given)."""
    if tile_m < 1 or tile_n < 1 or not 0 <= slot < NSLOTS:
        raise ValueError("make_gemm_table: bad tile size or slot")
    if dtype is not None:
        _, _, MC, NC, _ = _slots_for(dtype)[slot]
        if tile_m > MC or tile_n > NC:
            raise ValueError(f"make_gemm_table: tile {tile_m}x{tile_n} exceeds slot {slot} "
                             f"macro tile {MC}x{NC}")
    if M <= 0 or N <= 0 or batch <= 0:
        return np.zeros((0, TABLE_COLS), np.int64)
    m0 = np.arange(0, M, tile_m, dtype=np.int64)
    n0 = np.arange(0, N, tile_n, dtype=np.int64)
    bb, nn, mm = np.meshgrid(np.arange(batch, dtype=np.int64), n0, m0, indexing="ij")
    t = np.empty((mm.size, TABLE_COLS), np.int64)
    t[:, 0] = slot
    t[:, 1] = mm.ravel()
    t[:, 2] = nn.ravel()
    t[:, 3] = np.minimum(tile_m, M - t[:, 1])
    t[:, 4] = np.minimum(tile_n, N - t[:, 2])
    t[:, 5] = bb.ravel()
    return t


def choose_slot(M, N, K, dtype=np.float32, a_k_contiguous=True, nthreads=1, batch=1):
    """Heuristic choice of (slot, tile_m, tile_n) for an M x N x K problem.
    ``a_k_contiguous``: A's column stride is 1 (lets the narrow-N dot slot
    read A in place).  With ``nthreads > 1`` and a single batch, the split
    is refined so that the tiles spread evenly over the threads."""
    cfg = _slots_for(dtype)
    if M <= cfg[3][2] and N >= 4 * cfg[3][1]:
        s = 3
    elif N <= 16 and M >= 64 and K >= 64 and a_k_contiguous:
        s = DOT_SLOT
    elif N <= cfg[2][3] and M >= 4 * cfg[2][0]:
        s = 2
    elif M * N <= 64 * 64 or M < 64 or N < 64:
        s = 1
    else:
        s = 0
    MR, NR, MC, NC, KC = cfg[s]
    tm, tn = _balanced(M, MC, MR), _balanced(N, NC, NR)
    if batch == 1 and nthreads > 1:
        tm, tn = _thread_balanced(M, N, MR, NR, MC, NC, tm, tn, nthreads)
    return s, tm, tn


def _thread_balanced(M, N, MR, NR, MC, NC, tm, tn, nthreads):
    """Refine (tm, tn) so that few tiles spread evenly over the threads:
    minimise ceil(ntiles / nthreads) * padded tile area (+ a per-tile
    overhead) over slightly finer splits."""
    def cost(a, b):
        nt = -(-M // a) * -(-N // b)
        pa, pb = -(-a // MR) * MR, -(-b // NR) * NR
        return -(-nt // nthreads) * (pa * pb + 4 * (pa + pb) * 8) + nt
    best = (cost(tm, tn), tm, tn)
    nm0, nn0 = -(-M // tm), -(-N // tn)
    for nm in range(nm0, nm0 + nthreads + 1):
        for nn in range(nn0, nn0 + nthreads + 1):
            a = min(MC, -(-(-(-M // nm)) // MR) * MR) if nm > 1 else min(M, MC)
            b = min(NC, -(-(-(-N // nn)) // NR) * NR) if nn > 1 else min(N, NC)
            c = cost(a, b)
            if c < best[0]:
                best = (c, a, b)
    return best[1], best[2]


def _balanced(X, XC, XR):
    """Tile size <= XC splitting X into equal-ish tiles, rounded up to a
    multiple of the micro-tile XR when that does not exceed XC."""
    if X <= XC:
        return X
    nt = -(-X // XC)
    t = -(-X // nt)
    t = -(-t // XR) * XR
    return min(t, XC)


def _elem_strides(x):
    it = x.itemsize
    return [s // it for s in x.strides]


class _BufView:
    """Minimal ``__array_interface__`` holder (keeps ``owner`` alive)."""
    __slots__ = ("__array_interface__", "owner")


def _base_and_offset(x):
    """Flat 1-D C-contiguous view of the memory spanned by ``x`` plus the
    element offset of ``x[0, ..., 0]`` in it (works for transposed, sliced
    and negative-stride views; nothing is copied)."""
    if x.size == 0:
        return np.zeros(1, x.dtype), 0
    if x.flags.c_contiguous and x.flags.writeable:
        return x.reshape(-1), 0
    # (read-only inputs, e.g. np.broadcast_to views, are also exposed through
    # a writeable-typed view so that the driver has one Numba signature per
    # dtype; the kernels never write to A, B, C_in or bias)
    st = _elem_strides(x)
    lo = sum(min(0, (d - 1) * s) for d, s in zip(x.shape, st))
    hi = sum(max(0, (d - 1) * s) for d, s in zip(x.shape, st))
    h = _BufView()
    h.__array_interface__ = {
        "data": (x.__array_interface__["data"][0] + lo * x.itemsize, False),
        "shape": (hi - lo + 1,), "typestr": x.dtype.str, "version": 3}
    h.owner = x
    return np.asarray(h), -lo


@functools.lru_cache(maxsize=256)
def _plan(M, N, K, dtchar, a_k_contiguous, nthreads, nb, slot, tile):
    """Cached (slot choice + tile table) for gemm(); the table is never
    modified by the driver."""
    dt = np.dtype(dtchar)
    if slot is None:
        slot, tm, tn = choose_slot(M, N, K, dt, a_k_contiguous, nthreads, nb)
    else:
        cfgs = _slots_for(dt)[slot]
        tm, tn = _balanced(M, cfgs[2], cfgs[0]), _balanced(N, cfgs[3], cfgs[1])
    if tile is not None:
        tm, tn = tile
    return make_gemm_table(M, N, tm, tn, slot, nb, dt)


def gemm(a, b, out=None, alpha=1.0, beta=0.0, c=None, bias=None, act=None,
         slot=None, tile=None):
    """``out = act(alpha * a @ b + beta * c + bias)`` with our kernels.

    a: (M, K) or (batch, M, K); b: (K, N) or (batch, K, N); any strides
    (views are read in place).  c: broadcastable to the output (only read
    if beta != 0); bias: (N,); act: None or 'relu'.  dtype float32/float64
    (a's dtype; b, c, bias must match).  ``slot``/``tile`` override the
    heuristic (``tile=(tile_m, tile_n)``).  Batched inputs use the batch
    column of the tile table (one driver call for all batches).
    """
    a = np.asarray(a)
    b = np.asarray(b)
    dt = a.dtype
    if dt not in (np.float32, np.float64) or b.dtype != dt:
        raise TypeError("gemm: a and b must both be float32 or float64")
    batched = a.ndim == 3 or b.ndim == 3
    a3 = a if a.ndim == 3 else a[None]
    b3 = b if b.ndim == 3 else b[None]
    nb = max(a3.shape[0], b3.shape[0])
    if a3.shape[0] not in (1, nb) or b3.shape[0] not in (1, nb):
        raise ValueError("gemm: batch mismatch")
    M, K = a3.shape[1:]
    K2, N = b3.shape[1:]
    if K != K2:
        raise ValueError("gemm: inner dimensions differ")
    oshape = (nb, M, N) if batched else (M, N)
    if out is None:
        out = np.empty(oshape, dt)
    if out.shape != oshape or out.dtype != dt:
        raise ValueError("gemm: bad out")
    if M == 0 or N == 0 or nb == 0:
        return out
    if np.may_share_memory(out, a) or np.may_share_memory(out, b) or (
            bias is not None and np.may_share_memory(out, bias)):
        # the driver requires C not to overlap its inputs (C_in may be out)
        res = gemm(a, b, None, alpha, beta, c, bias, act, slot, tile)
        out[...] = res
        return out
    o3 = out if batched else out[None]
    nthreads = numba.get_num_threads()
    table = _plan(M, N, K, dt.char, a3.strides[2] == a3.itemsize, nthreads, nb,
                  slot, None if tile is None else tuple(tile))

    def ops(x3):
        buf, off = _base_and_offset(x3)
        bs, rs, cs = _elem_strides(x3)
        if x3.shape[0] == 1:
            bs = 0
        return buf, off, rs, cs, bs

    ab, ao, ars, acs, abs_ = ops(a3)
    bb, bo, brs, bcs, bbs = ops(b3)
    cb, co, crs, ccs, cbs = ops(o3)
    if beta != 0.0:
        cin = np.broadcast_to(np.asarray(c, dtype=dt), oshape)
        cin3 = cin if batched else cin[None]
        ib, io, irs, ics, ibs = ops(cin3)
    else:
        ib, io, irs, ics, ibs = np.zeros(1, dt), 0, 0, 0, 0
    if bias is not None:
        bias = np.broadcast_to(np.asarray(bias, dtype=dt), (N,))
        sb, so = _base_and_offset(bias)
        sst = _elem_strides(bias)[0]
        hb = 1
    else:
        sb, so, sst, hb = np.zeros(1, dt), 0, 0, 0
    actc = {None: 0, 'none': 0, 'relu': 1}[act]
    bi = np.arange(nb, dtype=np.int64)
    boffs = np.stack([ao + bi * abs_, bo + bi * bbs, co + bi * cbs, io + bi * ibs], axis=1)
    i = np.int64
    from .. import drivers
    drivers.get("matmul", dt.name)(
        table, i(M), i(N), i(K), boffs, ab, i(ars), i(acs), bb, i(brs), i(bcs),
        cb, i(crs), i(ccs), float(alpha), float(beta), ib, i(irs), i(ics),
        sb, i(so), i(sst), i(hb), i(actc), empty_program(), np.zeros(2, dt),
        (np.zeros(1, dt),) * MAX_SIDES, np.zeros((MAX_SIDES, 4), np.int64), i(nthreads))
    return out
