"""``prefetch(arr, i)``: ask the CPU to start bringing ``arr[i]``'s cache line into L2.

A hint, not a load: it never faults (an index past the array is allowed and does nothing
useful), returns nothing and changes no result. Loops that compute for a while on data
already in cache use it to fetch the data they will read next, so that memory works while
the core computes (the hardware prefetcher only follows the addresses being loaded now).
"""
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

#: bytes per cache line (the stride between two prefetches of one array)
LINE_BYTES = 64


@intrinsic
def prefetch(typingctx, arr, idx):
    """Prefetch the line holding ``arr[idx]`` (1-D contiguous array, integer index) for
    reading, into L2 (LLVM's locality 2)."""
    if not (isinstance(arr, types.Array) and isinstance(idx, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, value=args[0])
        i = context.cast(builder, args[1], sig.args[1], types.intp)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        ptr = builder.bitcast(builder.gep(ary.data, [i]), i8p)
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 2), ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return types.none(arr, idx), codegen


@njit(inline="always")
def prefetch_span(arr, i, n):
    """Prefetch the lines of ``arr[i:i + n]`` that lie inside ``arr`` (none when ``i < 0``):
    one per line, the last element's included."""
    end = min(i + n, arr.size)
    if i < 0 or i >= end:
        return
    for q in range(i, end, LINE_BYTES // arr.itemsize):
        prefetch(arr, q)
    prefetch(arr, end - 1)


@njit(inline="always")
def prefetch_on(arr, i, n):
    """Prefetch the lines of ``arr[i:i + n]``, one per line, with no bounds: the lines may
    lie past ``arr``'s end (a prefetch never faults). A loop over a slice of a larger buffer
    (a tile of a contiguous array) so prefetches what follows the slice, the next tile,
    where :func:`prefetch_span` would stop at the slice's end."""
    for q in range(i, i + n, LINE_BYTES // arr.itemsize):
        prefetch(arr, q)
