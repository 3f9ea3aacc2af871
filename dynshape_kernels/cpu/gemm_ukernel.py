"""Explicit-vector GEMM micro-kernels for dynshape (helper of ``gemm.py``).

Each micro-kernel is a Numba ``@intrinsic`` that emits LLVM IR directly:
``MR x NV`` accumulators of type ``<W x float>`` (or ``<W x double>``) live
as SSA phi values across the k loop, so LLVM keeps them in registers (zmm; on a
target without AVX-512 a tile too large for its 16 ymm registers is computed in register
blocks, ``register_blocks``);
A elements are broadcast (folded to ``{1toW}`` memory operands by the
backend) and multiplied into ``NV`` vector loads of B with ``llvm.fma``.

Contract of a generated kernel ``uk``::

    uk(kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, accumulate)

* ``pa``: 1-D contiguous float array; the packed A micro-panel starts at
  ``pa_off``; element (row r, k) is at ``pa_off + k*MR + r``.
* ``pb``: 1-D contiguous float array; element (k, col j) of the B
  micro-panel is at ``pb_off + k*ldb + j`` for ``0 <= j < NR``.  For a
  packed panel ``ldb == NR``; a row-contiguous unpacked B can be read in
  place with ``ldb`` = its row stride.
* ``cb``: 1-D contiguous float array; the MR x NR result is written at
  ``cb_off + r*ldc + j``.  ``accumulate != 0`` adds to the values there,
  otherwise they are overwritten (never read).
* ``kc >= 1`` (int64).  All offsets/strides are int64 and in elements.
  No bounds checks: the caller guarantees every touched index is valid.

The kernels are generic in dtype: the (MR, NV) configuration is chosen at
typing time from the dtype of ``pa`` (``cfg32`` / ``cfg64``); W is 16 for
float32 and 8 for float64 (one 512-bit vector).
"""
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .vector_width import target_has_avx512f

VEC_BYTES = 64  # the kernels' vector: 512 bits, W = 16 float32 or 8 float64 lanes

#: the target's vector registers: 32 of 64 bytes with AVX-512F, else (AVX2) 16 of 32 bytes,
#: where LLVM splits each 64-byte vector of the kernels into two registers
REG_BYTES, REG_COUNT = (64, 32) if target_has_avx512f() else (32, 16)


