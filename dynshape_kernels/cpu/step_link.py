"""The step interpreter reached by address: compiled once per dtype, never inside a driver.

Step programs (``steps``) run in the fused-sequence driver and in the conv and matmul
epilogues. Linked into each of these drivers, the interpreter (``steps._apply_steps_range``,
which holds every op's in-place loop) was compiled again for every driver and re-optimized
at every level of the driver's call tree: removing it took 12 s off the conv float32
driver's first-use compile (31.6 s) and 9 s off matmul's (24.7 s).

Instead a driver calls the interpreter through a *slot*: one process-wide pointer per
interpreter *key*, ``(tile dtype, side dtype, attribute dtype)`` (the dtypes Numba sees:
a half-precision format appears as its carrier). The caller's compiled code holds only the
slot's name (an external symbol, resolved when its code is loaded, from Numba's cache or a
kernel package, as well as when it is compiled), so the interpreter's machine code is
never part of the caller's. :func:`ensure` fills a slot with the address of the interpreter
compiled for its key, or loaded from Numba's cache.

Who fills the slots:

* ``drivers.get`` (and ``load_cached``), for a family whose module says
  ``RUNS_STEP_PROGRAMS = True``, fills the slot of the driver's dtype (:func:`key_for`)
  before it loads or compiles the driver;
* compiling a caller fills every slot it types a call for (so code compiled in this
  process runs at once), and ``drivers.get`` checks that a driver it compiled refers to no
  slot but its dtype's (:func:`slots_in`).

Every slot's symbol exists from import on (an unresolved symbol would abort the process when
cached code that refers to it is loaded); a call through an empty slot raises
``RuntimeError`` naming the key, it never jumps to address 0. Slots are filled once per
process and never emptied.
"""
import ctypes
import threading

from llvmlite import binding as llvm
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

from ..abi.step_program import MAX_SIDES
from ..abi.storage import carrier, compute

_slots = {}             # key -> ctypes.c_void_p (its address is the slot's symbol)
_lock = threading.RLock()
#: the dtypes of the drivers that run step programs (their keys have slots from import on)
DTYPES = ("float32", "float64", "int32", "int64", "float16", "bfloat16")


def key_for(dtype):
    """The interpreter key of the drivers of ``dtype`` (a dtype name; half-precision
    formats by name, e.g. ``"bfloat16"``): its tiles and sides in the dtype's carrier, its
    attributes in its computed dtype."""
    return (carrier(dtype), carrier(dtype), compute(dtype))


def symbol(key):
    """The name of a key's slot in compiled code."""
    return "dynshape.step_interpreter." + ".".join(key)


def signature(key):
    """The argument types the interpreter is compiled for (every array C-contiguous; the
    program, attributes, sides and side geometry read-only)."""
    tile, side, attr = (getattr(types, name) for name in key)
    i64 = types.int64
    table = types.Array(types.int64, 2, "C", readonly=True)
    sides = types.UniTuple(types.Array(side, 1, "C", readonly=True), MAX_SIDES)
    return (table, i64, i64, types.Array(attr, 1, "C", readonly=True),
            types.Array(tile, 1, "C"), i64, i64, i64, i64, i64, i64, i64, sides, table)


def _slot(key):
    with _lock:
        slot = _slots.get(key)
        if slot is None:
            slot = _slots[key] = ctypes.c_void_p(0)
            llvm.add_symbol(symbol(key), ctypes.addressof(slot))
        return slot


def ensure(key):
    """Fill the slot of ``key``: load the interpreter compiled for it from Numba's cache,
    or compile it (seconds, once per machine). Returns its address."""
    with _lock:
        slot = _slot(key)
        if not slot.value:
            from .steps import _apply_steps_range
            sig = signature(key)
            cres = _apply_steps_range.overloads.get(sig)
            if cres is None:
                _apply_steps_range.compile(sig)
                cres = _apply_steps_range.overloads[sig]
            address = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
            if not address:
                raise RuntimeError(f"the step interpreter for {key} has no address")
            slot.value = address
        return slot.value


def ensure_for(dtype):
    """:func:`ensure` the key of the drivers of ``dtype``."""
    return ensure(key_for(dtype))


def filled():
    """The keys whose slots hold an interpreter in this process."""
    with _lock:
        return sorted(k for k, s in _slots.items() if s.value)


def slots_in(library):
    """The keys whose slots the compiled code of a Numba code library refers to (its code
    and everything linked into it), as far as its LLVM module is at hand: code loaded from
    a cache shows none."""
    names = {gv.name for gv in library._final_module.global_variables}
    return {key for key in _slots if symbol(key) in names}


def _array(t, what, dtype=None, ndim=1):
    if not isinstance(t, types.Array) or t.ndim != ndim or t.layout != "C":
        raise TypingError(f"step interpreter: {what} must be a C-contiguous {ndim}-D array, "
                          f"got {t}")
    if dtype is not None and t.dtype != dtype:
        raise TypingError(f"step interpreter: {what} must hold {dtype}, got {t.dtype}")
    return t.dtype


def _key_of(prog, pattrs, buf, sides, sgeo):
    _array(prog, "the program", types.int64, 2)
    _array(sgeo, "the side geometry", types.int64, 2)
    attr = _array(pattrs, "the attributes")
    tile = _array(buf, "the tile")
    if not buf.mutable:
        raise TypingError("step interpreter: the tile must be writable")
    if not isinstance(sides, types.UniTuple) or len(sides) != MAX_SIDES:
        raise TypingError(f"step interpreter: the sides must be a UniTuple of {MAX_SIDES} "
                          f"arrays, got {sides}")
    side = _array(sides.dtype, "a side")
    key = (str(tile), str(side), str(attr))
    known = {key_for(d) for d in DTYPES}
    if key not in known:
        raise TypingError(f"step interpreter: no driver dtype has the key {key} (tile, side, "
                          f"attribute dtypes); known: {sorted(known)}")
    return key


@intrinsic
def run_steps(typingctx, prog, first, last, pattrs, buf, boff, ld, nrows, ncols, row0, col0,
              outer, sides, sgeo):
    """``steps._apply_steps_range(...)`` (same arguments, integers int64) through the slot
    of its key. Typing a call fills the slot (see the module)."""
    key = _key_of(prog, pattrs, buf, sides, sgeo)
    for i, t in enumerate((first, last, boff, ld, nrows, ncols, row0, col0, outer)):
        if t != types.int64:
            raise TypingError(f"step interpreter: integer argument {i} must be int64, got {t}")
    ensure(key)
    argtys = (prog, first, last, pattrs, buf, boff, ld, nrows, ncols, row0, col0, outer, sides,
              sgeo)
    canon = signature(key)
    message = (f"the step interpreter for {key} is not loaded in this process (the driver "
               "was not obtained through dynshape_kernels.drivers.get?)")

    def codegen(context, builder, sig, args):
        name = symbol(key)
        slot = builder.module.globals.get(name)
        if slot is None:
            slot = ir.GlobalVariable(builder.module, cgutils.voidptr_t, name)
        address = builder.load(slot)
        with cgutils.if_unlikely(builder, cgutils.is_null(builder, address)):
            context.call_conv.return_user_exc(builder, RuntimeError, (message,))
        fnty = context.call_conv.get_function_type(types.none, canon)
        fn = builder.bitcast(address, fnty.as_pointer())
        status, _ = context.call_conv.call_function(builder, fn, types.none, canon, args)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return types.none(*argtys), codegen


for _dtype in DTYPES:
    _slot(key_for(_dtype))
