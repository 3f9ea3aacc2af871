"""CUDA drivers by (family, dtype): the kernel, its one signature, its launch geometry.

A driver is called exactly like the CPU driver of its family (the executors do not know the
target): flat operand buffers, then the table's arrays. :class:`Launcher` turns that call into
ONE kernel launch: operands become device arrays through the target's ``bridge``, the table's
arrays are uploaded once and cached by the bridge, and the grid covers entries x outer
index. Kernels are made once per (family, dtype) for one signature: compiled by numba-cuda,
or, with a CUDA kernel package installed (``CudaDrivers.use_package``), rebuilt from its
PTX/cubin without NVVM (``prebuilt``); the CUDA target refuses any other signature instead
of compiling on the run path.
"""
import importlib
import threading

import numpy as np

from ..abi.common_area import C_NOUTER
from ..abi.cuda_tiles import CUDA_ELEMENTWISE_TILES, CUDA_THREADS
from ..abi.storage import HALF_DTYPES, carrier, compute

#: the grid's y dimension (outer indices) is capped; kernels loop over the rest
MAX_GRID_Y = 65535


def kernel_types(dtype):
    """``(element dtype, computed dtype, kind)`` of a catalog dtype name: a half-precision
    format's kernels see its carrier, compute (and take attributes) in float32 and are of
    the format's kind (``abi.storage``, ``abi.switch_source.KINDS``); any other dtype is its
    own element and computed type, of kind integer or float."""
    if dtype in HALF_DTYPES:
        return np.dtype(carrier(dtype)), np.dtype(compute(dtype)), dtype
    dt = np.dtype(dtype)
    return dt, dt, "integer" if dt.kind in "iub" else "float"


class FamilyKernel:
    """How one family's kernel is made and called.

    ``factory``: ``module:function`` making the kernel's Python function from
    ``(numba type of the elements, kind)`` (``kernel_types``: a half-precision dtype's
    elements are its carrier). ``operands``: how many leading driver arguments are operand
    buffers (the output among them). ``tables``: how many driver arguments after them are
    table arrays (uploaded once). ``scalars``: whether a trailing attribute array is passed
    to the kernel as that many scalars of the dtype's computed type (float32 for half
    precision). ``shared``: static shared memory in elements of the dtype's carrier (for
    the launch geometry)."""

    def __init__(self, family, factory, operands, tables=2, scalars=0, shared=0,
                 operand_dtypes=None):
        self.family = family
        self.operand_dtypes = operand_dtypes   # per operand: a dtype name, or None (the kernel's)
        self.factory = factory
        self.operands = operands
        self.tables = tables
        self.scalars = scalars
        self.shared_elems = shared

    def shared_bytes(self, dtype):
        return self.shared_elems * kernel_types(dtype)[0].itemsize

    def python_function(self, dtype):
        module, fn = self.factory.split(":")
        from numba import from_dtype
        m = importlib.import_module(module)
        elems, _, kind = kernel_types(dtype)
        return getattr(m, fn)(from_dtype(elems), kind)

    def call(self, launcher, args):
        """One launch for a driver call: operands to the device, table arrays uploaded once,
        the attribute array as scalars, a block per entry and outer index."""
        br = launcher.bridge
        ops = [br.device(a) for a in args[:self.operands]]
        host = args[self.operands:self.operands + self.tables]
        tables = [br.table(a) for a in host]
        extra = []
        if self.scalars:
            attrs = args[self.operands + self.tables]
            extra = [attrs[i] for i in range(self.scalars)]
        common, entries = host[0], host[1]
        grid, block, _ = launch_geometry(self.family, launcher.dtype, entries.shape[0],
                                         int(common[C_NOUTER]), launcher.threads)
        if grid[0] == 0:
            return False
        launcher.kernel[grid, block, br.stream()](*ops, *tables, *extra)
        return True

    def signature(self, dtype):
        from numba import from_dtype, types
        elems, comp, _ = kernel_types(dtype)
        t = from_dtype(comp)
        i64_1 = types.Array(types.int64, 1, "C")
        i64_2 = types.Array(types.int64, 2, "C")
        kinds = self.operand_dtypes or (None,) * self.operands
        ops = [types.Array(from_dtype(np.dtype(k) if k else elems), 1, "C") for k in kinds]
        args = ops + [i64_1, i64_2][:self.tables] + [t] * self.scalars
        return types.void(*args)


