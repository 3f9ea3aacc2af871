"""The in-place GEMM micro-kernel for dynshape: A and B read where they lie, nothing packed
(helper of ``gemm.py``; the small/medium slot's path when B is row-contiguous).

For the small GEMMs of batched matmuls (17 x 64 @ 64 x 33, say) packing cost as much as the
arithmetic: A is transposed into MR-row panels and B copied into zero-padded NR-column
panels for a micro-tile that is used once or twice. This kernel instead

* broadcasts ``A[r, k]`` straight from A's rows (any column stride); the rows of an M-tail
  micro-tile past the last valid row repeat that row, so nothing is read out of A's bounds,
  and their results are dropped;
* loads B's rows in place (unit column stride, any row stride) with masked loads (AVX-512's,
  or AVX2's ``vmaskmov``):
  columns past ``ncols`` are neither read nor faulted on, they load as zero, so the N tail
  needs no padded copy;
* stores with the same masks, row by row up to the valid rows, so a plain product can go
  straight into the output.

Contract of ``uk(kc, pa, a_off, lda, acs, rows, pb, b_off, ldb, ncols, cb, cb_off, ldc,
accumulate)``, NV vectors of W lanes (W = 16 float32, 8 float64; NR = NV * W):

* ``A[r, k] = pa[a_off + min(r, rows - 1)*lda + k*acs]`` for r < MR, k < kc, ``rows >= 1``;
* ``B[k, j] = pb[b_off + k*ldb + j]`` for k < kc, j < ncols, ``1 <= ncols <= NR``;
* ``cb[cb_off + r*ldc + j]`` for r < rows, j < ncols receives ``sum_k A[r, k] B[k, j]``
  (added to what is there when ``accumulate != 0``), with masked stores: nothing else of
  ``cb`` is read or written, so ``cb`` may be the output itself (``ldc`` its row stride, any
  sign) as well as an accumulator tile.
* ``kc >= 1``; all offsets and strides int64 elements, any sign; no bounds checks.

The window form (``make_inplace_ukernel(MR, NV, window=True)``, conv2d's input read where
it lies) differs only in B: ``uk(kc, pa, a_off, lda, acs, rows, pb, b_off, koff, kmask, k0,
ncols, cb, cb_off, ldc, accumulate)``, ``pb`` the address of B's first element (an integer:
one compiled caller serves every source array type), reads row k of B at
``pb[b_off + koff[k0 + k] + j]``
(``koff``: int64 offsets, any order) for the lanes j whose bit j of ``kmask[k0 + k]``
(int64; bits at j >= ncols must be clear) is set, and takes zero for the others without
reading them: the rows of a conv tile's B matrix are input row segments shifted by the
kernel tap, and the mask drops the padding columns and rows. ``ncols`` bounds the stores.
"""
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .gemm_ukernel import (_vec_width, accumulator_phis, ir_basics, outer_product_step,
                           prefetch_row, register_blocks)


#: rows of the plain form's register blocks when its tile is split (AVX2): blocks past the
#: call's valid rows are skipped, so a 1-row product (a GEMV) computes 2 of MR rows
SKIP_ROWS = 2


