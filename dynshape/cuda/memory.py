"""Layout stand-ins of device arrays, and the map from them back to device memory.

The executors plan on NumPy arrays (shape, strides, flat views): a device array enters a
call as a :class:`DeviceView`, a NumPy array with the device array's shape, strides and dtype
at a *synthetic* address: its device address plus ``SHIFT``, where no process memory is (an
address above user space). Every view the executors derive (broadcasts, transposes, flat
buffers) keeps addresses in that range, so :meth:`Regions.resolve` maps any of them back to
(device array, byte offset) by address arithmetic, and views of one allocation overlap in
the synthetic range exactly as they do on the device (aliasing checks see them). Nothing reads a stand-in's elements: the methods that would (``astype``,
``copy``, reductions, ``fill``) raise :class:`~dynshape.errors.DeviceError` instead.

Regions live for one call (:class:`Regions` is a context); the synthetic range starts far
above any user-space address.
"""
import bisect
import threading

import numpy as np

from dynshape.errors import DeviceError

#: synthetic address = device address + SHIFT (beyond user space: a stray read faults
#: instead of reading another object's memory)
SHIFT = 1 << 52


class _Interface:
    """An ``__array_interface__`` over a synthetic address (no buffer behind it)."""

    def __init__(self, shape, strides, dtype, ptr):
        self.__array_interface__ = {"shape": tuple(shape), "strides": tuple(strides),
                                    "typestr": typestr(dtype), "data": (ptr, False),
                                    "version": 3}


def typestr(dtype):
    """The array-interface type string of ``dtype``, or, for a dtype the string cannot
    name (``ml_dtypes.bfloat16`` reads back as raw bytes ``V2``), the unsigned integer of its
    size: view the array as ``dtype`` afterwards (:func:`as_interface_array`)."""
    dt = np.dtype(dtype)
    return dt.str if np.dtype(dt.str) == dt else np.dtype(f"u{dt.itemsize}").str


def as_interface_array(holder, dtype):
    """``np.asarray`` of an object with an ``__array_interface__`` written by
    :func:`typestr`, viewed as ``dtype``."""
    a = np.asarray(holder)
    return a if a.dtype == dtype else a.view(dtype)


def _refuse(name):
    def method(self, *args, **kwargs):
        raise DeviceError(f"{name} of a device array on the host: dynshape does not read "
                          f"device memory on the host (convert or copy it on the device)")
    method.__name__ = name
    return method


class DeviceView(np.ndarray):
    """A device array's layout as a NumPy array whose elements must never be read."""

    for _name in ("astype", "copy", "fill", "min", "max", "sum", "tolist", "tobytes",
                  "item", "__float__", "__int__", "__bool__"):
        locals()[_name] = _refuse(_name)
    del _name

    def __repr__(self):
        return f"<device array stand-in shape={self.shape} dtype={self.dtype}>"

    __str__ = __repr__

    def __reduce__(self):
        raise DeviceError("a device array's stand-in cannot be pickled")


def extent(shape, strides, itemsize):
    """(lowest, highest + 1) byte offsets, relative to element [0, ..., 0], of an array."""
    if any(s == 0 for s in shape):
        return 0, 0
    lo = sum(st * (n - 1) for st, n in zip(strides, shape) if st < 0)
    hi = sum(st * (n - 1) for st, n in zip(strides, shape) if st > 0)
    return lo, hi + itemsize


class Region:
    """One device array's bytes in the synthetic range: ``[start, stop)`` stands for
    ``[dev_lo, dev_lo + stop - start)`` on the device (``start = dev_lo + SHIFT``);
    ``owner`` is the device array."""
    __slots__ = ("start", "stop", "dev_lo", "owner", "layout")

    def __init__(self, start, stop, dev_lo, owner, layout):
        self.start, self.stop, self.dev_lo = start, stop, dev_lo
        self.owner, self.layout = owner, layout


class Regions:
    """The device arrays of one call, by synthetic address (thread-local, nestable)."""
    _local = threading.local()

    def __init__(self):
        self.starts = []
        self.regions = []

    @classmethod
    def current(cls):
        stack = getattr(cls._local, "stack", None)
        return stack[-1] if stack else None

    def __enter__(self):
        stack = getattr(Regions._local, "stack", None)
        if stack is None:
            stack = Regions._local.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        Regions._local.stack.pop()
        return False

    def add(self, owner, layout):
        """A :class:`DeviceView` standing for device array ``owner`` (its ``layout``)."""
        lo, hi = extent(layout.shape, layout.strides, layout.dtype.itemsize)
        start = layout.ptr + lo + SHIFT
        r = Region(start, start + (hi - lo), layout.ptr + lo, owner, layout)
        i = bisect.bisect(self.starts, start)
        self.starts.insert(i, start)
        self.regions.insert(i, r)
        base = as_interface_array(_Interface(layout.shape, layout.strides, layout.dtype,
                                             start - lo), layout.dtype)
        return base.view(DeviceView)

    def resolve(self, a):
        """(region, byte offset of ``a``'s lowest element in the region) of a view of a
        stand-in, or None for memory that is not a device array of this call."""
        addr = a.__array_interface__["data"][0]
        lo, _ = extent(a.shape, a.strides, a.itemsize)
        addr += lo
        stop = addr + (extent(a.shape, a.strides, a.itemsize)[1] - lo)
        for i in range(bisect.bisect(self.starts, addr) - 1, -1, -1):
            r = self.regions[i]
            if r.start <= addr and stop <= r.stop:       # views of one allocation may overlap
                return r, addr - r.start
        return None


def is_stand_in(a):
    """Whether ``a`` is a view of a device array's stand-in (by address)."""
    regs = Regions.current()
    return regs is not None and isinstance(a, np.ndarray) and regs.resolve(a) is not None