_SQ = max(t[0] for t in CUDA_ELEMENTWISE_TILES)
FAMILIES = {
    "unary": FamilyKernel("unary", "dynshape_kernels.cuda.plane:make_unary", 2, scalars=2,
                          shared=_SQ * (_SQ + 1)),
    "copy": FamilyKernel("copy", "dynshape_kernels.cuda.plane:make_unary", 2, scalars=2,
                         shared=_SQ * (_SQ + 1)),
    "binary": FamilyKernel("binary", "dynshape_kernels.cuda.plane:make_binary", 3),
    # (x, out of the dtype, out int64, out float64): the reduction block names the one written
    "reduce": FamilyKernel("reduce", "dynshape_kernels.cuda.reduce:make_reduce", 4,
                           shared=0, operand_dtypes=(None, None, "int64", "float64")),
    "pool": FamilyKernel("pool", "dynshape_kernels.cuda.pool:make_pool", 2),
    # (x, weight, bias, out), the table, then (eps, has_weight, has_bias) as scalars
    "rowwise": FamilyKernel("rowwise", "dynshape_kernels.cuda.rowwise:make_rowwise", 4,
                            scalars=3),
}


def _steps_args(br, dtype, prog, pattrs, sides, geo):
    """The device arguments of an epilogue step program: the program and its attributes
    uploaded like tables (the attributes in the computed type: an empty program's
    placeholder may be of the element type), the sides as operands (a placeholder uploaded
    once), the per-call side geometry ``geo`` uploaded with the call."""
    comp = kernel_types(dtype)[1]
    if pattrs.dtype != comp:
        pattrs = _zeros(comp, 2)
    return ([br.table(prog), br.table(pattrs)] + [br.operand_or_constant(s) for s in sides]
            + [br.upload(np.ascontiguousarray(geo)) if len(prog) else br.table(_zeros(
                np.dtype(np.int64), geo.shape))])


_ZEROS = {}


def _zeros(dt, shape):
    """A shared read-only zero array (uploaded once by the bridge)."""
    key = (dt, shape)
    z = _ZEROS.get(key)
    if z is None:
        z = _ZEROS[key] = np.zeros(shape, dt)
        z.flags.writeable = False
    return z


class MatmulKernel(FamilyKernel):
    """The matmul family: called with the CPU matmul driver's 29 arguments (table entries,
    sizes, per-batch offsets, A/B/C/C_in/bias buffers with strides, alpha, beta, the
    activation code, the epilogue program with its attributes, side inputs and side geometry
    ``sgeo``, and the thread count), launched as one block per entry."""

    def __init__(self):
        super().__init__("matmul", "dynshape_kernels.cuda.matmul:make_matmul", 0,
                         shared=0)

    def shared_bytes(self, dtype):
        from .matmul import BK, NMAX, TMAX
        return (TMAX * BK + BK * NMAX) * kernel_types(dtype)[1].itemsize

    def signature(self, dtype):
        from numba import from_dtype, types
        from ..abi.step_program import MAX_SIDES
        elems, comp, _ = kernel_types(dtype)
        t = from_dtype(comp)
        arr = types.Array(from_dtype(elems), 1, "C")
        i8 = types.int64
        i2 = types.Array(i8, 2, "C")
        return types.void(i2, i8, i8, i8, i2,
                          arr, i8, i8, arr, i8, i8, arr, i8, i8, t, t, arr, i8, i8,
                          arr, i8, i8, i8, i8,
                          i2, types.Array(t, 1, "C"), *([arr] * MAX_SIDES), i2)

    def call(self, launcher, args):
        (entries, M, N, K, boffs, ab, ars, acs, bb, brs, bcs, cb, crs, ccs, alpha, beta,
         ib, irs, ics, sb, so, sst, hb, act, prog, pattrs, sides, sgeo, nthreads) = args
        br = launcher.bridge
        if len(entries) == 0:
            return False
        t = kernel_types(launcher.dtype)[1].type
        launcher.kernel[(len(entries), 1), (launcher.threads,), br.stream()](
            br.table(entries), M, N, K, br.upload(np.ascontiguousarray(boffs)),
            br.device(ab), ars, acs, br.device(bb), brs, bcs, br.device(cb), crs, ccs,
            t(alpha), t(beta), br.device(ib), irs, ics, br.device(sb), so, sst, hb, act,
            *_steps_args(br, launcher.dtype, prog, pattrs, sides, sgeo))
        return True


