"""Streaming stores: writing an output that will not fit in cache without reading it first.

A normal store to a line that is not in cache first reads the line from memory (the core
must own it before changing part of it), so an elementwise op over arrays larger than the
last-level cache moves three bytes for every two it needs: read x, read the output's old
line, write the output's new line. A streaming (non-temporal) store of a whole 64-byte
line skips that read and bypasses the caches. The drivers use them only when the executor
says the output is large (``abi.common_area``: the plane store block); a small output is
better left in cache for the op that reads it next.

The vectorized op loop computes ``BLOCK_BYTES`` of results into a small buffer (in L1),
and :func:`stream_block` stores the buffer as whole lines; compute and streaming alternate
every few lines, which is what made it pay (measured, C and Numba alike, 2 threads on 3e7
float32: one block per 4 KB or more gained nothing, one per 256 B 12-25%).
"""
import platform

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_X86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")
#: bytes per cache line: a streaming store writes whole, line-aligned lines
LINE_BYTES = 64
#: bytes of results computed per streaming block (4 lines)
BLOCK_BYTES = 256
#: how far ahead of the block being computed a streaming loop prefetches its inputs. With
#: streaming stores the hardware prefetcher fell behind: 3e7 float32, 2 threads, blocks of
#: 256 B, ms without / with prefetches 8 KB ahead: relu 6.0-6.4 / 4.8-4.9, exp 7.3-8.4 /
#: 5.8-6.1, tanh 12.2-12.5 / 7.4-7.9 (the same loop with normal stores: 11.0-11.2)
AHEAD_BYTES = 8192


@intrinsic
def stream_block(typingctx, buf, dst, d0):
    """``dst[d0:d0 + k] = buf[:k]`` with ``k = BLOCK_BYTES // itemsize``, as streaming stores
    of whole lines. ``dst[d0]`` must start a line (``line_gap(dst, d0) == 0``) and ``buf``
    must hold ``k`` elements; the caller checks both (nothing here can)."""
    if not (isinstance(buf, types.Array) and isinstance(dst, types.Array)
            and buf.dtype == dst.dtype and isinstance(d0, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        src = context.make_array(sig.args[0])(context, builder, value=args[0])
        out = context.make_array(sig.args[1])(context, builder, value=args[1])
        d = context.cast(builder, args[2], sig.args[2], types.intp)
        i8p = ir.IntType(8).as_pointer()
        line = ir.VectorType(ir.IntType(32), LINE_BYTES // 4).as_pointer()
        sp = builder.bitcast(src.data, i8p)
        dp = builder.bitcast(builder.gep(out.data, [d]), i8p)
        nontemporal = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        for k in range(BLOCK_BYTES // LINE_BYTES):
            off = ir.Constant(ir.IntType(64), k * LINE_BYTES)
            v = builder.load(builder.bitcast(builder.gep(sp, [off]), line), align=1)
            st = builder.store(v, builder.bitcast(builder.gep(dp, [off]), line),
                               align=LINE_BYTES)
            st.set_metadata("nontemporal", nontemporal)
        return context.get_dummy_value()
    return types.none(buf, dst, d0), codegen


@intrinsic
def line_gap(typingctx, arr, i):
    """Elements from ``arr[i]`` to the next line start (0 when ``arr[i]`` starts a line), or
    -1 when no element of ``arr`` starts a line (items not aligned to their own size)."""
    if not (isinstance(arr, types.Array) and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, value=args[0])
        idx = context.cast(builder, args[1], sig.args[1], types.intp)
        i64 = ir.IntType(64)
        size = context.get_abi_sizeof(context.get_data_type(sig.args[0].dtype))
        addr = builder.ptrtoint(builder.gep(a.data, [idx]), i64)
        mis = builder.and_(addr, ir.Constant(i64, LINE_BYTES - 1))
        gap = builder.and_(builder.sub(ir.Constant(i64, LINE_BYTES), mis),
                           ir.Constant(i64, LINE_BYTES - 1))
        aligned = builder.icmp_unsigned("==", builder.urem(addr, ir.Constant(i64, size)),
                                        ir.Constant(i64, 0))
        return builder.select(aligned, builder.udiv(gap, ir.Constant(i64, size)),
                              ir.Constant(i64, -1))
    return types.int64(arr, i), codegen


@intrinsic
def store_fence(typingctx):
    """Order this thread's streaming stores before its later stores (``sfence``): called
    once a work item's streaming is done, before other threads may read the output."""
    def codegen(context, builder, sig, args):
        if _X86:
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse.sfence")
            builder.call(fn, [])
        else:                  # a full fence orders streaming stores on the other targets
            builder.fence("seq_cst")
        return context.get_dummy_value()
    return types.none(), codegen
