"""Compiled functions reached by address: a caller holds a call, not the callee's code.

Numba links the machine code of every function a compiled function calls into the caller's
own code, then optimizes and generates the whole of it again; a driver's ``prange`` adds
four such levels (the parfor body, two wrappers, the driver) above the per-thread function
that holds all the work. Measured on the conv float32 driver: each level above
``_thread_entries`` re-optimized and re-generated its code for 1.3-1.8 s, 6.3 s of 18.7 s.

A *link* names one cached njit function, its argument signature per dtype and its return
type (None by default). Callers call it through a *slot*: one process-wide pointer per
(link, dtype) whose symbol is registered when the link is created, so cached code that
refers to it always links. :meth:`Link.ensure` fills a slot with the address of the function
compiled for that dtype, or loaded from Numba's cache (or the kernel package in use).
``drivers.get`` fills the slots of the links a driver's module lists in ``LINKS`` before it
loads the driver; typing a call fills its slot too, so code compiled in this process runs at
once. A driver's module may list links it calls only for some launches in ``ON_DEMAND``
instead (conv and matmul call the step interpreter only for a fused sequence's epilogue):
``drivers.get`` compiles or loads such a driver without them (typing a call inside
:func:`deferred` leaves the slot alone), and the executor fills their slots before the
first launch that needs them (``drivers.fill_on_demand``). A call through an empty slot
raises ``RuntimeError`` naming the link and dtype; it never jumps to address 0. Slots are
filled once per process and never emptied.

A linked function is compiled on its own, so it does not inherit its callers' compiler
options: it must say ``error_model="numpy"`` itself, as the drivers do (x/0 gives inf or nan,
as in NumPy), which the functions it calls then inherit.

A call passes its arguments as one tuple, ``link_call((a, b, ...))``; each must match the
dtype's signature, up to integer casts (a literal or a ``prange`` index becomes int64) and
writable arrays passed where read-only ones are declared (same data model).
"""
import contextlib
import ctypes
import threading

from llvmlite import binding as llvm
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

from ..compile_gc import during_compile

#: every link created in this process (kernel packages hold what these compiled)
LINKS = []
_lock = threading.RLock()
_deferred = threading.local()       # .links: the links whose typed calls fill no slot


@contextlib.contextmanager
def deferred(links):
    """Within this block (in this thread), typing a call to one of ``links`` does not fill
    its slot (nor compile the function): for compiling a driver that calls them on demand."""
    before = getattr(_deferred, "links", frozenset())
    _deferred.links = before | frozenset(links)
    try:
        yield
    finally:
        _deferred.links = before


class Link:
    """A function reached by address: ``resolve()`` returns its Numba dispatcher (imported
    on first use), ``signature(dtype)`` its argument types for ``dtype``, one of
    ``dtypes``; it returns ``restype`` for every dtype. ``call`` is the intrinsic that calls
    it (see the module)."""

    def __init__(self, name, resolve, signature, dtypes, restype=types.none):
        self.name = name
        self.restype = restype
        self._resolve = resolve
        self.signature = signature
        self.dtypes = tuple(dtypes)
        self._slots = {}
        for dtype in self.dtypes:
            slot = self._slots[dtype] = ctypes.c_void_p(0)
            llvm.add_symbol(self.symbol(dtype), ctypes.addressof(slot))
        self.call = _caller(self)
        LINKS.append(self)

    def __repr__(self):
        return f"<Link {self.name}>"

    def symbol(self, dtype):
        """The name of a slot in compiled code."""
        return f"dynshape.link.{self.name}.{dtype}"

    def dispatcher(self):
        return self._resolve()

    def ensure(self, dtype):
        """Fill the slot of ``dtype``: load the function compiled for it from Numba's cache,
        or compile it. Returns its address."""
        slot = self._slots.get(dtype)
        if slot is None:
            raise ValueError(f"{self.name} is not built for {dtype!r}; it is for "
                             f"{', '.join(self.dtypes)}")
        if slot.value:
            return slot.value
        with _lock, during_compile():
            slot = self._slots[dtype]
            if not slot.value:
                disp = self._resolve()
                if disp.targetoptions.get("error_model") != "numpy":
                    # compiled on its own, it does not inherit the drivers' options
                    raise TypeError(f"{self.name}: its function must be compiled with "
                                    "error_model='numpy', as the drivers are")
                sig = tuple(self.signature(dtype))
                cres = disp.overloads.get(sig)
                if cres is None:
                    disp.compile(sig)
                    cres = disp.overloads[sig]
                if cres.signature.return_type != self.restype:
                    raise TypeError(f"{self.name} for {dtype} returns "
                                    f"{cres.signature.return_type}, not {self.restype}")
                address = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
                if not address:
                    raise RuntimeError(f"{self.name} for {dtype} has no address")
                slot.value = address
            return slot.value

    def filled(self):
        """The dtypes whose slots hold the function in this process."""
        return sorted(d for d, s in self._slots.items() if s.value)

    def slots_in(self, library):
        """The dtypes of this link's slots that a Numba code library's code (and everything
        linked into it) refers to, as far as its LLVM module is at hand: code loaded from a
        cache shows none."""
        names = {gv.name for gv in library._final_module.global_variables}
        return {d for d in self.dtypes if self.symbol(d) in names}

    def match(self, argtypes):
        """The dtype whose signature ``argtypes`` fit, or a TypingError saying why none."""
        why = []
        for dtype in self.dtypes:
            sig = tuple(self.signature(dtype))
            bad = _misfit(argtypes, sig)
            if bad is None:
                return dtype, sig
            why.append(f"{dtype}: {bad}")
        raise TypingError(f"{self.name}: the arguments fit no dtype's signature ("
                          + "; ".join(why) + ")")


