"""Run by test_cuda_package_load.py in a child process with numba-cuda's real CUDA support
(NUMBA_ENABLE_CUDASIM=0): ``python package_load_child.py MODE PACKAGE [WORKDIR]`` prints one
JSON report. Modes:

- ``nodevice``: load PACKAGE for cc 8.0 (no GPU needed) with every NVVM entry point of
  numba-cuda replaced by a recorder that raises; make every catalog kernel through the CUDA
  drivers; per kernel: its code (cubin bytes, or PTX linked by nvJitLink), numba-cuda's own
  argument flattening against the PTX entry's parameters, one launch through the Launcher
  (recorded at ``_Kernel.launch``).
- ``refusals``: broken copies of PACKAGE (in WORKDIR) and what ``load`` says about each.
- ``gpu``: load PACKAGE for the current device and run ops on never-seen shapes, counting
  NVVM compilations (needs a GPU).
"""
import ctypes
import json
import os
import re
import shutil
import sys

import numpy as np

NVVM_CALLS = []


def forbid_nvvm():
    """Every way numba-cuda reaches NVVM (the IR compiler, its wrapper class, the front end
    that feeds it, a kernel compiled from Python) records the call and raises."""
    from numba.cuda import compiler, dispatcher
    from numba.cuda.cudadrv import nvvm

    def recorder(name):
        def called(*a, **k):
            NVVM_CALLS.append(name)
            raise AssertionError(f"{name} called: NVVM is not to be used")
        return called
    nvvm.compile_ir = recorder("nvvm.compile_ir")
    nvvm.NVVM.__new__ = recorder("nvvm.NVVM")
    nvvm.CompilationUnit.__init__ = recorder("nvvm.CompilationUnit")
    compiler.compile_cuda = recorder("compiler.compile_cuda")
    dispatcher.compile_cuda = recorder("dispatcher.compile_cuda")
    dispatcher._Kernel.__init__ = recorder("dispatcher._Kernel.__init__")


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def param_sizes(ptx, entry):
    """Byte size of each parameter of the PTX entry, in order."""
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\((.*?)\)", ptx, re.DOTALL)
    sizes = []
    for p in m.group(1).split(","):
        arr = re.search(r"\.b8\s+[\w$]+\[(\d+)\]", p)
        if arr:
            sizes.append(int(arr.group(1)))
        else:
            sizes.append(int(re.search(r"\.[busf](\d+)\s", p + " ").group(1)) // 8)
    return sizes


def stand_in(ty, rank=2):
    """A host value numba-cuda flattens like the device value of type ``ty``: a strided
    memory view of host memory for an array (no device needed), a NumPy scalar otherwise."""
    from cuda.core.utils import StridedMemoryView
    from numba.cuda import types
    if isinstance(ty, types.Array):
        a = np.zeros((3,) * ty.ndim, dtype=np.dtype(str(ty.dtype)))
        return StridedMemoryView.from_dlpack(a, stream_ptr=-1), a
    return np.dtype(str(ty)).type(0), None


def flatten(kernel, args):
    """numba-cuda's own flattening (``_Kernel._prepare_args``) of ``args``: byte sizes."""
    out, retr = [], []
    for t, v in zip(kernel.argument_types, args):
        kernel._prepare_args(t, v, 0, retr, out)
    return [8 if isinstance(v, int) else ctypes.sizeof(v) for v in out], out


def nodevice(path):
    forbid_nvvm()
    from numba.cuda.core import sigutils

    import dynshape  # noqa: F401
    from dynshape.cuda import package
    from dynshape.cuda.target import DRIVERS
    from dynshape_kernels.cuda import drivers
    pkg = package.load(path, cc=(8, 0))
    rep = {"kernels": {}, "seconds": pkg.seconds, "describe": pkg.describe()}
    by = {(r["family"], r["dtype"]): r for r in pkg.manifest["kernels"] if r["cc"] == "80"}
    for fam, dt in package.pairs():
        launcher = DRIVERS.get(fam, dt)
        disp = launcher.kernel
        (kernel,) = disp.overloads.values()
        rec = by[(fam, dt)]
        ptx = read(os.path.join(path, rec["file"]))
        code = kernel.library.get_cubin((8, 0))
        want = read(os.path.join(path, rec["cubin"]["file"]), "rb") if rec.get("cubin") else None
        args = [stand_in(t)[0] for t in kernel.argument_types]
        sizes, _ = flatten(kernel, args)
        sig_args, _ = sigutils.normalize_signature(drivers.FAMILIES[fam].signature(dt))
        rep["kernels"][f"{fam}/{dt}"] = {
            "prebuilt": getattr(disp, "prebuilt", False), "specialized": disp.specialized,
            "can_compile": disp._can_compile, "entry": kernel.entry_name == rec["entry"],
            "signature_as_jit": tuple(disp.overloads) == (tuple(sig_args),),
            "kernel_ids": rec["kernel_ids"], "code": pkg.code[(fam, dt)],
            "cubin_is_packaged": want is not None and bytes(code.code) == want,
            "code_type": code.code_type,
            "flattened": sizes, "ptx_params": param_sizes(ptx, rec["entry"]),
        }
    rep["launch"] = launch_through_launcher(DRIVERS)
    rep["nvvm_calls"] = NVVM_CALLS
    return rep


class HostBridge:
    """The bridge's part in a launch, on host memory: operands and tables as strided memory
    views (numba-cuda flattens them as it does device arrays), the default stream."""

    def __init__(self):
        self.keep = []

    def device(self, a):
        from cuda.core.utils import StridedMemoryView
        self.keep.append(a)
        return StridedMemoryView.from_dlpack(np.ascontiguousarray(a), stream_ptr=-1)

    table = upload = operand_or_constant = device

    def stream(self):
        return 0


def launch_through_launcher(DRIVERS):
    """One unary launch through the CUDA Launcher and the packaged dispatcher, recorded where
    numba-cuda hands it to the driver (``_Kernel.launch``): grid, block, stream, shared
    memory and numba-cuda's flattening of the arguments."""
    from dynshape_kernels.abi.common_area import C_NOUTER
    from dynshape_kernels.cuda import drivers
    launcher = DRIVERS.get("unary", "float32")
    (kernel,) = launcher.kernel.overloads.values()
    seen = []
    kernel.launch = lambda args, grid, block, stream=0, shmem=0: seen.append(
        (args, grid, block, stream, shmem))
    host = drivers.Launcher("unary", "float32", launcher.kernel, HostBridge(), 256)
    common = np.zeros(max(C_NOUTER + 1, 64), np.int64)
    common[C_NOUTER] = 3
    entries = np.zeros((5, 8), np.int64)
    x = np.ones(40, np.float32)
    host(x, np.empty_like(x), common, entries, np.array([0.5, 2.0], np.float32))
    (args, grid, block, stream, shmem), = seen
    want = drivers.launch_geometry("unary", "float32", 5, 3, 256)
    sizes, flat = flatten(kernel, args)
    return {"grid": list(grid), "block": list(block), "want_grid": list(want[0]),
            "want_block": list(want[1]), "stream_handle": int(stream.handle),
            "shared": shmem, "n_args": len(args), "flattened": sizes,
            "scalars": [float(v.value) for v in flat[-2:]], "launches": host.launches}


def refusals(path, work):
    import warnings

    import dynshape  # noqa: F401
    from dynshape.cuda import package
    from dynshape.cuda.target import DRIVERS
    from dynshape.packages.manifest import PackageError, PackageWarning
    rep = {}

    def variant(name, edit=None, manifest=None):
        d = os.path.join(work, name)
        shutil.copytree(path, d)
        m = json.loads(read(os.path.join(d, "cuda-manifest.json")))
        if edit:
            edit(d, m)
        with open(os.path.join(d, "cuda-manifest.json"), "w") as f:
            f.write(manifest if manifest is not None else json.dumps(m))
        return d

    def attempt(name, d, **kw):
        try:
            package.load(d, **kw)
            rep[name] = None
        except PackageError as exc:
            rep[name] = str(exc)
        rep[name + ":installed"] = DRIVERS._package is not None or package.active() is not None

    def first(m, cc="80", key="file"):
        return next(r for r in m["kernels"] if r["cc"] == cc and (key == "file" or r.get(key)))

    def corrupt(key, cc="80"):
        def edit(d, m):
            r = first(m, cc, key)
            f = os.path.join(d, (r["cubin"] if key == "cubin" else r)["file"])
            data = read(f, "rb")
            with open(f, "wb") as out:
                out.write(data[:-1] + bytes([data[-1] ^ 1]))
        return edit

    attempt("cc75", path, cc=(7, 5))
    attempt("ptx_checksum", variant("ptx_checksum", corrupt("file")), cc=(8, 0))
    attempt("cubin_checksum", variant("cubin_checksum", corrupt("cubin")), cc=(8, 0))
    attempt("other_cc_checksum", variant("other_cc", corrupt("file", "90")), cc=(8, 0))
    attempt("missing_ptx", variant("missing_ptx", lambda d, m: os.remove(
        os.path.join(d, first(m)["file"]))), cc=(8, 0))
    attempt("missing_cubin", variant("missing_cubin", lambda d, m: os.remove(
        os.path.join(d, first(m, key="cubin")["cubin"]["file"]))), cc=(8, 0))
    attempt("not_json", variant("not_json", manifest="{not json"), cc=(8, 0))
    attempt("no_kernels_field", variant("no_kernels", lambda d, m: m.pop("kernels")),
            cc=(8, 0))
    attempt("record_without_entry", variant("no_entry", lambda d, m: first(m).pop("entry")),
            cc=(8, 0))
    attempt("wrong_entry", variant("wrong_entry", lambda d, m: first(m).update(
        entry="not_the_kernel")), cc=(8, 0))
    attempt("numba_cuda_version", variant("version", lambda d, m: m["versions"].update(
        numba_cuda="0.0.1")), cc=(8, 0))
    attempt("catalog", variant("catalog", lambda d, m: m.update(catalog_hash="0" * 16)),
            cc=(8, 0))
    attempt("unknown_family", variant("family", lambda d, m: first(m).update(
        family="warp")), cc=(8, 0))
    attempt("not_a_package", work, cc=(8, 0))
    attempt("no_device_no_cc", path)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        pkg = package.load(os.path.join(work, "version"), cc=(8, 0), allow_compile=True)
    rep["allow_compile"] = {"refused": pkg.refused, "active": pkg.active,
                            "warnings": [f"{x.category.__name__}: {x.message}" for x in w
                                         if issubclass(x.category, PackageWarning)],
                            "installed": package.active() is not None}
    # a package without cubins: the PTX, assembled by the CUDA linker (not NVVM)
    forbid_nvvm()
    d = variant("ptx_only", lambda d, m: [r.pop("cubin", None) for r in m["kernels"]])
    shutil.rmtree(os.path.join(d, "cubin"))
    pkg = package.load(d, cc=(8, 0))
    (kernel,) = DRIVERS.get("binary", "float32").kernel.overloads.values()
    code = kernel.library.get_cubin((8, 0))
    rep["ptx_only"] = {"code": sorted(set(pkg.code.values())), "code_type": code.code_type,
                       "cubin_bytes": len(bytes(code.code)), "nvvm_calls": NVVM_CALLS}
    try:                                 # another compute capability would need NVVM
        kernel.library.get_cubin((9, 0))
        rep["other_cc"] = None
    except RuntimeError as exc:
        rep["other_cc"] = f"{type(exc).__name__}: {exc}"
    package.unload()
    rep["unloaded"] = DRIVERS._package is None and package.active() is None
    return rep


def gpu(path):
    """On a GPU host: load for the current device, then ops on shapes never seen, with NVVM
    forbidden; results against NumPy."""
    forbid_nvvm()
    from numba import cuda

    import dynshape
    from dynshape.cuda import package
    from dynshape.cuda.target import DRIVERS
    pkg = dynshape.load_package(path)
    rng = np.random.default_rng(0)
    errors = []
    for shape in [(3, 517), (37, 1999), (2, 5, 129), (1, 70001)]:
        x = rng.standard_normal(shape).astype(np.float32)
        b = rng.standard_normal(shape[-1:]).astype(np.float32)
        dx, db = cuda.to_device(x), cuda.to_device(b)
        got = {"relu": dynshape.run("relu", dx).copy_to_host(),
               "add": dynshape.run("add", dx, db).copy_to_host()}
        want = {"relu": np.maximum(x, 0), "add": x + b}
        for k, v in got.items():
            if not np.allclose(v, want[k], rtol=1e-6, atol=1e-6):
                errors.append(f"{k} {shape}")
    cuda.synchronize()
    launchers = {f"{f}/{d}": DRIVERS.get(f, d) for f, d in DRIVERS.loaded()}
    return {"nvvm_calls": NVVM_CALLS, "errors": errors, "package": pkg.describe(),
            "prebuilt": {k: getattr(v.kernel, "prebuilt", False) for k, v in launchers.items()},
            "launches": {k: v.launches for k, v in launchers.items()},
            "active": package.active() is pkg}


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "nodevice":
        out = nodevice(path)
    elif mode == "refusals":
        out = refusals(path, sys.argv[3])
    else:
        out = gpu(path)
    print("REPORT " + json.dumps(out))
