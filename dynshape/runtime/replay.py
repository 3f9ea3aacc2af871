"""Replay of an exact call: the fast path of ``run``.

A call is described by its *call signature*: the op, its attributes, and the type, dtype,
shape and strides of every array and of ``out`` (with which inputs ``out`` is). Everything a
driver call needs besides the arrays' data (the table, the bound common area, per-batch
offsets, the op's attribute array) depends on that signature only. So the first call of a
signature runs the whole path (op spec, memo, executor, table cache) and then asks the
family's executor for a *replay*: a function ``go(arrays, out)`` that only takes the flat
buffers of this call's arrays and calls the driver. Later calls with the same signature run
the replay: no spec validation, no geometry, no key, no cache lock.

What keeps a replay right:

* The signature covers everything a spec validates from layout and attributes; an op whose
  validation reads the data (integer ``pow``'s exponents: its launch says ``reads_data``)
  or converts an operand makes no replay: the executor is only asked when the launch's
  operands are the caller's arrays, or views of their memory as other item types that the
  replay makes again (copy and transpose move unsigned items: ``reinterpreted``).
* A number operand (``run("mul", x, 0.5)``) is in the signature by its type: under
  NumPy's promotion rules (NEP 50) the type alone fixes the call's dtype. The spec
  converts it to a 0-d array with ``np.asarray(number, dtype)`` (its launch's
  ``converted``); the replay converts each call's number the same way and passes the
  array in its place, so the executor's replay sees arrays only and a new value costs no
  new record. Where a spec reads the value (``pow``: ``x ** 2`` runs as ``x * x``,
  integer exponents are validated), and under NumPy 1 (value-based promotion), the value
  is in the signature too (a float zero with its sign: ``-0.0 == 0.0`` in a dict).
* The table must still be the cache's table of its key: a background swap to the optimized
  table, an eviction or ``clear_cache`` end the replay (the next call takes the full path
  and records a new one). Each of them bumps the cache's ``epoch``; a replay looks its key
  up again (in the cache's dict, without the lock) only when the epoch moved since it last
  did, so a steady stream of calls pays one integer comparison.
* ``out`` given: a partial overlap with an input takes the full path (which copies the
  input first, as NumPy does); exact identity with an input is part of the signature.
* A replay fetches its driver once and enters its compiled entry point, skipping the
  dispatcher's type matching (the signature fixes every argument's type). It keeps the
  target's ``drivers.get`` it was recorded under: once a tool or test wraps (or unwraps)
  ``get``, the next call takes the full path, which fetches the driver through the new
  ``get`` and records a replay that calls it (``Target.replay_driver``).

Bounded: emptied when full, and on ``clear_cache``.
"""
import math
import threading

import numpy as np

from dynshape.runtime import config
from dynshape.runtime.layout import element_strides
from dynshape.runtime.targets import get_target

MAX_ENTRIES = 4096
_ND = np.ndarray
_policy = config._policy_override          # "warmup" inside a warming scope: no replay
# NumPy's C function behind the array-function dispatch of ``may_share_memory`` (the same
# answer, half the cost: it runs on every replay with ``out``)
_may_share = getattr(np.may_share_memory, "_implementation", np.may_share_memory)
#: the types of number operands a call signature takes; float types key a zero by its sign
_FLOATS = frozenset({float} | {np.dtype(c).type for c in "efdg"})
_NUMBERS = _FLOATS | {int, bool, np.bool_} | {np.dtype(c).type for c in "bBhHiIlLqQ"}
#: ops whose spec reads a number operand's value (pow: the exponent 2 and integer exponents)
VALUE_KEYED = frozenset({"pow"})
_VALUE_FREE = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


def _zero(v):
    """The signature's key of a float zero: its sign (``-0.0 == 0.0`` in a dict)."""
    return ("zero", math.copysign(1.0, v))


