"""One ``run`` on device arrays: stand-ins in, the op spec and executor as on the CPU, the
result handed back as the caller's kind of device array.

The call checks its operands first: every array must live on the same device (host NumPy
arrays mixed with device arrays, or arrays of two devices, are refused with the operands
named); Python scalars are fine. Inside the call, ``dynshape.ops`` allocates outputs on
that device and reads no element of any operand.
"""
import numpy as np

from dynshape import ops
from dynshape.cuda import arrays
from dynshape.cuda.bridge import reset_stream, using_stream
from dynshape.cuda.memory import DeviceView, Regions, as_interface_array, extent, typestr
from dynshape.errors import DeviceError


class DeviceCall:
    """What ``dynshape.ops`` asks of a device call: operands and outputs."""

    def __init__(self, regions, kind, device, like):
        self.regions = regions
        self.kind = kind            # array kind of the outputs ("cupy", "torch", ...)
        self.device = device
        self.like = like            # a device operand (outputs are made like it)

    def operand(self, x, what):
        if isinstance(x, DeviceView):
            return x
        if arrays.is_device_array(x):
            return self.add(x, what)
        a = np.asarray(x)
        if a.ndim > 0:
            raise DeviceError(f"{what} is a host array ({type(x).__name__}) while other "
                              f"operands are on CUDA device {self.device}; pass device arrays "
                              f"only (Python scalars are fine)")
        return a

    def cast(self, v, dtype, what):
        """Operand ``v`` in ``dtype``: stand-ins only when no conversion is needed (it would
        read device memory on the host); Python scalars are converted here."""
        if isinstance(v, DeviceView):
            if v.dtype != dtype:
                raise DeviceError(f"{what} has dtype {v.dtype} and the result {dtype}: device "
                                  f"operands are not promoted (that would convert them on the "
                                  f"host); pass operands of one dtype, or Python scalars")
            return v
        return np.asarray(v, dtype=dtype)

    def add(self, x, what):
        lay = arrays.info(x)
        if lay.device != self.device:
            raise DeviceError(f"{what} is on CUDA device {lay.device}, other operands on "
                              f"device {self.device}; all operands must share one device")
        return self.regions.add(x, lay)

    def empty(self, shape, dtype):
        shape = tuple(int(s) for s in shape)
        dev = _allocate(self.kind, self.like, shape, np.dtype(dtype))
        return self.regions.add(dev, arrays.info(dev))

    def to_user(self, result):
        """The device array a stand-in (or a view of one) stands for."""
        if not isinstance(result, np.ndarray):
            return result
        hit = self.regions.resolve(result)
        if hit is None:
            return result                     # a host value the op computed (none today)
        region, off = hit
        lay = region.layout
        lo, _ = extent(result.shape, result.strides, result.itemsize)
        if off == 0 and result.shape == lay.shape and result.strides == lay.strides \
                and result.dtype == lay.dtype:
            return region.owner
        return _view(region.owner, region.dev_lo + off - lo, result.shape, result.strides,
                     result.dtype, lay.kind)


def _allocate(kind, like, shape, dtype):
    if kind == "cupy":
        import cupy
        with cupy.cuda.Device(arrays.info(like).device):
            return cupy.empty(shape, dtype)
    if kind == "torch":
        import torch
        t = torch.from_numpy(np.empty(0, dtype)).dtype
        return torch.empty(shape, dtype=t, device=like.device)
    from numba import cuda
    return cuda.device_array(shape, dtype)


def _view(owner, ptr, shape, strides, dtype, kind):
    """A device array of ``owner``'s kind over other bytes of its allocation."""
    desc = {"shape": tuple(shape), "strides": tuple(strides), "typestr": typestr(dtype),
            "data": (ptr, False), "version": 3}
    if kind == "simulator":
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        class _Host:
            __array_interface__ = desc
        h = _Host()
        h.owner = owner
        return FakeCUDAArray(as_interface_array(h, dtype))
    if kind == "cupy":
        import cupy
        mem = cupy.cuda.UnownedMemory(ptr, 0, owner)
        return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(mem, 0), strides)
    from numba import cuda
    return cuda.from_cuda_array_interface(desc, owner=owner, sync=False)


def run_device(spec, executor, array_args, out, attrs, stream=None):
    """``run`` of op spec ``spec`` on device arrays (see the module docstring)."""
    first = next((a for a in (*array_args, out) if a is not None and
                  arrays.is_device_array(a)), None)
    if first is None:
        raise DeviceError(f"{spec.name}: target 'cuda' needs device arrays (CuPy, Numba, "
                          f"torch CUDA); got only host values")
    from dynshape_kernels.catalog import CUDA_FAMILIES
    if spec.family not in CUDA_FAMILIES:
        raise DeviceError(f"{spec.name}: the cuda target has no {spec.family!r} kernels in "
                          f"this build; it runs the families {', '.join(CUDA_FAMILIES)}")
    lay = arrays.info(first)
    with Regions() as regions:
        call = DeviceCall(regions, _out_kind(first, lay), lay.device, first)
        args = [call.operand(a, f"{spec.name} input {i}") if not isinstance(a, (int, float))
                else a for i, a in enumerate(array_args)]
        if out is not None:
            out = call.operand(out, f"{spec.name} out")
        token = ops.device_call(call)
        stoken = using_stream(stream)
        try:
            launch = spec.prepare(args, out, attrs)
            launch.target = "cuda"
            result = executor.run(launch)
            if launch.finalize is not None:
                result = launch.finalize(result)
        finally:
            reset_stream(stoken)
            ops.end_device_call(token)
        return call.to_user(result)


def run_fused_device(fused, x, sides, named, out):
    """A fused sequence (``dynshape.fuse``) on device arrays, in one CUDA launch: its steps
    with the tail that ends it (a row-wise op or a reduction) through the fused kernel, or,
    for a chain led by matmul, gemm or conv2d, that op's kernel with the steps as its
    epilogue (``x`` is then the op's first operand and ``sides[0]`` its second)."""
    from dynshape.fusion.run import _execute, _execute_lead
    values = (x, *sides, *named.values(), out)
    first = next((a for a in values if a is not None and arrays.is_device_array(a)))
    lay = arrays.info(first)
    with Regions() as regions:
        call = DeviceCall(regions, _out_kind(first, lay), lay.device, first)

        def conv(v, what):
            return v if v is None or isinstance(v, (int, float)) else call.operand(v, what)
        x = conv(x, "fused input x")
        sides = [conv(v, f"side input {i}") for i, v in enumerate(sides)]
        named = {k: conv(v, f"side input {k!r}") for k, v in named.items()}
        out = conv(out, "out")
        token = ops.device_call(call)
        try:
            if fused.lead is not None:
                result = _execute_lead(fused, x, sides[0], sides[1:], named, out)
            else:
                result = _execute(fused, x, sides, named, out, explain=False)
        finally:
            ops.end_device_call(token)
        return call.to_user(result)


def _out_kind(x, lay):
    if lay.kind in ("cupy", "simulator"):
        return lay.kind
    if type(x).__module__.split(".")[0] == "torch":
        return "torch"
    return "numba"
