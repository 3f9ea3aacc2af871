"""Python's cyclic garbage collector, held back while drivers compile.

Numba's compiler allocates millions of short-lived objects (IR nodes, types, LLVM IR
values). With the collector's default thresholds (700, 10, 10) collections run every few
hundred allocations, and the older generations, which hold Numba's caches, are traversed
again and again. Measured on binary float32, one process, fresh cache, three alternating
rounds: 19.5-21.1 s with the defaults, 17.7-18.9 s with :data:`THRESHOLDS` (peak resident
size 275 -> 298 MB; the collector off, in an earlier run: 19.8-20.5 s against 20.7-21.9,
at 412 MB). The demo's
first use (five drivers in two processes), two alternating rounds: 29.5 / 31.6 -> 28.9 /
30.1 s.

:func:`during_compile` sets :data:`THRESHOLDS` while a driver or a function reached by
address is loaded or compiled (``drivers.get``, ``address_link.Link.ensure``) and puts the
previous thresholds back when the outermost such block ends, whichever thread entered it.
It changes nothing when the collector is disabled, and a load from the cache allocates too
little for the thresholds to matter.
"""
import contextlib
import gc
import threading

#: the collector's thresholds while compiling: a young collection every 200000 allocations,
#: a middle one every 50 of those, a full one every 1000 middle ones
THRESHOLDS = (200000, 50, 1000)

_lock = threading.Lock()
_depth = 0
_saved = None


@contextlib.contextmanager
def during_compile():
    """Within this block (nested blocks and other threads' included), the collector runs
    with :data:`THRESHOLDS`; the thresholds from before the outermost block come back after
    it."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(*THRESHOLDS)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_saved)
                _saved = None