def signature(op, arrays, out, attrs):
    """The call signature of ``run(op, *arrays, out=out, **attrs)``, or None when the call
    cannot be replayed (an operand that is not a NumPy array, a read-only ``out``).

    One flat tuple: the op, the number of arrays, ``out``'s layout (or None), then per array
    its dtype, shape, strides and whether it is ``out`` itself (per number operand: "number",
    its type, and its value or None: see the module's text), then per attribute its name,
    type and value (an array attribute: its identity and layout, marked "array")."""
    if out is not None:
        if type(out) is not _ND or not out.flags.writeable:
            return None
        if 1 <= len(arrays) <= 2 and type(arrays[0]) is _ND:
            # the commonest calls (a unary or binary op into out=, a reduction or row-wise
            # op with one attribute): the same tuple as below, built in one expression
            # (~100-300 ns less on a call that costs ~2-4 us)
            a = arrays[0]
            if not attrs:
                if len(arrays) == 1:
                    return (op, 1, out.dtype, out.shape, out.strides, a.dtype, a.shape,
                            a.strides, a is out)
                b = arrays[1]
                t = type(b)
                if t is _ND:
                    return (op, 2, out.dtype, out.shape, out.strides, a.dtype, a.shape,
                            a.strides, a is out, b.dtype, b.shape, b.strides, b is out)
                if t in _NUMBERS and _VALUE_FREE and op not in VALUE_KEYED:
                    return (op, 2, out.dtype, out.shape, out.strides, a.dtype, a.shape,
                            a.strides, a is out, "number", t, None, False)
            elif len(arrays) == 1 and len(attrs) == 1:
                (k, v), = attrs.items()
                t = type(v)
                if t is not _ND:
                    return (op, 1, out.dtype, out.shape, out.strides, a.dtype, a.shape,
                            a.strides, a is out, k, t, v if v or t not in _FLOATS else _zero(v))
        parts = [op, len(arrays), out.dtype, out.shape, out.strides]
    else:
        parts = [op, len(arrays), None]
    for a in arrays:
        t = type(a)
        if t is _ND:
            parts += (a.dtype, a.shape, a.strides, a is out)
        elif t in _NUMBERS:
            parts += ("number", t, None if _VALUE_FREE and op not in VALUE_KEYED
                      else a if a or t not in _FLOATS else _zero(a), False)
        else:
            return None
    if attrs:
        for k, v in attrs.items():
            t = type(v)
            if t is _ND:
                parts += (k, "array", id(v), v.dtype, v.shape, v.strides)
            else:
                parts += (k, t, v if t not in _FLOATS or v else _zero(v))
    return tuple(parts)          # may be unhashable (an attribute): then never recorded


class Replay:
    """One recorded call: ``go(arrays, out)`` runs the driver; the call allocates the output
    (``shape``, ``dtype``) when the caller gave none. ``others``: the positions of the arrays
    that are not ``out`` itself (each call checks them for a partial overlap with ``out``);
    ``epoch``: the cache's epoch when ``table`` was last seen cached under ``key``;
    ``drivers``, ``get``: the target's driver source and the ``get`` that ``go``'s driver
    was fetched through (the replay holds while ``drivers.get`` is still that one);
    ``operands``: None, or a function giving the arrays ``go`` takes from the caller's
    operands (each number converted as its spec converted it)."""
    __slots__ = ("go", "key", "table", "shape", "dtype", "finalize", "held", "others",
                 "epoch", "drivers", "get", "operands")

    def __init__(self, go, key, table, shape, dtype, finalize, held, others, epoch, drivers,
                 get, operands=None):
        self.go = go
        self.key = key
        self.table = table
        self.shape = shape
        self.dtype = dtype
        self.finalize = finalize
        self.held = held                 # arrays given as attributes, kept alive
        self.others = others
        self.epoch = epoch
        self.drivers = drivers
        self.get = get
        self.operands = operands