FAMILIES["matmul"] = MatmulKernel()


class FusedKernel(FamilyKernel):
    """The fused family (no catalog entry of its own: its steps are catalog ops): called
    with the CPU fused driver's arguments (x, out, int64 and float64 outputs, common,
    entries, program, program attributes, control block, side inputs); the program, its
    attributes and the control block are uploaded once like tables. A reduction over every
    element is one block (the kernel walks the whole table)."""

    def __init__(self):
        super().__init__("fused", "dynshape_kernels.cuda.fused:make_fused", 2)

    def shared_bytes(self, dtype):
        return CUDA_THREADS * 8          # the tails' float64 / int64 partials

    def signature(self, dtype):
        from numba import from_dtype, types
        from ..abi.step_program import MAX_SIDES
        elems, comp, _ = kernel_types(dtype)
        arr = types.Array(from_dtype(elems), 1, "C")
        attrs = types.Array(from_dtype(comp), 1, "C")      # float32 for half precision
        i1, i2 = types.Array(types.int64, 1, "C"), types.Array(types.int64, 2, "C")
        f1 = types.Array(types.float64, 1, "C")
        return types.void(arr, arr, i1, f1, i1, i2, i2, attrs, i1, *([arr] * MAX_SIDES))

    def call(self, launcher, args):
        from ..abi.fused_table import F_TAIL, T_REDUCE_ALL
        x, o, oi, of, common, entries, prog, pattrs, fctl, sides = args
        br = launcher.bridge
        grid, block, _ = launch_geometry("fused", launcher.dtype, entries.shape[0],
                                         int(common[C_NOUTER]), launcher.threads)
        if grid[0] == 0:
            return False
        if fctl[F_TAIL] == T_REDUCE_ALL:
            grid = (1, 1)
        launcher.kernel[grid, block, br.stream()](
            br.device(x), br.operand_or_constant(o), br.operand_or_constant(oi),
            br.operand_or_constant(of), br.table(common), br.table(entries), br.table(prog),
            br.table(pattrs), br.table(fctl), *[br.operand_or_constant(s) for s in sides])
        return True


FAMILIES["fused"] = FusedKernel()


class ConvKernel(FamilyKernel):
    """conv2d: called with the CPU conv driver's arguments (x, weights, bias, residual, y,
    common, entries, activation attributes, epilogue program with its attributes, side
    inputs and side geometry ``cgeo``); one block per entry."""

    def __init__(self):
        super().__init__("conv", "dynshape_kernels.cuda.conv:make_conv", 5, scalars=2)

    def signature(self, dtype):
        from numba import from_dtype, types
        from ..abi.step_program import MAX_SIDES
        elems, comp, _ = kernel_types(dtype)
        arr = types.Array(from_dtype(elems), 1, "C")
        t = from_dtype(comp)
        i1, i2 = types.Array(types.int64, 1, "C"), types.Array(types.int64, 2, "C")
        return types.void(arr, arr, arr, arr, arr, i1, i2, t, t,
                          i2, types.Array(t, 1, "C"), *([arr] * MAX_SIDES), i2)

    def call(self, launcher, args):
        x, w, b, r, y, common, entries, fattrs, prog, pattrs, sides, cgeo = args
        if len(entries) == 0:
            return False
        br = launcher.bridge
        t = kernel_types(launcher.dtype)[1].type
        launcher.kernel[(len(entries), 1), (launcher.threads,), br.stream()](
            br.device(x), br.device(w), br.operand_or_constant(b),
            br.operand_or_constant(r), br.device(y), br.table(common), br.table(entries),
            t(fattrs[0]), t(fattrs[1]),
            *_steps_args(br, launcher.dtype, prog, pattrs, sides, cgeo))
        return True


