"""Unary ops on the half-precision formats read from a lookup table (``abi.storage``).

A half-precision operand has 65,536 possible values, so a unary op on it is a table of
65,536 results. The runtime builds the table once per (op, format, attributes) by running the
op's own computed kernel over every carrier value (``dynshape/ops/lookup.py``), so a table
read gives bit for bit what the computed kernel gives. The table rides in the op's float32
attribute array: ``attrs.size == LOOKUP_SIZE`` and the bytes of ``attrs[LOOKUP_BASE:]`` are
the 65,536 result carriers. ``lookup_map`` reads it and returns True, or returns False (and
does nothing) when ``attrs`` holds no table; for any other element type it compiles to
``False``, so the computed loops stay the only path there.
"""
import numpy as np
from numba import types
from numba.extending import overload

from ..abi.storage import LOOKUP_BASE, LOOKUP_SIZE
from .half import is_half


def lookup_map(attrs, x, o, n):
    """``o[i] = table[x[i]]`` for i < n when ``attrs`` holds a table; whether it did. ``o``
    may be ``x`` itself (the loop reads each element before it writes it; it is a scalar loop
    of loads either way, so in place costs nothing)."""


def _table(attrs, like):
    """The table of ``attrs`` as an array of the carrier of ``like`` (an array)."""


@overload(_table)
def _table_impl(attrs, like):
    if like.dtype == types.uint16:
        return lambda attrs, like: attrs[LOOKUP_BASE:].view(np.uint16)
    return lambda attrs, like: attrs[LOOKUP_BASE:].view(np.int16)


@overload(lookup_map)
def _lookup_map(attrs, x, o, n):
    if not is_half(x.dtype):
        return lambda attrs, x, o, n: False

    def impl(attrs, x, o, n):
        if attrs.size != LOOKUP_SIZE:
            return False
        table = _table(attrs, x)
        for i in range(n):
            o[i] = table[np.uint16(x[i])]
        return True
    return impl