class ReplayMemo:
    def __init__(self, cache, max_entries=MAX_ENTRIES):
        self.cache = cache
        self.max_entries = max_entries
        self._entries = {}
        self._lock = threading.Lock()
        self.replays = 0                 # calls served by a replay (for tests and tools)
        cache.on_clear(self.clear)

    def run(self, sig, arrays, out):
        """The result of the call replayed, or None when no valid replay exists."""
        try:
            r = self._entries.get(sig)
        except TypeError:                # an unhashable attribute value
            return None
        if r is None or _policy.get() == "warmup" or r.drivers.get != r.get:
            return None
        cache = self.cache
        epoch = cache.epoch
        if r.epoch != epoch:             # a table left the cache since r was last checked
            if cache._tables.get(r.key) is not r.table:
                return None
            r.epoch = epoch
        if r.operands is not None:
            arrays = r.operands(arrays)
        if out is None:
            out = np.empty(r.shape, r.dtype)
        else:
            for i in r.others:
                if _may_share(out, arrays[i]):
                    return None
        if r.go(arrays, out) is False:
            return None
        try:
            cache._tables.move_to_end(r.key)
        except KeyError:
            pass
        cache.hits += 1
        cache._local.table = r.table
        self.replays += 1
        return out if r.finalize is None else r.finalize(out)

    def record(self, sig, executor, launch, arrays, out, attrs=None):
        """After a full call: keep its replay if the executor can make one. An array given
        as an attribute (a matmul's bias) is part of the signature by identity; the replay
        is kept only when the launch reads that array's own memory (a view, never a copy
        that later calls would not refresh), and it keeps the array alive (so its identity
        is not reused)."""
        ran = launch.ran
        operands = None
        if any(type(a) is not _ND for a in arrays):
            converted = launch.extra.get("converted")
            operands = _substitution(arrays, converted)
            if operands is None:
                return
            # this call's arrays as the launch has them (the executor finds its operands
            # among them by identity); later calls convert their numbers the same way
            arrays = tuple(a if type(a) is _ND else converted[i] for i, a in enumerate(arrays))
        held = tuple(v for v in (attrs or {}).values() if type(v) is _ND)
        if held:
            seen = [v for v in list(launch.inputs) + list(launch.extra.values())
                    if type(v) is _ND]
            if not all(any(np.may_share_memory(h, v) for v in seen) for h in held):
                return
        # a launch that moves its operands as other item types of the same memory (copy,
        # transpose) is replayed on the caller's arrays, viewed again by its replay
        result = launch.result if launch.extra.get("reinterpreted") else launch.out
        if ran is None or launch.result is not result or launch.extra.get("reads_data"):
            return
        if out is not None and result is not out:
            return
        if out is None and result.base is not None:
            return
        if any(element_strides(a) is None for a in (*arrays, result)):
            return                # byte strides the drivers cannot address: full path
        try:
            hash(sig)
        except TypeError:
            return
        key, table, bound = ran
        drivers = get_target(launch.target).drivers
        get = drivers.get                  # before the executor fetches the driver through it
        go = executor.replay(launch, arrays, table, bound)
        if go is None:
            return
        others = () if out is None else tuple(i for i, a in enumerate(arrays) if a is not out)
        epoch = self.cache.epoch
        if self.cache._tables.get(key) is not table:
            return                        # swapped or evicted while this call ran
        r = Replay(go, key, table, result.shape, result.dtype, launch.finalize, held, others,
                   epoch, drivers, get, operands)
        with self._lock:
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[sig] = r

    def clear(self):
        with self._lock:
            self._entries.clear()

    def __len__(self):
        return len(self._entries)


#: the replays of exact calls of ``run`` and of fused sequences
REPLAY = ReplayMemo(config.cache)


def _substitution(arrays, converted):
    """The function giving a replay's arrays from a call's operands: each number operand
    converted as its spec did (``converted[i]``, a 0-d array made by ``np.asarray(number,
    dtype)``); None when a number has no such array."""
    if not converted:
        return None
    dtypes = []
    for i, a in enumerate(arrays):
        c = converted.get(i)
        if type(a) is _ND:
            dtypes.append(None)
        elif type(c) is not _ND or c.shape != ():
            return None
        else:
            dtypes.append(c.dtype)
    asarray = np.asarray
    if len(dtypes) == 2 and dtypes[0] is None:
        d = dtypes[1]
        return lambda arrays: (arrays[0], asarray(arrays[1], d))
    if len(dtypes) == 2 and dtypes[1] is None:
        d = dtypes[0]
        return lambda arrays: (asarray(arrays[0], d), arrays[1])
    dtypes = tuple(dtypes)
    return lambda arrays: tuple(a if d is None else asarray(a, d)
                                for a, d in zip(arrays, dtypes))


def same_operands(launch, arrays, n=None):
    """Whether the launch's first ``n`` operands (all by default) are the caller's arrays
    themselves (no copy or conversion was made), in order."""
    ins = launch.inputs if n is None else launch.inputs[:n]
    return len(ins) == len(arrays) and all(a is b for a, b in zip(ins, arrays))


def positions(arrays, operands):
    """The position in ``arrays`` of each of ``operands`` (by identity: an operand must be
    one of the caller's arrays, neither a copy nor a conversion, and not empty), or None.

    None too when an operand is at two positions (``matmul(x, x)``): which of them the launch
    took it from is not known, and a replay reading the first for both would compute
    ``p @ p`` for a later ``matmul(p, q)`` of the same signature."""
    idx = []
    for a in operands:
        where = [j for j, u in enumerate(arrays) if u is a]
        if len(where) != 1 or a.size == 0:
            return None
        idx.append(where[0])
    return idx


def epilogue_fill(launch, family):
    """What a replay of a launch with an epilogue program calls before the driver of
    ``family``: the target's fill of the driver's on-demand links, as
    ``Target.epilogue_driver`` does on the full path (the CPU's step interpreter: a slot
    lookup once filled), or None when the target has none."""
    fill = getattr(get_target(launch.target).drivers, "fill_on_demand", None)
    if fill is None:
        return None
    dtype = launch.dtype
    return lambda: fill(family, dtype)
