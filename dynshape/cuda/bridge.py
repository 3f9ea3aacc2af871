"""Operands and tables onto the device for one launch, and the stream it runs on.

``device(buf)`` turns a flat operand buffer the executor derived from a stand-in
(``memory.DeviceView``) into a device array over the same bytes (no copy). A small host array
that an op spec made itself (a Python scalar operand) is uploaded; any other host memory is
refused. ``table(arr)`` uploads a table's array the first time it is seen and reuses that
copy afterwards (tables are immutable and shared by every shape of their bucket), so the
run path copies nothing to the device once a bucket is warm. ``stream()`` is the call's
stream: ``stream=`` of ``run``, else CuPy's current stream, else the default stream.
"""
import contextvars
import sys
import threading
import weakref
from collections import OrderedDict

import numpy as np

from dynshape.cuda.arrays import simulating
from dynshape.cuda.memory import Regions
from dynshape.errors import DeviceError

#: host arrays up to this many elements (scalars an op spec broadcast) are uploaded per call
HOST_OPERAND_LIMIT = 64
#: how many uploaded table arrays stay on the device (least recently used dropped first)
TABLE_SLOTS = 1024

_stream = contextvars.ContextVar("dynshape_cuda_stream", default=None)


class _Pinned:
    """A device array view over synthetic-range bytes, keeping its owner alive."""

    def __init__(self, ptr, n, dtype, owner):
        self.owner = owner
        self.__array_interface__ = {"shape": (n,), "strides": None,
                                    "typestr": np.dtype(dtype).str, "data": (ptr, False),
                                    "version": 3}


class Bridge:
    def __init__(self):
        self._tables = OrderedDict()      # id(array) -> (weakref, device copy)
        self._lock = threading.Lock()
        self.uploads = 0                  # table arrays copied to the device
        self.host_uploads = 0             # small host operands copied per call
        self._streams = {}

    # ---- operands ----------------------------------------------------------------------
    def device(self, buf):
        regs = Regions.current()
        hit = regs.resolve(buf) if regs is not None else None
        if hit is None:
            if buf.size > HOST_OPERAND_LIMIT:
                raise DeviceError(f"a host array of {buf.size} elements reached a CUDA "
                                  f"kernel; pass device arrays (CuPy, Numba, torch CUDA)")
            self.host_uploads += 1
            return self._to_device(np.ascontiguousarray(buf))
        region, off = hit
        ptr = region.dev_lo + off
        if simulating():
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
            return FakeCUDAArray(np.asarray(_Pinned(ptr, buf.size, buf.dtype, region.owner)))
        from numba import cuda
        desc = _Pinned(ptr, buf.size, buf.dtype, None).__array_interface__
        return cuda.from_cuda_array_interface(dict(desc, strides=None), owner=region.owner,
                                              sync=False)

    def upload(self, arr):
        """A small per-call host array (per-batch offsets) copied to the device."""
        self.host_uploads += 1
        return self._to_device(arr)

    def operand_or_constant(self, buf):
        """A device array's buffer as such; a host array (a driver's shared placeholder) is
        uploaded once and reused like a table."""
        regs = Regions.current()
        if regs is not None and regs.resolve(buf) is not None:
            return self.device(buf)
        return self.table(buf)

    # ---- tables ------------------------------------------------------------------------
    def table(self, arr):
        key = id(arr)
        with self._lock:
            hit = self._tables.get(key)
            if hit is not None and hit[0]() is arr:
                self._tables.move_to_end(key)
                return hit[1]
        dev = self._to_device(np.ascontiguousarray(arr))
        with self._lock:
            self._tables[key] = (weakref.ref(arr), dev)
            self.uploads += 1
            while len(self._tables) > TABLE_SLOTS:
                self._tables.popitem(last=False)
        return dev

    def cached_tables(self):
        return len(self._tables)

    def clear(self):
        with self._lock:
            self._tables.clear()

    def _to_device(self, arr):
        from numba import cuda
        if simulating():
            return cuda.to_device(arr)
        return cuda.to_device(arr, stream=self.stream())

    # ---- streams -----------------------------------------------------------------------
    def stream(self):
        if simulating():
            return 0
        s = _stream.get()
        if s is not None:
            return s
        cupy = sys.modules.get("cupy")
        if cupy is None:
            return 0
        ptr = cupy.cuda.get_current_stream().ptr
        if ptr == 0:
            return 0
        hit = self._streams.get(ptr)
        if hit is None:
            from numba import cuda
            hit = self._streams[ptr] = cuda.external_stream(ptr)
        return hit


def using_stream(stream):
    """Context value for ``run(..., stream=...)``: a Numba stream, a CuPy stream, a torch
    CUDA stream or a raw ``cudaStream_t`` pointer (int). Returns the token to reset."""
    if stream is None or simulating():
        return _stream.set(None)
    if isinstance(stream, int):
        from numba import cuda
        return _stream.set(cuda.external_stream(stream) if stream else 0)
    ptr = getattr(stream, "ptr", None)
    if ptr is None:
        ptr = getattr(stream, "cuda_stream", None)          # torch.cuda.Stream
    if ptr is not None:
        from numba import cuda
        return _stream.set(cuda.external_stream(int(ptr)) if ptr else 0)
    return _stream.set(stream)                               # a Numba stream


def reset_stream(token):
    _stream.reset(token)
