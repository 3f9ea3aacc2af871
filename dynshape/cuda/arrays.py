"""Which arrays live on a CUDA device, and their layout.

``info(x)`` reads a device array's layout without touching its memory: shape, byte
strides, dtype, device pointer, device ordinal. Sources: ``__cuda_array_interface__``
(CuPy, Numba, PyTorch), DLPack's device query for the rest, and the CUDA simulator's arrays.
"""
from dataclasses import dataclass

import numpy as np

#: DLPack's device type of CUDA memory
_DLPACK_CUDA = 2


@dataclass(frozen=True)
class DeviceLayout:
    shape: tuple
    strides: tuple          # bytes
    dtype: np.dtype
    ptr: int                # device address of element [0, ..., 0]
    device: int             # device ordinal (0 under the simulator)
    kind: str               # "cupy", "numba", "simulator" or "interface"


_SIM = []


def simulating():
    """Whether Numba's CUDA simulator stands in for the device (NUMBA_ENABLE_CUDASIM=1 when
    ``numba.cuda`` was first imported; fixed for the process from then on)."""
    if not _SIM:
        from numba.cuda.core import config
        _SIM.append(bool(config.ENABLE_CUDASIM))
    return _SIM[0]


_FAKE = []


def _fake_type():
    if not _FAKE:
        if simulating():
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
            _FAKE.append((FakeCUDAArray,))
        else:
            _FAKE.append(())
    return _FAKE[0]


def is_device_array(x):
    """True for arrays in CUDA device memory (never reads them)."""
    t = type(x)
    if t is np.ndarray:
        return False
    if hasattr(t, "__cuda_array_interface__") or isinstance(x, _fake_type()):
        return True
    dev = getattr(x, "__dlpack_device__", None)
    if dev is not None:
        try:
            return dev()[0] == _DLPACK_CUDA
        except Exception:
            return False
    return False


def _kind(x):
    mod = type(x).__module__.split(".")[0]
    return {"cupy": "cupy", "numba": "numba", "numba_cuda": "numba"}.get(mod, "interface")


def info(x):
    """The :class:`DeviceLayout` of device array ``x``."""
    if isinstance(x, _fake_type()):
        a = x._ary
        return DeviceLayout(a.shape, a.strides, a.dtype, a.__array_interface__["data"][0], 0,
                            "simulator")
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is None:
        # DLPack-only producers: let CuPy read the capsule (zero copy)
        import cupy
        x = cupy.from_dlpack(x)
        cai = x.__cuda_array_interface__
    dtype = _named_dtype(x, np.dtype(cai["typestr"]))
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    if strides is None:
        strides, acc = [], dtype.itemsize
        for s in reversed(shape):
            strides.insert(0, acc)
            acc *= max(s, 1)
    ptr = cai["data"][0] or 0
    return DeviceLayout(shape, tuple(strides), dtype, ptr, _device_of(x), _kind(x))


def _named_dtype(x, dtype):
    """The array's own NumPy dtype where the interface's type string names raw bytes only
    (``ml_dtypes.bfloat16`` is ``V2`` there) and the array knows better (Numba device
    arrays keep their NumPy dtype)."""
    if dtype.kind == "V":
        own = getattr(x, "dtype", None)
        if isinstance(own, np.dtype) and own.itemsize == dtype.itemsize:
            return own
    return dtype


def _device_of(x):
    dev = getattr(x, "device", None)
    for attr in ("id", "index"):
        v = getattr(dev, attr, None)
        if isinstance(v, int):
            return v
    if hasattr(x, "__dlpack_device__"):
        try:
            return int(x.__dlpack_device__()[1])
        except Exception:
            pass
    return 0