def block_registers(rb, vb, spare=0, a_vectors=False, per=None):
    """Vector registers a register block of ``rb`` rows x ``vb`` vectors holds in a k step:
    its accumulators, and B's ``vb`` vectors and one broadcast of A (the outer-product
    kernels) or A's ``rb`` row vectors and one of B (``a_vectors``: the inner-product
    kernel); ``spare`` lane masks per vector where masks live in vector registers (no mask
    registers: a target without AVX-512). ``per``: registers per 64-byte vector."""
    per = per or max(1, VEC_BYTES // REG_BYTES)
    masks = spare * vb * per if per > 1 else 0
    if a_vectors:
        return (rb * vb + rb + 1) * per + masks
    return (rb * vb + vb) * per + 1 + masks


def _vec_width(dtype):
    return VEC_BYTES // (8 if dtype == types.float64 else 4)


def register_blocks(rows, vecs, spare=0, a_vectors=False, max_rows=None, reg_bytes=None,
                    reg_count=None):
    """How a micro-kernel's ``rows`` x ``vecs`` accumulators (64-byte vectors) are computed:
    a list of register blocks ``(row indices, vector indices)``, each with its own k loop,
    whose registers fit the target's (``block_registers``; ``spare`` lane masks per
    vector). With AVX-512 every kernel of the catalog is one block (the whole tile, as
    written). With AVX2 a 6 x 4 tile's 48 register halves of accumulators would spill at
    every k step; it runs as four 6 x 1 blocks (12 registers each, the classic 6 x 16 AVX2
    kernel), each re-reading A's panel from L1. Blocks are chosen
    to minimise the cycles of a k step at two FMAs and two loads a cycle (an A broadcast is
    a load), the taller block on ties (fewer reads of B); column blocks outermost, so a B
    column block read in place is reused from L1 by the row blocks under it.
    ``a_vectors``: the inner-product kernel's form, A's rows loaded as vectors (one per row
    of the block, held across the step) where the outer-product kernels broadcast scalars.
    ``max_rows``: when the tile is split, blocks of at most that many rows (a kernel that
    skips the blocks past its valid rows: a 1-row product computes one block, not MR rows).
    ``reg_bytes``/``reg_count``: another target's registers (default this one's)."""
    per = max(1, VEC_BYTES // (reg_bytes or REG_BYTES))
    budget = reg_count or REG_COUNT

    def fits(rb, vb):
        return block_registers(rb, vb, spare, a_vectors, per) <= budget

    def loads(r, v):
        return (r + v) * per if a_vectors else r + v * per

    if fits(rows, vecs):
        return [(tuple(range(rows)), tuple(range(vecs)))]
    best = None
    for rb in range(1, min(rows, max_rows or rows) + 1):
        for vb in range(1, vecs + 1):
            if not fits(rb, vb):
                continue
            cycles = sum(max(r * v * per, loads(r, v))
                         for r in (min(rb, rows - r0) for r0 in range(0, rows, rb))
                         for v in (min(vb, vecs - v0) for v0 in range(0, vecs, vb)))
            key = (cycles, -rb, -vb)
            if best is None or key < best[0]:
                best = (key, rb, vb)
    if best is None:
        raise ValueError(f"register_blocks: no block of a {rows} x {vecs} tile fits "
                         f"{reg_count or REG_COUNT} registers with {spare} spare per vector")
    _, rb, vb = best
    return [(tuple(range(r0, min(rows, r0 + rb))), tuple(range(v0, min(vecs, v0 + vb))))
            for v0 in range(0, vecs, vb) for r0 in range(0, rows, rb)]


def ir_basics(context, builder, sig, is64, W):
    """What every micro-kernel's codegen starts with: (float type, W-lane vector type, its
    pointer type, i64, i32, element bytes, ``data(i, value)`` the data pointer of array
    argument i, ``c64(x)`` an i64 constant, the ``llvm.fma`` of the vector type)."""
    fty = ir.DoubleType() if is64 else ir.FloatType()
    vty = ir.VectorType(fty, W)
    i64 = ir.IntType(64)

    def data(i, v):
        return cgutils.create_struct_proxy(sig.args[i])(context, builder, value=v).data

    def c64(x):
        return ir.Constant(i64, x)

    fma = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vty, [vty, vty, vty]),
        "llvm.fma.v%df%d" % (W, 64 if is64 else 32))
    return fty, vty, vty.as_pointer(), i64, ir.IntType(32), 8 if is64 else 4, data, c64, fma


def accumulator_phis(builder, vty, n, pre):
    """``n`` vector phis of the k loop's header, each starting at zero from block ``pre``."""
    accs = []
    for _ in range(n):
        p = builder.phi(vty)
        p.add_incoming(ir.Constant(vty, None), pre)
        accs.append(p)
    return accs


def outer_product_step(builder, fma, vty, W, scalars, bv, cur):
    """One k step of an MR x NV register tile: each of the MR ``scalars`` (A's column)
    broadcast and multiplied into the NV vectors ``bv`` (B's row), added into ``cur``
    (row-major list of MR*NV accumulators, updated in place)."""
    i32 = ir.IntType(32)
    undef = ir.Constant(vty, ir.Undefined)
    lane0 = ir.Constant(ir.VectorType(i32, W), [0] * W)
    NV = len(bv)
    for r, s in enumerate(scalars):
        bc = builder.shuffle_vector(builder.insert_element(undef, s, ir.Constant(i32, 0)),
                                    undef, lane0)
        for v in range(NV):
            cur[r * NV + v] = builder.call(fma, [bc, bv[v], cur[r * NV + v]])