FAMILIES["conv"] = ConvKernel()


def register(kernel):
    """Add (or replace) a CUDA family's kernel description."""
    FAMILIES[kernel.family] = kernel


def launch_geometry(family, dtype, n_entries, n_outer, threads=CUDA_THREADS):
    """``(grid, block, shared bytes)`` of the one launch that runs a table: a block per
    entry and outer index (outer indices beyond the grid's y limit loop in the kernel)."""
    fk = FAMILIES[family]
    grid = (int(n_entries), int(min(max(n_outer, 1), MAX_GRID_Y)))
    return grid, (int(threads),), fk.shared_bytes(dtype)


def compile_ptx(family, dtype, cc):
    """PTX of the ``(family, dtype)`` kernel for compute capability ``cc`` (a (major,
    minor) pair); needs NVVM (numba-cuda's CUDA toolkit packages), no GPU."""
    from numba import cuda
    fk = FAMILIES[family]
    ptx, _ = cuda.compile_ptx(fk.python_function(dtype), fk.signature(dtype), cc=tuple(cc))
    return ptx


class Launcher:
    """The driver of ``(family, dtype)``: called like the CPU driver, runs one launch."""

    def __init__(self, family, dtype, kernel, bridge, threads):
        self.family = family
        self.dtype = dtype
        self.kernel = kernel
        self.bridge = bridge
        self.threads = threads
        self.spec = FAMILIES[family]
        self.launches = 0

    def __call__(self, *args):
        if self.spec.call(self, args):
            self.launches += 1


class CudaDrivers:
    """The CUDA target's kernel directory: ``get(family, dtype)`` gives a :class:`Launcher`
    whose kernel is made once (the first ``get``) for its one signature, with further
    compilation disabled: taken from the installed kernel package (``use_package``: a
    dispatcher over prebuilt code, see ``prebuilt``), else compiled by numba-cuda.
    ``bridge`` maps operands and tables to the device (see ``dynshape.cuda.bridge``);
    ``threads``: threads per block."""

    def __init__(self, bridge, threads=CUDA_THREADS):
        self.bridge = bridge
        self.threads = threads
        self._loaded = {}
        self._lock = threading.Lock()
        self._package = None

    def use_package(self, package):
        """Take kernels from ``package`` from now on (None: compile them again). A package
        has ``kernel(family, dtype)``: a launchable kernel, or None to compile it (or it
        raises). Launchers made before are dropped, so every later ``get`` goes to it."""
        with self._lock:
            self._package = package
            self._loaded = {}

    def get(self, family, dtype):
        key = (family, dtype)
        hit = self._loaded.get(key)
        if hit is None:
            with self._lock:
                hit = self._loaded.get(key)
                if hit is None:
                    hit = self._loaded[key] = Launcher(family, dtype,
                                                       self.compile(family, dtype),
                                                       self.bridge, self.threads)
        return hit

    def compile(self, family, dtype):
        from numba import cuda
        fk = FAMILIES.get(family)
        if fk is None:
            from dynshape_kernels.catalog import CUDA_FAMILIES
            raise KeyError(f"the cuda target has no {family!r} kernels; it has: "
                           f"{', '.join(CUDA_FAMILIES)}")
        if self._package is not None:
            k = self._package.kernel(family, dtype)
            if k is not None:
                return k
        k = cuda.jit(fk.signature(dtype))(fk.python_function(dtype))
        if hasattr(k, "disable_compile"):
            k.disable_compile()
        return k

    def loaded(self):
        return sorted(self._loaded)




__all__ = ["CudaDrivers", "FAMILIES", "FamilyKernel", "Launcher", "compile_ptx",
           "kernel_types", "launch_geometry", "register"]