def make_inplace_ukernel(MR, NV, window=False, full=False, pf_dist=0):
    """The in-place micro-kernel with ``MR`` rows and ``NV`` vectors (both dtypes); its
    window form when ``window``. ``full``: B's rows are whole (``ncols`` is NR, which the
    caller guarantees; in the window form also every lane of every row lies inside the
    input, and ``kmask`` is not read): plain loads and stores, no lane masks. Masks from a
    run-time ``ncols`` take registers of their own: inlined into a large caller, the masked
    kernel's loop recomputed them and spilled accumulators (1024^3 float32, one thread: 142
    against 170 GFLOP/s called, 200 inlined without masks). ``pf_dist > 0`` (not the window
    form): each step also prefetches the lines of B's row ``pf_dist`` steps on (a prefetch
    never faults: rows past B's end cost a wasted request, nothing else)."""
    if window and pf_dist:
        raise ValueError("make_inplace_ukernel: pf_dist applies to the plain form only")

    def typer(kc, pa, pb, cb, tables):
        for arr in (pa, pb, cb) if pb is not None else (pa, cb):
            if not isinstance(arr, types.Array) or arr.ndim != 1:
                return None
        for arr in tables:
            if not isinstance(arr, types.Array) or arr.ndim != 1 or arr.dtype != types.int64:
                return None
        dt = cb.dtype
        if dt not in (types.float32, types.float64) or pa.dtype != dt:
            return None
        if pb is not None and pb.dtype != dt:
            return None
        return dt

    if window:
        @intrinsic
        def uk(typingctx, kc, pa, a_off, lda, acs, rows, pb, b_off, koff, kmask, k0, ncols, cb,
               cb_off, ldc, accumulate):
            if not isinstance(pb, types.Integer):
                return None
            dt = typer(kc, pa, None, cb, (koff, kmask))
            if dt is None:
                return None
            i64t = types.int64
            sig = types.void(i64t, pa, i64t, i64t, i64t, i64t, types.uintp, i64t, koff, kmask,
                             i64t, i64t, cb, i64t, i64t, i64t)
            return sig, _codegen(dt, window=True)
    else:
        @intrinsic
        def uk(typingctx, kc, pa, a_off, lda, acs, rows, pb, b_off, ldb, ncols, cb, cb_off,
               ldc, accumulate):
            dt = typer(kc, pa, pb, cb, ())
            if dt is None:
                return None
            i64t = types.int64
            sig = types.void(i64t, pa, i64t, i64t, i64t, i64t, pb, i64t, i64t, i64t, cb, i64t,
                             i64t, i64t)
            return sig, _codegen(dt, window=False)

    def _codegen(dt, window):
        is64 = dt == types.float64
        W = _vec_width(dt)

        def codegen(context, builder, sig, args):
            fty, vty, vpty, i64, i32, eb, data, c64, fma = ir_basics(context, builder, sig,
                                                                     is64, W)
            if window:
                (kc, pa_v, a_off, lda, acs, rows, pb_v, b_off, koff_v, kmask_v, k0, ncols,
                 cb_v, cb_off, ldc, accf) = args
                koff_p = builder.gep(data(8, koff_v), [k0], inbounds=False)
                kmask_p = builder.gep(data(9, kmask_v), [k0], inbounds=False)
                ic = 12
            else:
                (kc, pa_v, a_off, lda, acs, rows, pb_v, b_off, ldb, ncols, cb_v, cb_off, ldc,
                 accf) = args
                ic = 10
            i1 = ir.IntType(1)

            a_p = builder.gep(data(1, pa_v), [a_off], inbounds=False)
            if window:      # B's data pointer comes as an address (any source array)
                b_p = builder.gep(builder.inttoptr(pb_v, fty.as_pointer()), [b_off],
                                  inbounds=False)
            else:
                b_p = builder.gep(data(6, pb_v), [b_off], inbounds=False)
            cb_p = builder.gep(data(ic, cb_v), [cb_off], inbounds=True)
            last = builder.sub(rows, c64(1))
            arows = []
            for r in range(MR):
                rr = builder.select(builder.icmp_signed('<', c64(r), rows), c64(r), last)
                arows.append(builder.gep(a_p, [builder.mul(rr, lda)], inbounds=False))
            mty = ir.VectorType(i1, W)
            mload = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(vty, [vpty, i32, mty, vty]),
                "llvm.masked.load.v%df%d.p0" % (W, 64 if is64 else 32))
            n32 = builder.trunc(ncols, i32)
            nsplat = builder.shuffle_vector(
                builder.insert_element(ir.Constant(ir.VectorType(i32, W), ir.Undefined), n32,
                                       ir.Constant(i32, 0)),
                ir.Constant(ir.VectorType(i32, W), ir.Undefined),
                ir.Constant(ir.VectorType(i32, W), [0] * W))
            masks = [ir.Constant(mty, [1] * W) if full else builder.icmp_signed(
                '<', ir.Constant(ir.VectorType(i32, W), list(range(v * W, v * W + W))), nsplat)
                for v in range(NV)]
            zero = ir.Constant(vty, None)
            mstore = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [vty, vpty, i32, mty]),
                "llvm.masked.store.v%df%d.p0" % (W, 64 if is64 else 32))
            isacc = builder.icmp_unsigned('!=', accf, c64(0))

            def block(brows, bvecs):
                pre = builder.block
                loop = builder.append_basic_block("ukin_loop")
                after = builder.append_basic_block("ukin_after")
                builder.branch(loop)
                builder.position_at_end(loop)
                it = builder.phi(i64)
                it.add_incoming(c64(0), pre)
                aoff = builder.phi(i64)      # k * acs
                aoff.add_incoming(c64(0), pre)
                if not window:
                    bp = builder.phi(b_p.type)
                    bp.add_incoming(b_p, pre)
                accs = accumulator_phis(builder, vty, len(brows) * len(bvecs), pre)
                cur = list(accs)
                if window:      # row k: its offset and its lanes' mask from the tables
                    bp = builder.gep(b_p, [builder.load(builder.gep(koff_p, [it]), align=8)],
                                     inbounds=False)
                    # vector v's W mask bits are the v-th W-bit word of the little-endian
                    # int64: loaded straight into a mask register (no shifts)
                    if full:    # every lane inside: kmask is not read
                        lmasks = [masks[v] for v in bvecs]
                    else:
                        words = builder.bitcast(builder.gep(kmask_p, [it]),
                                                ir.IntType(W).as_pointer())
                        lmasks = [builder.bitcast(builder.load(builder.gep(words, [c64(v)]),
                                                               align=W // 8), mty)
                                  for v in bvecs]
                else:
                    lmasks = [masks[v] for v in bvecs]
                bv = [builder.call(mload, [builder.bitcast(builder.gep(bp, [c64(v * W)]), vpty),
                                           ir.Constant(i32, eb), m, zero])
                      for v, m in zip(bvecs, lmasks)]
                if pf_dist > 0 and brows[0] == bvecs[0] == 0:  # row k + pf_dist, once
                    prefetch_row(builder, builder.gep(bp, [builder.mul(ldb, c64(pf_dist))],
                                                      inbounds=False), NV * W * eb)
                scalars = [builder.load(builder.gep(arows[r], [aoff]), align=eb) for r in brows]
                outer_product_step(builder, fma, vty, W, scalars, bv, cur)
                itn = builder.add(it, c64(1))
                endb = builder.block
                it.add_incoming(itn, endb)
                aoff.add_incoming(builder.add(aoff, acs), endb)
                if not window:
                    bp.add_incoming(builder.gep(bp, [ldb]), endb)
                for p, c in zip(accs, cur):
                    p.add_incoming(c, endb)
                builder.cbranch(builder.icmp_signed('<', itn, kc), loop, after)

                builder.position_at_end(after)
                nb = len(bvecs)
                for ri, r in enumerate(brows):
                    # rows past ``rows`` and lanes past ``ncols`` are neither read nor written
                    with builder.if_then(builder.icmp_signed('<', c64(r), rows)):
                        rowp = builder.gep(cb_p, [builder.mul(ldc, c64(r))], inbounds=False)
                        qs = [builder.bitcast(builder.gep(rowp, [c64(v * W)], inbounds=False),
                                              vpty) for v in bvecs]
                        vals = cur[ri * nb:(ri + 1) * nb]
                        with builder.if_else(isacc) as (then, otherwise):
                            with then:
                                for v, q, val in zip(bvecs, qs, vals):
                                    old = builder.call(mload, [q, ir.Constant(i32, eb),
                                                               masks[v], zero])
                                    builder.call(mstore, [builder.fadd(old, val), q,
                                                          ir.Constant(i32, eb), masks[v]])
                            with otherwise:
                                for v, q, val in zip(bvecs, qs, vals):
                                    builder.call(mstore, [val, q, ir.Constant(i32, eb),
                                                          masks[v]])

            if window and not full:
                # the masked window form stays one block: in blocks (AVX2) each re-reads the
                # row offsets and rebuilds the lane masks from their bits, and conv2d ran
                # slower (64 -> 64 3x3 on 57 x 61: 0.19 of PyTorch's time against 0.26 as one
                # block, spilled; 3 -> 64 7x7/2 0.23 against 0.27)
                blocks = [(tuple(range(MR)), tuple(range(NV)))]
            else:
                blocks = register_blocks(MR, NV, spare=0 if full else 1,
                                         max_rows=None if window else SKIP_ROWS)
            for brows, bvecs in blocks:
                if brows[0] > 0 and len(blocks) > 1:    # past the valid rows: skipped
                    with builder.if_then(builder.icmp_signed('>', rows, c64(brows[0]))):
                        block(brows, bvecs)
                else:
                    block(brows, bvecs)
            return context.get_dummy_value()

        return codegen

    uk.MR, uk.NV = MR, NV
    return uk