def prefetch_row(builder, row, nbytes):
    """Prefetch (into L1, for reading) every line of the ``nbytes`` bytes at pointer ``row``:
    one request per 64 bytes and one for the last byte. Any address: a prefetch never
    faults. Shared by the micro-kernels that read B's rows in place."""
    i32 = ir.IntType(32)
    i8p = ir.IntType(8).as_pointer()
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch.p0")
    base = builder.bitcast(row, i8p)
    for off in list(range(0, nbytes, 64)) + [nbytes - 1]:
        builder.call(fn, [builder.gep(base, [ir.Constant(ir.IntType(64), off)], inbounds=False),
                          ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])


def make_ukernel(cfg32, cfg64, pf_dist=0):
    """Return an intrinsic micro-kernel. cfgXX = (MR, NV) for that dtype.
    ``pf_dist > 0``: software-prefetch the B row ``pf_dist`` k-steps ahead
    (for B read in place from memory; useless for packed B)."""

    @intrinsic
    def uk(typingctx, kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, accumulate):
        for arr in (pa, pb, cb):
            if not isinstance(arr, types.Array) or arr.ndim != 1:
                return None
        dt = pa.dtype
        if dt not in (types.float32, types.float64) or pb.dtype != dt or cb.dtype != dt:
            return None
        is64 = dt == types.float64
        MR, NV = cfg64 if is64 else cfg32
        W = _vec_width(dt)
        i64t = types.int64
        sig = types.void(i64t, pa, i64t, pb, i64t, i64t, cb, i64t, i64t, i64t)

        def codegen(context, builder, sig, args):
            kc, pa_v, pa_off, pb_v, pb_off, ldb, cb_v, cb_off, ldc, accf = args
            fty, vty, vpty, i64, i32, eb, data, c64, fma = ir_basics(context, builder, sig,
                                                                     is64, W)

            pa_p = builder.gep(data(1, pa_v), [pa_off], inbounds=True)
            pb_p = builder.gep(data(3, pb_v), [pb_off], inbounds=True)
            cb_p = builder.gep(data(6, cb_v), [cb_off], inbounds=True)
            isacc = builder.icmp_unsigned('!=', accf, c64(0))
            # B read in place (pf_dist): one block, spilled or not. Its pass over B's rows is
            # bound by memory when B comes from there (8 x 4096 @ 4096 x 4096 float32, AVX2:
            # 0.86-0.89 of NumPy's time as one block, 0.58-0.67 as blocks, with or without
            # walking K in chunks that the blocks re-read from L1)
            blocks = [(tuple(range(MR)), tuple(range(NV)))] if pf_dist else register_blocks(MR, NV)
            for rows, vecs in blocks:
                pre = builder.block
                loop = builder.append_basic_block("uk_loop")
                after = builder.append_basic_block("uk_after")
                builder.branch(loop)
                builder.position_at_end(loop)
                it = builder.phi(i64)
                it.add_incoming(c64(0), pre)
                pap = builder.phi(pa_p.type)
                pap.add_incoming(pa_p, pre)
                pbp = builder.phi(pb_p.type)
                pbp.add_incoming(pb_p, pre)
                accs = accumulator_phis(builder, vty, len(rows) * len(vecs), pre)
                cur = list(accs)
                bv = []
                for v in vecs:
                    q = builder.gep(pbp, [c64(v * W)], inbounds=True)
                    bv.append(builder.load(builder.bitcast(q, vpty), align=eb))
                scalars = [builder.load(builder.gep(pap, [c64(r)], inbounds=True), align=eb)
                           for r in rows]
                outer_product_step(builder, fma, vty, W, scalars, bv, cur)
                if pf_dist > 0 and rows[0] == vecs[0] == 0:   # row k + pf_dist, once
                    prefetch_row(builder, builder.gep(pbp, [builder.mul(ldb, c64(pf_dist))],
                                                      inbounds=False), NV * W * eb)
                itn = builder.add(it, c64(1))
                papn = builder.gep(pap, [c64(MR)], inbounds=True)
                pbpn = builder.gep(pbp, [ldb], inbounds=True)
                endb = builder.block
                it.add_incoming(itn, endb)
                pap.add_incoming(papn, endb)
                pbp.add_incoming(pbpn, endb)
                for p, c in zip(accs, cur):
                    p.add_incoming(c, endb)
                builder.cbranch(builder.icmp_signed('<', itn, kc), loop, after)

                builder.position_at_end(after)
                ptrs = []
                for r in rows:
                    rowp = builder.gep(cb_p, [builder.mul(ldc, c64(r))], inbounds=True)
                    for v in vecs:
                        ptrs.append(builder.bitcast(builder.gep(rowp, [c64(v * W)],
                                                                inbounds=True), vpty))
                with builder.if_else(isacc) as (then, otherwise):
                    with then:
                        for q, val in zip(ptrs, cur):
                            old = builder.load(q, align=eb)
                            builder.store(builder.fadd(old, val), q, align=eb)
                    with otherwise:
                        for q, val in zip(ptrs, cur):
                            builder.store(val, q, align=eb)
            return context.get_dummy_value()

        return sig, codegen

    uk.MR32, uk.NV32 = cfg32
    uk.MR64, uk.NV64 = cfg64
    return uk


