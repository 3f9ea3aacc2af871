"""``borrowed(arr)``: the same array without its reference count, for the span of a driver call.

Numba keeps a compiled array's buffer alive by counting references on its *meminfo*: every
view a function takes (a row slice) and every array it passes or packs into a tuple adds
one and drops it later, each an atomic ``lock inc``/``lock dec``. An atomic waits for the
stores before it to drain, so after a vector loop each costs tens of cycles, and the
threads of a parallel driver count on one shared cache line. Measured on relu of 16000
float32 items (4 table entries, one thread): 46% of the driver call's time was in
``NRT_incref``/``NRT_decref``.

A driver's operands belong to its caller, which holds them for the whole call, and no
driver keeps an operand past its return, so the drivers count nothing on them:
``borrowed`` returns the array with a null meminfo (and no parent object), for which
Numba's reference counting is a null test. Data, shape and strides are the array's own.
Arrays a driver allocates itself (scratch tiles) keep their counts and are freed as usual;
one it borrows too (scratch sliced in a hot loop) must be held, ``hold(scratch)``, after the
borrowed array's last use: Numba frees a variable right after its own last use, which is
the ``borrowed`` call.
``borrowed`` takes a tuple of arrays too (a driver's side operands) and returns every
member borrowed, and several arguments at once: ``x, o = borrowed((x, o))``.
"""
from llvmlite import ir
from numba import types
from numba.extending import intrinsic


def _takes(t):
    return isinstance(t, types.Array) or (
        isinstance(t, types.BaseTuple) and all(_takes(m) for m in t))


def _strip(context, builder, ty, value):
    if isinstance(ty, types.Array):
        ary = context.make_array(ty)(context, builder, value=value)
        ary.meminfo = ir.Constant(ary.meminfo.type, None)
        ary.parent = ir.Constant(ary.parent.type, None)
        return ary._getvalue()
    for i, member in enumerate(ty):
        value = builder.insert_value(
            value, _strip(context, builder, member, builder.extract_value(value, i)), i)
    return value


@intrinsic
def borrowed(typingctx, arr):
    """``arr`` (an array, or a tuple of arrays and tuples of them) without reference
    counts: see the module."""
    if not _takes(arr):
        return None

    def codegen(context, builder, sig, args):
        return _strip(context, builder, sig.args[0], args[0])
    return arr(arr), codegen


@intrinsic
def hold(typingctx, arr):
    """A use of ``arr`` (an array or a tuple of them) that does nothing: placed after the
    last use of ``borrowed(arr)``, it keeps ``arr``, which owns the memory, alive until
    there (Numba frees a variable right after its last use)."""
    if not _takes(arr):
        return None

    def codegen(context, builder, sig, args):
        return context.get_dummy_value()
    return types.none(arr), codegen
