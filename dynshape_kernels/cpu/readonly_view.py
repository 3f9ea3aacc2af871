"""``readonly(arr)``: the same array typed read-only, for passing a scratch tile where a
compiled callee already takes the operands (which the drivers receive read-only).

Numba compiles a function once per combination of argument types, and read-only and
writable arrays are different types with one data model: a writable scratch tile passed
where the callee has only been compiled for read-only operands compiles the whole callee
again (for an op switch, every op's loop). ``readonly`` changes the type only; the data,
shape, strides and reference are the array's own (the view keeps the array alive).
"""
from numba import types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic


@intrinsic
def readonly(typingctx, arr):
    if not isinstance(arr, types.Array):
        return None
    ro = arr.copy(readonly=True)

    def codegen(context, builder, sig, args):
        return impl_ret_borrowed(context, builder, sig.return_type, args[0])
    return ro(arr), codegen