@intrinsic
def load_at(typingctx, arr, idx):
    """``arr[idx]`` for a 1-D array without Numba's negative-index
    wrap-around (which blocks vectorisation) and without bounds checks.
    ``0 <= idx < arr.size`` is the caller's contract."""
    if not isinstance(arr, types.Array) or arr.ndim != 1 or not isinstance(idx, types.Integer):
        return None
    sig = arr.dtype(arr, types.intp)

    def codegen(context, builder, sig, args):
        a, i = args
        data = cgutils.create_struct_proxy(sig.args[0])(context, builder, value=a).data
        return builder.load(builder.gep(data, [i], inbounds=True))
    return sig, codegen


@intrinsic
def store_at(typingctx, arr, idx, val):
    """``arr[idx] = val`` (cast to the array dtype), no wrap-around, no
    bounds checks (see ``load_at``)."""
    if not isinstance(arr, types.Array) or arr.ndim != 1 or not isinstance(idx, types.Integer):
        return None
    sig = types.void(arr, types.intp, arr.dtype)

    def codegen(context, builder, sig, args):
        a, i, v = args
        data = cgutils.create_struct_proxy(sig.args[0])(context, builder, value=a).data
        builder.store(v, builder.gep(data, [i], inbounds=True))
        return context.get_dummy_value()
    return sig, codegen


