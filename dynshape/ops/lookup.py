"""Lookup tables of unary ops on the half-precision formats (CPU).

A float16 or bfloat16 operand takes one of 65,536 values, so a unary op on it is a table of
65,536 results. For the ops of ``abi.storage.LOOKUP_OPS`` (transcendental ones whose half
kernels cost more per element than one table read; per format) the unary driver reads the table
instead of computing (``dynshape_kernels/cpu/lookup.py``). The table is built here, once per
(op, format, attributes), by running the op's own computed kernel over every carrier value:
the table read gives bit for bit what the computed kernel gives (the accuracy table in the
README holds for both), and fused chains, which keep computing, agree with it.

The table rides in the op's attribute array after its two attributes (the bytes of
``LOOKUP_SIZE - 2`` float32 slots are the 65,536 result carriers: 128 KiB). Tables are kept
in a bounded dict (emptied when full); building one costs one kernel call over 65,536
elements.
"""
import contextlib
import contextvars
import threading

import numpy as np
from dynshape_kernels.abi.storage import LOOKUP_BASE, LOOKUP_OPS, LOOKUP_SIZE

#: tables kept at most (128 KiB each)
MAX_TABLES = 64

_tables = {}
_lock = threading.Lock()
_computing = contextvars.ContextVar("dynshape_lookup_computing", default=False)


@contextlib.contextmanager
def computing():
    """Within this block half-precision unary ops compute instead of reading tables (how
    tables are built; tests compare the two)."""
    token = _computing.set(True)
    try:
        yield
    finally:
        _computing.reset(token)


def uses_table(op, dtype_name):
    """Whether the CPU unary driver reads kernel op ``op`` on ``dtype_name`` from a table."""
    return op in LOOKUP_OPS.get(dtype_name, ()) and not _computing.get()


def with_table(name, op, dtype_name, fattrs, attrs):
    """``fattrs`` (the two attributes, float32) followed by the table of ``name`` with the
    checked attributes ``attrs`` (kernel op ``op``) on ``dtype_name``: read-only."""
    key = (op, dtype_name, float(fattrs[0]), float(fattrs[1]))
    t = _tables.get(key)
    if t is None:
        t = _build(name, dtype_name, fattrs, attrs)
        with _lock:
            if len(_tables) >= MAX_TABLES:
                _tables.clear()
            _tables[key] = t
    return t


def _build(name, dtype_name, fattrs, attrs):
    from dynshape.api import run
    from dynshape.ops import as_dtype
    every = np.arange(1 << 16, dtype=np.uint16).view(as_dtype(dtype_name))
    with computing():
        # target= skips the replay memo: the computed kernel itself, never a recorded table read
        res = run(name, every, target="cpu", **(attrs or {}))
    t = np.empty(LOOKUP_SIZE, np.float32)
    t[:LOOKUP_BASE] = fattrs
    t[LOOKUP_BASE:].view(np.uint16)[:] = res.view(np.uint16)    # the result carriers
    t.flags.writeable = False
    return t


def cached_tables():
    """How many tables are kept (for tests of the bound)."""
    return len(_tables)


def clear():
    with _lock:
        _tables.clear()
