"""The step interpreter reached by address (``address_link``): compiled once per dtype, never
inside a driver.

Step programs (``steps``) run in the fused-sequence driver and in the conv and matmul
epilogues. Linked into each of these drivers, the interpreter (``steps._apply_steps_range``,
which holds every op's in-place loop) was compiled again for every driver and re-optimized
at every level of the driver's call tree: removing it took 12 s off the conv float32
driver's first-use compile (31.6 s) and 9 s off matmul's (24.7 s).

Instead the drivers call it through the link :data:`STEPS` (see ``address_link``): one slot
per dtype, whose interpreter takes the tile and its sides in the dtype's carrier (the dtypes
Numba sees: a half-precision format appears as its integer carrier) and its attributes in the
dtype's computed dtype (:func:`key_for`). The driver modules that run step programs list
:data:`STEPS` in their ``LINKS``.
"""
from numba import types

from ..abi.fused_table import FUSED_DTYPES
from ..abi.step_program import MAX_SIDES
from ..abi.storage import carrier, compute
from .address_link import Link

#: the dtypes of the drivers that run step programs (the fused driver's cover the others')
DTYPES = FUSED_DTYPES


def key_for(dtype):
    """(tile, side, attribute) dtypes of the interpreter of ``dtype``'s drivers (a dtype name;
    half-precision formats by name, e.g. ``"bfloat16"``)."""
    return (carrier(dtype), carrier(dtype), compute(dtype))


def signature(dtype):
    """The argument types of the interpreter of ``dtype`` (every array C-contiguous; the
    program, attributes, sides and side geometry read-only)."""
    tile, side, attr = (getattr(types, name) for name in key_for(dtype))
    i64 = types.int64
    table = types.Array(types.int64, 2, "C", readonly=True)
    sides = types.UniTuple(types.Array(side, 1, "C", readonly=True), MAX_SIDES)
    return (table, i64, i64, types.Array(attr, 1, "C", readonly=True),
            types.Array(tile, 1, "C"), i64, i64, i64, i64, i64, i64, i64, sides, table)


def _interpreter():
    from .steps import _apply_steps_range
    return _apply_steps_range


#: the step interpreter, by dtype
STEPS = Link("steps", _interpreter, signature, DTYPES)

#: ``run_steps((prog, first, last, pattrs, buf, boff, ld, nrows, ncols, row0, col0, outer,
#: sides, sgeo))``: ``steps._apply_steps_range`` through its slot
run_steps = STEPS.call
