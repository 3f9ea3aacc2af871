"""An 8x8 block transpose in registers, for the tile copies of transposed operands.

``transpose8(src, soff, sstride, dst, doff, dstride)`` does

    dst[doff + r*dstride + c] = src[soff + c*sstride + r]    for r, c in 0..7

with eight vector loads (each reads 8 contiguous items of ``src``), the three rounds of
``shufflevector`` of the classic 8x8 transpose (interleave items, then pairs, then halves;
LLVM lowers them to unpack/permute instructions of the host: AVX-512, AVX2 or SSE) and
eight vector stores. A scalar loop does the same with 64 strided loads or stores, which
neither LLVM's vectorizer nor the hardware prefetcher handle well: on a 1e6-element
float32 transpose the tile copy ran 4x faster (bench: ``run_core --only transposed``).

``can_transpose8(src, dst)`` is a compile-time constant: False for arrays that are not
1-D C-contiguous, of different item types, or not integers or floats of 1, 2, 4 or 8
bytes, for which ``transpose8`` emits nothing; a caller keeps its scalar loop as the
fallback and compiles for every dtype (the branch folds away).
"""
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_I64 = ir.IntType(64)

# The three interleave rounds on pairs of 8-lane vectors: items, pairs, halves.
_ROUNDS = (
    ((0, 8, 1, 9, 4, 12, 5, 13), (2, 10, 3, 11, 6, 14, 7, 15)),
    ((0, 1, 8, 9, 4, 5, 12, 13), (2, 3, 10, 11, 6, 7, 14, 15)),
    ((0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15)),
)
# Per round, for each pair: the two input vectors and where the (lo, hi) results go.
_PAIRS = (
    (((0, 1), (0, 1)), ((2, 3), (2, 3)), ((4, 5), (4, 5)), ((6, 7), (6, 7))),
    (((0, 2), (0, 1)), ((1, 3), (2, 3)), ((4, 6), (4, 5)), ((5, 7), (6, 7))),
    (((0, 4), (0, 4)), ((1, 5), (1, 5)), ((2, 6), (2, 6)), ((3, 7), (3, 7))),
)


def _supported(src, dst):
    return (isinstance(src, types.Array) and isinstance(dst, types.Array)
            and src.layout == "C" and dst.layout == "C" and src.ndim == 1 and dst.ndim == 1
            and src.dtype == dst.dtype and isinstance(src.dtype, (types.Integer, types.Float))
            and src.dtype.bitwidth in (8, 16, 32, 64))


def _vector_ptr(builder, data, base, stride, k, vty):
    idx = builder.add(base, builder.mul(stride, ir.Constant(_I64, k)))
    return builder.bitcast(builder.gep(data, [idx]), vty.as_pointer())


def _transpose(builder, rows):
    """The 8 transposed vectors of 8 row vectors (LLVM ``shufflevector`` only)."""
    idx_ty = ir.VectorType(ir.IntType(32), 8)
    for (lo, hi), pairs in zip(_ROUNDS, _PAIRS):
        nxt = [None] * 8
        for (a, b), (da, db) in pairs:
            nxt[da] = builder.shuffle_vector(rows[a], rows[b], ir.Constant(idx_ty, lo))
            nxt[db] = builder.shuffle_vector(rows[a], rows[b], ir.Constant(idx_ty, hi))
        rows = nxt
    return rows


@intrinsic
def transpose8(typingctx, src, soff, sstride, dst, doff, dstride):
    if not all(isinstance(t, types.Integer) for t in (soff, sstride, doff, dstride)):
        return None
    ok = _supported(src, dst)
    sig = types.void(src, soff, sstride, dst, doff, dstride)

    def codegen(context, builder, sig, args):
        if not ok:
            return context.get_dummy_value()
        ety = context.get_data_type(sig.args[0].dtype)
        vty = ir.VectorType(ety, 8)
        align = sig.args[0].dtype.bitwidth // 8
        sdata = context.make_array(sig.args[0])(context, builder, args[0]).data
        ddata = context.make_array(sig.args[3])(context, builder, args[3]).data
        so, ss, do, ds = (context.cast(builder, v, t, types.int64)
                          for v, t in zip((args[1], args[2], args[4], args[5]),
                                          (sig.args[1], sig.args[2], sig.args[4], sig.args[5])))
        rows = [builder.load(_vector_ptr(builder, sdata, so, ss, k, vty), align=align)
                for k in range(8)]
        for k, v in enumerate(_transpose(builder, rows)):
            builder.store(v, _vector_ptr(builder, ddata, do, ds, k, vty), align=align)
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def can_transpose8(typingctx, src, dst):
    ok = _supported(src, dst)

    def codegen(context, builder, sig, args):
        return ir.Constant(ir.IntType(1), int(ok))
    return types.boolean(src, dst), codegen