def _fits(actual, declared):
    if actual == declared:
        return True
    if isinstance(declared, types.Integer):
        return isinstance(actual, (types.Integer, types.Boolean))
    if isinstance(declared, types.Array) and isinstance(actual, types.Array):
        return (actual.dtype == declared.dtype and actual.ndim == declared.ndim
                and actual.layout == declared.layout and (actual.mutable or not declared.mutable))
    if isinstance(declared, types.UniTuple) and isinstance(actual, types.BaseTuple):
        return len(actual) == len(declared) and all(_fits(a, declared.dtype) for a in actual)
    return False


def _misfit(actual, declared):
    if len(actual) != len(declared):
        return f"{len(actual)} arguments, not {len(declared)}"
    for i, (a, d) in enumerate(zip(actual, declared)):
        if not _fits(a, d):
            return f"argument {i} is {a}, not {d}"
    return None


def _caller(link):
    @intrinsic
    def call(typingctx, args):
        if not isinstance(args, types.BaseTuple):
            raise TypingError(f"{link.name}: pass the arguments as one tuple, got {args}")
        dtype, declared = link.match(tuple(args))
        if link not in getattr(_deferred, "links", ()):
            link.ensure(dtype)
        message = (f"{link.name} for {dtype} is not loaded in this process (was its driver "
                   "obtained through dynshape_kernels.drivers.get, and drivers.fill_on_demand "
                   "called for a link it lists in ON_DEMAND?)")

        def codegen(context, builder, sig, llargs):
            values = []
            for i, (a, d) in enumerate(zip(args, declared)):
                v = builder.extract_value(llargs[0], i)
                if isinstance(d, types.Integer) and a != d:
                    v = context.cast(builder, v, a, d)
                elif isinstance(d, types.UniTuple) and a != d:
                    v = cgutils.pack_array(builder, [builder.extract_value(v, j)
                                                     for j in range(len(a))])
                values.append(v)
            name = link.symbol(dtype)
            slot = builder.module.globals.get(name)
            if slot is None:
                slot = ir.GlobalVariable(builder.module, cgutils.voidptr_t, name)
            address = builder.load(slot)
            with cgutils.if_unlikely(builder, cgutils.is_null(builder, address)):
                context.call_conv.return_user_exc(builder, RuntimeError, (message,))
            fnty = context.call_conv.get_function_type(link.restype, declared)
            fn = builder.bitcast(address, fnty.as_pointer())
            status, out = context.call_conv.call_function(builder, fn, link.restype, declared,
                                                          values)
            with cgutils.if_unlikely(builder, status.is_error):
                context.call_conv.return_status_propagate(builder, status)
            return out

        return link.restype(args), codegen
    return call