def make_dot_ukernel(MR, NR):
    """Inner-product ("dot") micro-kernel for narrow N, reading A in place.

    ``ukd(kc, pa, pa_off, lda, pb, pb_off, ldb, cb, cb_off, ldc, accumulate)``
    computes, for r < MR and j < NR, ``sum_{k < kc8} A[r, k] * Bt[j, k]``
    where ``A[r, k] = pa[pa_off + r*lda + k]`` (rows contiguous along k),
    ``Bt[j, k] = pb[pb_off + j*ldb + k]`` (B transposed, contiguous along
    k) and ``kc8 = kc - kc % W`` (the caller adds the last ``kc % W`` terms).
    MR*NR vector accumulators run along k and are reduced horizontally at
    the end; the result goes to ``cb[cb_off + r*ldc + j]`` (added when
    ``accumulate != 0``).  Same contract otherwise as ``make_ukernel``.
    """

    @intrinsic
    def ukd(typingctx, kc, pa, pa_off, lda, pb, pb_off, ldb, cb, cb_off, ldc, accumulate):
        for arr in (pa, pb, cb):
            if not isinstance(arr, types.Array) or arr.ndim != 1:
                return None
        dt = pa.dtype
        if dt not in (types.float32, types.float64) or pb.dtype != dt or cb.dtype != dt:
            return None
        is64 = dt == types.float64
        W = _vec_width(dt)
        i64t = types.int64
        sig = types.void(i64t, pa, i64t, i64t, pb, i64t, i64t, cb, i64t, i64t, i64t)

        def codegen(context, builder, sig, args):
            kc, pa_v, pa_off, lda, pb_v, pb_off, ldb, cb_v, cb_off, ldc, accf = args
            fty, vty, vpty, i64, i32, eb, data, c64, fma = ir_basics(context, builder, sig,
                                                                     is64, W)

            pa_p = builder.gep(data(1, pa_v), [pa_off], inbounds=True)
            pb_p = builder.gep(data(4, pb_v), [pb_off], inbounds=True)
            cb_p = builder.gep(data(7, cb_v), [cb_off], inbounds=True)
            arow = [builder.gep(pa_p, [builder.mul(lda, c64(r))], inbounds=True) for r in range(MR)]
            brow = [builder.gep(pb_p, [builder.mul(ldb, c64(j))], inbounds=True) for j in range(NR)]
            zero = ir.Constant(vty, None)
            niter = builder.sdiv(kc, c64(W))
            isacc = builder.icmp_unsigned('!=', accf, c64(0))

            def hsum(v):
                n = W
                while n > 1:
                    h = n // 2
                    lo = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, h), list(range(h))))
                    hi = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, h), list(range(h, n))))
                    v = builder.fadd(lo, hi)
                    n = h
                return builder.extract_element(v, ir.Constant(i32, 0))

            for rows, cols in register_blocks(MR, NR, a_vectors=True):
                pre = builder.block
                loop = builder.append_basic_block("ukd_loop")
                after = builder.append_basic_block("ukd_after")
                builder.cbranch(builder.icmp_signed('>', niter, c64(0)), loop, after)
                builder.position_at_end(loop)
                it = builder.phi(i64)
                it.add_incoming(c64(0), pre)
                accs = accumulator_phis(builder, vty, len(rows) * len(cols), pre)
                koff = builder.mul(it, c64(W))
                av = [builder.load(builder.bitcast(builder.gep(arow[r], [koff], inbounds=True),
                                                   vpty), align=eb) for r in rows]
                cur = list(accs)
                nc = len(cols)
                for jj, j in enumerate(cols):
                    bv = builder.load(builder.bitcast(builder.gep(brow[j], [koff], inbounds=True),
                                                      vpty), align=eb)
                    for ri in range(len(rows)):
                        cur[ri * nc + jj] = builder.call(fma, [av[ri], bv, cur[ri * nc + jj]])
                itn = builder.add(it, c64(1))
                endb = builder.block
                it.add_incoming(itn, endb)
                for p, c in zip(accs, cur):
                    p.add_incoming(c, endb)
                builder.cbranch(builder.icmp_signed('<', itn, niter), loop, after)
                builder.position_at_end(after)
                fin = []
                for idx in range(len(rows) * nc):
                    p = builder.phi(vty)
                    p.add_incoming(zero, pre)
                    p.add_incoming(cur[idx], endb)
                    fin.append(p)
                sums = [hsum(v) for v in fin]
                ptrs = []
                for r in rows:
                    rowp = builder.gep(cb_p, [builder.mul(ldc, c64(r))], inbounds=True)
                    for j in cols:
                        ptrs.append(builder.gep(rowp, [c64(j)], inbounds=True))
                with builder.if_else(isacc) as (then, otherwise):
                    with then:
                        for q, val in zip(ptrs, sums):
                            builder.store(builder.fadd(builder.load(q, align=eb), val), q,
                                          align=eb)
                    with otherwise:
                        for q, val in zip(ptrs, sums):
                            builder.store(val, q, align=eb)
            return context.get_dummy_value()

        return sig, codegen

    return ukd
