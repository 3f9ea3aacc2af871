"""Checks of op attributes shared by the op specs and fused sequences: real numbers, integer
tuples, flags, auto_pad values. Each raises OpAttributeError naming the op, the attribute,
what was given and what is accepted."""
import numbers

import numpy as np

from dynshape.errors import OpAttributeError

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def number(op, name, v):
    """``v`` as a float, or an OpAttributeError: a real number (not a bool)."""
    if not is_number(v):
        raise OpAttributeError(f"{op}: {name} must be a real number, got {v!r}")
    return float(v)


def int_tuple(op, name, v, n, lo, accepted=None):
    """``v`` as a tuple of ``n`` ints >= lo. ``accepted``: the tuple lengths accepted (default
    ``(n,)``); with it, a single int stands for all of them."""
    lengths = accepted or (n,)
    if accepted is not None and is_int(v):
        v = (v,) * n
    try:
        items = tuple(v)
    except TypeError:
        items = None
    if items is None or len(items) not in lengths or not all(is_int(i) for i in items):
        what = ("an integer or a tuple of " if accepted is not None else "") + \
            f"{' or '.join(map(str, lengths))} integers"
        raise OpAttributeError(f"{op}: {name} must be {what}, got {v!r}")
    if any(i < lo for i in items):
        word = {0: " (non-negative)", 1: " (positive)"}.get(lo, "")
        raise OpAttributeError(f"{op}: {name} must be >= {lo}{word}, got {v!r}")
    return tuple(int(i) for i in items)


def flag(op, name, v):
    if isinstance(v, (bool, np.bool_)) or (isinstance(v, (int, np.integer)) and v in (0, 1)):
        return bool(v)
    raise OpAttributeError(f"{op}: {name} must be a bool (or 0/1), got {v!r}")


def auto_pad(op, v):
    if v not in AUTO_PADS:
        raise OpAttributeError(f"{op}: auto_pad must be one of {', '.join(AUTO_PADS)}, got "
                               f"{v!r}")
    return v
