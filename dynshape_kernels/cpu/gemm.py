"""Static-tile GEMM kernels for dynshape (float32 / float64, CPU, Numba; float16 / bfloat16
through their carriers: widened to float32 when packed, computed by the float32 micro-kernels
with float32 accumulators, rounded once to the format when the tile is stored).

Layers (BLIS style, all our own Numba code -- nothing is delegated to BLAS):

* micro-kernels (``gemm_ukernel.py``): ``@intrinsic``s emitting explicit
  ``<W x float>`` LLVM IR (``llvm.fma``, broadcasts, vector loads/stores),
  MR x NR accumulators kept in vector registers (in register blocks where the target's
  registers are too few for the tile: AVX2), one kernel per *slot*;
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
import numpy as np
from numba import njit, prange, types

from ..abi.step_program import MAX_SIDES
from ..abi.tiles import (MATMUL_A_ROWS_SLOT, MATMUL_DOT_SLOT, MATMUL_INPLACE_SLOT, MATMUL_NSLOTS,
                         MATMUL_SERIAL_MACS, MATMUL_SLOTS_F32, MATMUL_SLOTS_F64,
                         matmul_slots)
from ..abi.storage import carrier, compute
from .callee import callee
from .half import compute_empty, load, store
from .step_link import STEPS
from .address_link import Link
from .borrowed import borrowed
from .readonly_view import readonly
from ..catalog import CATALOG
from .steps import apply_steps_as, scratch_span
from .switches import map_inplace
from .gemm_operands import (_a_rows_panel, _call_uk, _direct_b_panels, _dot_a_rows,
                            _inplace_tile, _slot_cfg_stub, _ukd4, holds_half)
from .gemm_pack import _aligned_empty, _kc_block, _pack_bt, _pack_rows, pack_a, pack_b  # noqa: F401
from .gemm_ukernel import load_at, store_at

# --------------------------------------------------------------------------
# static kernel slots
# --------------------------------------------------------------------------
SLOTS_F32, SLOTS_F64 = MATMUL_SLOTS_F32, MATMUL_SLOTS_F64
NSLOTS = MATMUL_NSLOTS
DOT_SLOT = MATMUL_DOT_SLOT
INPLACE_SLOT = MATMUL_INPLACE_SLOT
A_ROWS_SLOT = MATMUL_A_ROWS_SLOT

#: dtypes of the matmul driver (and of its per-thread function's link)
DTYPES = CATALOG.families["matmul"].dtypes

# max elements of the per-thread whole-K packed-B cache (reuse across tiles)
_BREUSE_MAX_ELEMS = 2 * 1024 * 1024
#: below this many multiply-adds (M*N*K*batches) a call runs on the calling thread: waking
#: the thread pool and joining it (~3 us) costs more than the second thread saves. Measured,
#: float32, 1 thread / 2 threads: 8^3 4.4 / 7.5 us, 24x40x56 5.4 / 8.0, 48^3 6.3 / 10.2,
#: 64^3 (262144) 10.1 / 10.0, 96^3 20.3 / 14.5 (``abi.tiles``: the cost model reads it too)
SERIAL_MACS = MATMUL_SERIAL_MACS

_slots_for = matmul_slots


# --------------------------------------------------------------------------
# packing
# --------------------------------------------------------------------------
# --------------------------------------------------------------------------
# epilogue
# --------------------------------------------------------------------------
@callee(cache=True, error_model="numpy")
def _epilogue(ws_c, ldc, mv, nv, c_buf, c_off, c_rs, c_cs, alpha, beta,
              cin_buf, cin_off, cin_rs, cin_cs, bias_buf, bias_off, bias_s,
              has_bias, act, m0, n0, bt, prog, pattrs, sides, sgeo):
    """C[i, j] = act(alpha*acc[i, j] + beta*C_in[i, j] + bias[j]) for the
    valid mv x nv part of the accumulator tile ``ws_c`` (row stride ldc).
    ``act``: 0 none, else 1 + a unary op code of ``scalar_ops.UNARY_OPS`` that
    takes no attribute (1 = relu). Then the step program ``prog`` (steps.apply_steps_as; the
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
                    store_at(ws_c, w + j, al * load_at(ws_c, w + j) + be * load(load_at(cin_buf, ci + j)))
            else:
                for j in range(nv):
                    store_at(ws_c, w + j,
                             al * load_at(ws_c, w + j) + be * load(load_at(cin_buf, ci + j * cin_cs)))
        if has_bias:
            for j in range(nv):
                store_at(ws_c, w + j, load_at(ws_c, w + j) + load(load_at(bias_buf, bias_off + j * bias_s)))
        if act > 0:  # unary op code + 1, vectorized over the row
            map_inplace(act - 1, ws_c[w:w + nv], nv, zero, zero)
    if prog.shape[0] > 0:
        # the tile's rows and the accumulators between them (scratch) as one run when the
        # program reads no side input by position: one call per step, not per row and step
        span = scratch_span(prog, ldc, mv, nv)
        ld, rows, cols = (span, np.int64(1), span) if span > 0 else (ldc, mv, nv)
        apply_steps_as(c_buf, prog, pattrs, ws_c, 0, ld, rows, cols, m0, n0, bt, sides, sgeo)
    for i in range(mv):
        w = i * ldc
        co = c_off + i * c_rs
        if c_cs == 1:
            for j in range(nv):
                store_at(c_buf, co + j, store(c_buf, load_at(ws_c, w + j)))
        else:
            for j in range(nv):
                store_at(c_buf, co + j * c_cs, store(c_buf, load_at(ws_c, w + j)))


@njit(inline="always")
def _tile_dot(m0, n0, mv, nv, bt, K, a_buf, ag, b_buf, bg, c_buf, cg, cin_buf, ing,
              bias_buf, biasg, ws_a, ws_b, ws_c, b_state, prog, pattrs, sides, sgeo):
    """Tile of the inner-product slot: A rows read in place when a_cs == 1
    (else packed row-major), B packed transposed (reused across tiles). Arguments as in
    ``_tile``."""
    a_off, a_rs, a_cs, a_bs = ag
    b_off, b_rs, b_cs, b_bs = bg
    c_off, c_rs, c_cs, c_bs, alpha, beta = cg
    cin_off, cin_rs, cin_cs, cin_bs = ing
    bias_off, bias_s, has_bias, act = biasg
    cfg = _slot_cfg_stub(ws_c)[DOT_SLOT]
    MR = cfg[0]
    NR = cfg[1]
    NC = cfg[3]
    KCmax = cfg[4]
    W = 64 // ws_c.itemsize
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
            pa, pao, lda = _dot_a_rows(a_buf, a0 + ir * MR * a_rs, a_rs, a_cs, pc, rows, kc,
                                       MR, ws_a)
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
    epilogue((ws_c, ldc, mv, nv, c_buf, c_off + bt * c_bs + m0 * c_rs + n0 * c_cs,
              c_rs, c_cs, alpha, beta,
              cin_buf, cin_off + bt * cin_bs + m0 * cin_rs + n0 * cin_cs, cin_rs, cin_cs,
              bias_buf, bias_off + n0 * bias_s, bias_s, has_bias, act,
              m0, n0, bt, prog, pattrs, sides, sgeo))


# --------------------------------------------------------------------------
# one output tile
# --------------------------------------------------------------------------
@njit(inline="always")
def _tile(slot, m0, n0, mv, nv, bt, K, a_buf, ag, b_buf, bg, c_buf, cg, cin_buf, ing,
          bias_buf, biasg, ws_a, ws_b, ws_c, b_state, prog, pattrs, sides, sgeo):
    """One table row: C tile (m0:m0+mv, n0:n0+nv) of batch bt, all of K.
    Arguments as in ``matmul_driver``, each operand's offset and strides in a tuple (``ag``:
    offset, row, column and batch stride of A; ``cg`` also alpha and beta; ``biasg``: bias
    offset and stride, has_bias, act) so that the call has at most 30 arguments: CPython
    passes a longer one as ``*args``, which Numba's inliner refuses, and this function and
    ``_tile_dot`` are inlined into the driver's loop (one level less of the whole call tree
    to optimize and generate: 28.0 -> 26.3 s of first-use compile). ws_* are the per-thread
    buffers and ``b_state`` remembers which B panel ws_b holds (for reuse)."""
    if slot == DOT_SLOT:
        _tile_dot(m0, n0, mv, nv, bt, K, a_buf, ag, b_buf, bg, c_buf, cg, cin_buf, ing,
                  bias_buf, biasg, ws_a, ws_b, ws_c, b_state, prog, pattrs, sides, sgeo)
        return
    a_off, a_rs, a_cs, a_bs = ag
    b_off, b_rs, b_cs, b_bs = bg
    c_off, c_rs, c_cs, c_bs, alpha, beta = cg
    cin_off, cin_rs, cin_cs, cin_bs = ing
    bias_off, bias_s, has_bias, act = biasg
    cfg = _slot_cfg_stub(ws_c)[slot]
    MR = cfg[0]
    NR = cfg[1]
    NC = cfg[3]
    KC = cfg[4]
    ldc = NC
    mpan = (mv + MR - 1) // MR
    npan = (nv + NR - 1) // NR
    KC = _kc_block(K, KC, np.int64(1))  # balanced K blocks (no tiny last block)
    nkb = (K + KC - 1) // KC
    a0 = a_off + bt * a_bs + m0 * a_rs
    b0 = b_off + bt * b_bs + n0 * b_cs
    # the in-place slot with a row-contiguous B: nothing packed, both operands read in place
    # (a plain product's tiles of this slot into a row-contiguous C are _direct_tile's)
    inplace = (slot == INPLACE_SLOT and b_cs == 1 and not holds_half(b_buf)
               and not holds_half(a_buf))
    c0 = c_off + bt * c_bs + m0 * c_rs + n0 * c_cs
    # B read in place (row-contiguous B, tile with a single A panel, so a
    # packed B would be used once): the nfull whole NR-panels are direct,
    # only the N-tail panel is packed.
    direct = b_cs == 1 and mpan == 1 and not holds_half(b_buf) and not inplace
    nfull = nv // NR if direct else 0
    direct_b = nfull > 0
    # the A-rows slot reads a k-contiguous A from its rows (B packed): A is never packed
    a_rows = slot == A_ROWS_SLOT and a_cs == 1 and not direct_b and not holds_half(a_buf)
    # whole-K packed-B cache, reused by consecutive tiles with the same B panel
    reuse = (not direct_b) and (not inplace) and nkb * KC * NC <= ws_b.size
    same_b = (reuse and b_state[0] == 1 and b_state[1] == slot and b_state[2] == n0
              and b_state[3] == nv and b_state[4] == b_off + bt * b_bs and b_state[5] == K)
    if K == 0:
        for i in range(mv):
            for j in range(nv):
                ws_c[i * ldc + j] = 0
    for kb in range(nkb):
        pc = kb * KC
        kc = min(KC, K - pc)
        acc = 1 if kb > 0 else 0
        if inplace:
            _inplace_tile(kc, a_buf, a0 + pc * a_cs, a_rs, a_cs, mv, b_buf, b0 + pc * b_rs,
                          b_rs, nv, ws_c, np.int64(0), ldc, acc, ws_a)
            continue
        pbo = kb * KC * NC if reuse else 0
        if not a_rows:
            pack_a(a_buf, a0 + pc * a_cs, a_rs, a_cs, mv, kc, MR, ws_a)
        if direct_b:
            db0 = b0 + pc * b_rs
            _direct_b_panels(slot, kc, ws_a, b_buf, db0, nfull, NR, b_rs, ws_c, ldc, acc)
            if nfull < npan:
                # (int64 zeros and the packed panel read-only: the same compiled callees as
                # the other calls; a literal 0 or a writable panel compiles them again)
                pack_b(b_buf, db0 + nfull * NR, b_rs, b_cs, kc, nv - nfull * NR, NR, ws_b,
                       np.int64(0))
                _call_uk(slot, kc, ws_a, np.int64(0), readonly(ws_b), np.int64(0), NR, ws_c,
                         nfull * NR, ldc, acc)
        else:
            if not same_b:
                pack_b(b_buf, b0 + pc * b_rs, b_rs, b_cs, kc, nv, NR, ws_b, pbo)
            for jr in range(npan):
                for ir in range(mpan):
                    if a_rows:
                        _a_rows_panel(kc, a_buf, a0 + pc + ir * MR * a_rs, a_rs,
                                      min(MR, mv - ir * MR), ws_b, pbo + jr * NR * kc, NR,
                                      ws_c, ir * MR * ldc + jr * NR, ldc, acc)
                    else:
                        _call_uk(slot, kc, ws_a, ir * MR * kc, readonly(ws_b),
                                 pbo + jr * NR * kc, NR, ws_c, ir * MR * ldc + jr * NR, ldc, acc)
    if reuse:
        b_state[0] = 1
        b_state[1] = slot
        b_state[2] = n0
        b_state[3] = nv
        b_state[4] = b_off + bt * b_bs
        b_state[5] = K
    else:
        b_state[0] = 0
    epilogue((ws_c, ldc, mv, nv, c_buf, c0, c_rs, c_cs, alpha, beta,
              cin_buf, cin_off + bt * cin_bs + m0 * cin_rs + n0 * cin_cs, cin_rs, cin_cs,
              bias_buf, bias_off + n0 * bias_s, bias_s, has_bias, act,
              m0, n0, bt, prog, pattrs, sides, sgeo))


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
    * epilogue program: after the activation, ``steps.apply_steps_as(c_buf, prog, pattrs,
      tile, ..., row0=m0, col0=n0, outer=b, sides, sgeo)`` runs on each tile before it is
      stored (the fused sequences' epilogue: elementwise steps with side inputs, in C's
      format: a half-precision tile is rounded first and after every step); ``prog`` may be
      empty; ``pattrs`` is of the computed dtype (float32 for half precision).
    * ``slot`` in ``0..NSLOTS-1``, ``1 <= tm <= MC(slot)``, ``1 <= tn <= NC(slot)``; every
      index touched must be in bounds (not checked: the runtime validates tables).
    * ``nthreads``: number of contiguous table chunks, one per thread; consecutive rows with
      the same B panel reuse the packed B (order tables n-major: ``make_gemm_table``).
    """
    table, boffs, a_buf, b_buf, c_buf, cin_buf, bias_buf, prog, pattrs, sides, sgeo = borrowed(
        (table, boffs, a_buf, b_buf, c_buf, cin_buf, bias_buf, prog, pattrs, sides, sgeo))
    ntiles = table.shape[0]
    nbatch = boffs.shape[0]
    nth = max(1, min(nthreads, ntiles))
    if M * N * K * nbatch < SERIAL_MACS:
        nth = 1
    proto = compute_empty(c_buf, 0)      # the workspaces' dtype (float32 for half precision)
    cfg = _slot_cfg_stub(proto)
    # workspace sizes over the slots used by the table
    sa = np.int64(1)     # int64 from the start (a literal 1 compiles callees once more)
    sb = np.int64(1)
    sc = np.int64(1)
    W = 64 // proto.itemsize
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
    if nth == 1:    # one thread's work: on this thread, no thread-pool launch
        thread_tiles((np.int64(0), ntiles, sa, sb, sc, table, M, N, K,
                      boffs, a_buf, a_rs, a_cs, b_buf, b_rs, b_cs, c_buf, c_rs, c_cs, alpha,
                      beta, cin_buf, cin_rs, cin_cs, bias_buf, bias_off, bias_s, has_bias, act,
                      prog, pattrs, sides, sgeo))
    else:
        for th in prange(nth):
            thread_tiles((th * ntiles // nth, (th + 1) * ntiles // nth, sa, sb, sc, table, M, N,
                          K, boffs, a_buf, a_rs, a_cs, b_buf, b_rs, b_cs, c_buf, c_rs, c_cs,
                          alpha, beta, cin_buf, cin_rs, cin_cs, bias_buf, bias_off, bias_s,
                          has_bias, act, prog, pattrs, sides, sgeo))


@njit(inline="always")
def _direct_tile(K, KC, a_buf, a0, a_rs, a_cs, mv, b_buf, b0, b_rs, nv, c_buf, c0, c_rs, ws):
    """A tile of the in-place slot for a plain product: ``C[i, j] = sum_k A[i, k] B[k, j]``
    for i < mv, j < nv, A at ``a_buf[a0 + i*a_rs + k*a_cs]``, B row-contiguous at ``b_buf[b0
    + k*b_rs + j]``, C row-contiguous at ``c_buf[c0 + i*c_rs + j]``, K walked in blocks of
    KC, stored straight into C (no accumulator tile, no epilogue). Taken by the thread's
    loop before the general tile's set-up: 256 x (17 x 64 @ 64 x 33) float32, 2 threads,
    went from 173-177 to 187-192 GFLOP/s."""
    for pc in range(0, K, KC):
        _inplace_tile(min(KC, K - pc), a_buf, a0 + pc * a_cs, a_rs, a_cs, mv, b_buf,
                      b0 + pc * b_rs, b_rs, nv, c_buf, c0, c_rs, 1 if pc > 0 else 0, ws)


@callee(cache=True, error_model="numpy")
def _thread_tiles(lo, hi, sa, sb, sc, table, M, N, K, boffs, a_buf, a_rs, a_cs, b_buf, b_rs,
                  b_cs, c_buf, c_rs, c_cs, alpha, beta, cin_buf, cin_rs, cin_cs, bias_buf,
                  bias_off, bias_s, has_bias, act, prog, pattrs, sides, sgeo):
    """Rows ``lo .. hi`` of the table (one thread's chunk), with this thread's workspaces of
    ``sa``, ``sb`` and ``sc`` elements; the other arguments are the driver's."""
    nbatch = boffs.shape[0]
    proto = compute_empty(c_buf, 0)
    ws_a = _aligned_empty(sa, proto)
    ws_b = _aligned_empty(sb, proto)
    ws_c = _aligned_empty(sc, proto)
    b_state = np.zeros(6, np.int64)
    # a plain product (no alpha, C_in, bias, activation or epilogue program) with a
    # row-contiguous B and C: the in-place slot's tiles go straight into C (_direct_tile)
    direct = (K > 0 and b_cs == 1 and c_cs == 1 and alpha == 1.0 and beta == 0.0
              and has_bias == 0 and act == 0 and prog.shape[0] == 0
              and not holds_half(b_buf) and not holds_half(a_buf))
    kc_in = _kc_block(K, _slot_cfg_stub(ws_c)[INPLACE_SLOT][4], np.int64(1))
    for t in range(lo, hi):
        bt = table[t, 5]
        m0 = table[t, 1]
        n0 = table[t, 2]
        mv = min(table[t, 3], M - m0)
        nv = min(table[t, 4], N - n0)
        if bt >= nbatch or mv <= 0 or nv <= 0:
            continue
        if direct and table[t, 0] == INPLACE_SLOT:
            b_state[0] = 0      # ws_b holds no packed B
            _direct_tile(K, kc_in, a_buf, boffs[bt, 0] + m0 * a_rs, a_rs, a_cs, mv, b_buf,
                         boffs[bt, 1] + n0, b_rs, nv, c_buf, boffs[bt, 2] + m0 * c_rs + n0, c_rs,
                         ws_a)
            continue
        _tile(table[t, 0], m0, n0, mv, nv, bt, K,
              a_buf, (boffs[bt, 0], a_rs, a_cs, 0),
              b_buf, (boffs[bt, 1], b_rs, b_cs, 0),
              c_buf, (boffs[bt, 2], c_rs, c_cs, 0, alpha, beta),
              cin_buf, (boffs[bt, 3], cin_rs, cin_cs, 0),
              bias_buf, (bias_off, bias_s, has_bias, act),
              ws_a, ws_b, ws_c, b_state, prog, pattrs, sides, sgeo)


def _thread_signature(dtype):
    """The argument types of ``_thread_tiles`` for the driver of ``dtype``."""
    return (types.int64,) * 5 + matmul_signature(dtype)[:-1]


#: ``_thread_tiles`` reached by address (``address_link``): the driver's prange body holds a
#: call, so its four levels (parfor body, two wrappers, driver) do not optimize and generate
#: the tiles' code again
THREADS = Link("matmul.thread_tiles", lambda: _thread_tiles, _thread_signature, DTYPES)


def _epilogue_signature(dtype):
    """The argument types of ``_epilogue`` for the driver of ``dtype``: the accumulator tile
    (compute dtype), then the driver's output, input-C, bias and step-program arguments."""
    sig = matmul_signature(dtype)
    i64 = types.int64
    acc = types.Array(getattr(types, compute(dtype)), 1, "C")
    tab, out, buf, pattrs, sides = sig[0], sig[11], sig[5], sig[25], sig[26]
    return ((acc, i64, i64, i64, out, i64, i64, i64, types.float64, types.float64,
             buf, i64, i64, i64, buf) + (i64,) * 7 + (tab, pattrs, sides, tab))


#: a tile's epilogue reached by address: compiled once, not optimized and generated again
#: inside ``_thread_tiles`` (the activation and the step interpreter's call with it)
EPILOGUE = Link("matmul.epilogue", lambda: _epilogue, _epilogue_signature, DTYPES)
epilogue = EPILOGUE.call
#: functions the driver reaches by address: drivers.get fills their slots first
#: the per-thread function, filled before the driver loads; the step interpreter runs only a
#: fused sequence's epilogue, so a plain matmul loads (or compiles) without it
LINKS = (EPILOGUE, THREADS)
ON_DEMAND = (STEPS,)
thread_tiles = THREADS.call


def matmul_signature(dtype):
    """The one Numba signature of ``matmul_driver`` for ``dtype`` (float32, float64 or a
    half-precision format through its carrier)."""
    f = getattr(types, carrier(dtype))
    buf = types.Array(f, 1, "C", readonly=True)
    out = types.Array(f, 1, "C")
    i64 = types.int64
    tab = types.Array(types.int64, 2, "C", readonly=True)
    sides = types.UniTuple(buf, MAX_SIDES)
    pattrs = types.Array(getattr(types, compute(dtype)), 1, "C", readonly=True)
    return (tab, i64, i64, i64, tab,
            buf, i64, i64, buf, i64, i64, out, i64, i64,
            types.float64, types.float64, buf, i64, i64,
            buf, i64, i64, i64, i64, tab, pattrs, sides, tab, i64)
