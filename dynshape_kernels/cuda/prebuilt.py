"""CUDA kernels from prebuilt code: a numba-cuda dispatcher whose one kernel is rebuilt from
PTX (and cubin) compiled ahead of time, never from Python source through NVVM.

numba-cuda rebuilds kernels this way from its own on-disk cache: ``_Kernel._rebuild`` with a
``CUDACodeLibrary`` that already holds the code per compute capability. Here the code library
is :class:`PrebuiltCodeLibrary`, which holds only the prebuilt code of one compute capability
and refuses, by name, anything that would need NVVM (PTX for another compute capability,
LLVM IR, LTO-IR). On the first launch on a device numba-cuda loads the module through the
CUDA driver: the prebuilt cubin as it is, or the PTX assembled to a cubin by the CUDA linker
(nvJitLink or the driver's PTX JIT, not NVVM).

Launching stays numba-cuda's own ``kernel[grid, block, stream](*args)``: the dispatcher is
specialized to the kernel's one signature like ``cuda.jit(signature)`` makes it, with
compilation disabled, so numba-cuda flattens the arguments (``_Kernel._prepare_args``: an
array as meminfo, parent, nitems, itemsize, data, shape..., strides...; scalars as C values)
and launches on the given stream exactly as for a kernel it compiled itself. The prebuilt PTX
must come from ``cuda.compile_ptx`` of the same Python function and signature (what
``dynshape pregenerate --target cuda`` writes): that runs the same front end and kernel fix-up
as ``cuda.jit``, so the entry's parameters are the ones numba-cuda passes.
"""
import re

#: PTX declaring external functions needs them linked in (numba-cuda's NRT, its reshape
#: helpers): a prebuilt kernel must be self-contained
_EXTERN = re.compile(r"\.extern\s+\.func\s+(?:\([^)]*\)\s*)?([\w$]+)")


class NotPrebuilt(RuntimeError):
    """The prebuilt code cannot serve a request (it would need NVVM)."""


def ptx_facts(ptx):
    """``(entry names, external functions)`` of a PTX text."""
    return (re.findall(r"\.entry\s+([\w$]+)", ptx), _EXTERN.findall(ptx))


def cubin_from_ptx(ptx, cc):
    """The cubin of a PTX text for compute capability ``cc`` (a (major, minor) pair),
    assembled by numba-cuda's linker (nvJitLink: no GPU, no NVVM). Raises RuntimeError when
    no linker that works without a device is available."""
    from numba.cuda.cudadrv import driver
    if not driver._have_nvjitlink():
        raise RuntimeError("nvJitLink (12.3 or newer) is not available")
    linker = driver._Linker(cc=tuple(cc))
    linker.add_ptx(ptx.encode() if isinstance(ptx, str) else ptx)
    return bytes(linker.complete().code)


def _library_class():
    from numba.cuda.codegen import CUDACodeLibrary

    class PrebuiltCodeLibrary(CUDACodeLibrary):
        """A ``CUDACodeLibrary`` holding the prebuilt PTX (and cubin) of one kernel for one
        compute capability; every path to NVVM raises :class:`NotPrebuilt`."""

        def __init__(self, name, entry, cc, ptx, cubin=None):
            super().__init__(None, name, entry_name=entry)
            self.cc = tuple(cc)
            self._prebuilt_ptx = ptx
            self._prebuilt_cubin = cubin
            self._finalized = True

        def _ensure_cc(self, cc):
            if cc is None:
                from numba.cuda.cudadrv import devices
                cc = devices.get_context().device.compute_capability
            cc = tuple(cc[:2])
            if cc != self.cc:
                raise NotPrebuilt(f"{self.name}: prebuilt for compute capability "
                                  f"{self.cc[0]}.{self.cc[1]}, asked for {cc[0]}.{cc[1]} "
                                  f"(that would compile with NVVM)")
            return cc

        def get_asm_strs(self, cc=None):
            self._ensure_cc(cc)
            return [self._prebuilt_ptx]

        def get_cubin(self, cc=None):
            cc = self._ensure_cc(cc)
            hit = self._cubin_cache.get(cc)
            if hit is None:
                if self._prebuilt_cubin is not None:
                    from cuda.core import ObjectCode
                    hit = ObjectCode.from_cubin(self._prebuilt_cubin, name=self.name)
                    self._cubin_cache[cc] = hit
                else:                   # the PTX, assembled by the linker (not NVVM)
                    hit = super().get_cubin(cc)
            return hit

        @property
        def llvm_strs(self):
            raise NotPrebuilt(f"{self.name}: prebuilt kernels have no LLVM IR")

        def get_ltoir(self, cc=None):
            raise NotPrebuilt(f"{self.name}: prebuilt kernels have no LTO-IR")

        def get_lto_ptx(self, cc=None):
            raise NotPrebuilt(f"{self.name}: prebuilt kernels have no LTO-IR")

        def add_ir_module(self, mod):
            raise NotPrebuilt(f"{self.name}: prebuilt kernels take no IR")

    return PrebuiltCodeLibrary


_LIBRARY = None


def library(name, entry, cc, ptx, cubin=None):
    """The code library of one prebuilt kernel (see :func:`_library_class`)."""
    global _LIBRARY
    if _LIBRARY is None:
        _LIBRARY = _library_class()
    return _LIBRARY(name, entry, cc, ptx, cubin)


def dispatcher(py_func, signature, entry, cc, ptx, cubin=None):
    """A numba-cuda ``CUDADispatcher`` for ``py_func`` specialized to ``signature`` whose one
    kernel runs the prebuilt code (entry ``entry`` of ``ptx``, and ``cubin`` when given) on
    devices of compute capability ``cc``; compilation disabled. Launch it as any kernel:
    ``d[grid, block, stream](*args)``. Raises NotPrebuilt when the PTX lacks the entry or
    needs external functions linked."""
    from numba.cuda import types
    from numba.cuda.core import sigutils
    from numba.cuda.dispatcher import CUDADispatcher, _Kernel
    entries, externs = ptx_facts(ptx)
    if entry not in entries:
        raise NotPrebuilt(f"the PTX has no entry {entry} (it has {', '.join(entries) or 'none'})")
    if externs:
        raise NotPrebuilt(f"the PTX of {entry} needs external functions linked: "
                          f"{', '.join(sorted(set(externs)))}")
    argtypes, restype = sigutils.normalize_signature(signature)
    if restype not in (None, types.void, types.none):
        raise NotPrebuilt(f"a kernel returns nothing; the signature returns {restype}")
    lib = library(py_func.__qualname__, entry, cc, ptx, cubin)
    kernel = _Kernel._rebuild(cooperative=False, name=entry,
                              signature=types.void(*argtypes), codelibrary=lib,
                              debug=False, lineinfo=False, call_helper=None, extensions=[])
    disp = CUDADispatcher(py_func, targetoptions={
        "debug": False, "lineinfo": False, "link": None, "opt": True, "fastmath": False,
        "device": False, "inline": "never", "forceinline": False, "extensions": None,
        "launch_bounds": None, "lto": False, "shared_memory_carveout": None})
    disp.add_overload(kernel, tuple(argtypes))
    disp._specialized = True             # as cuda.jit(signature): the one kernel, no typing
    disp.disable_compile()
    disp.prebuilt = True
    return disp


__all__ = ["NotPrebuilt", "cubin_from_ptx", "dispatcher", "library", "ptx_facts"]
