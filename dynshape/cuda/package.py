"""CUDA kernel packages: every CUDA kernel of the catalog compiled to PTX ahead of time, on
a machine with no GPU (NVVM from numba-cuda's CUDA toolkit packages does the compiling), and
assembled to cubin where nvJitLink is available (no GPU needed either).

Layout of a package directory::

    cuda-manifest.json    format, catalog hash, versions (dynshape, numba, numba-cuda, NVVM,
                          nvJitLink), compute capabilities, whether cubins were made (or why
                          not), one record per kernel: family, dtype, cc, kernel id range
                          (none for the fused interpreter), entry name, PTX file, size,
                          SHA-256, and its cubin (file, size, SHA-256) when made
    ptx/<family>-<dtype>-sm<cc>.ptx
    cubin/<family>-<dtype>-sm<cc>.cubin

:func:`build` writes one; :func:`check` reads one and says, by name, why it cannot serve a
host: another catalog or version, a compute capability it was not built for, a file missing
or whose checksum differs. :func:`load` checks one and installs it: from then on the CUDA
target's kernels are numba-cuda dispatchers over the packaged code
(``dynshape_kernels.cuda.prebuilt``), loaded through the CUDA driver on first launch (the
cubin as it is, or the PTX assembled by the CUDA linker); nothing is compiled with NVVM.
``dynshape.load_package(DIR)`` and ``DYNSHAPE_PACKAGE=DIR`` do the same for a directory
holding a ``cuda-manifest.json``.

A CUDA package is checked (every file against its manifest's SHA-256) but not signed: its
PTX and cubins are device code loaded by the CUDA driver, nothing on the host unpickles or
runs them.
"""
import hashlib
import json
import os
import re
import shutil
import tempfile

FORMAT = 1
MANIFEST = "cuda-manifest.json"


def _packages_error():
    from dynshape.packages.manifest import PackageError
    return PackageError


def parse_ccs(text):
    """``"80,90"`` or ``["8.0", "90"]`` -> ((8, 0), (9, 0)); ArgumentError otherwise."""
    from dynshape.errors import ArgumentError
    items = text.split(",") if isinstance(text, str) else list(text)
    out = []
    for it in items:
        s = str(it).strip().replace(".", "")
        if not re.fullmatch(r"[1-9][0-9]", s):
            raise ArgumentError(f"compute capability {it!r} is not understood; accepted: two "
                                f"digits like 80 or 90 (or 8.0), comma separated")
        out.append((int(s[0]), int(s[1])))
    return tuple(sorted(set(out)))


def versions(tools=True):
    """The versions a package records: dynshape, Numba, numba-cuda and, with ``tools``, the
    NVVM and nvJitLink that build it (loading compares the first three and needs neither
    tool)."""
    import numba
    import numba_cuda

    import dynshape
    v = {"dynshape": dynshape.__version__, "numba": numba.__version__,
         "numba_cuda": getattr(numba_cuda, "__version__", "unknown")}
    if not tools:
        return v
    try:
        from numba.cuda.cudadrv.nvvm import NVVM
        v["nvvm"] = ".".join(map(str, NVVM().get_version()))
    except Exception:               # the version is for the record; compiling still decides
        v["nvvm"] = "unknown"
    try:
        from cuda.bindings import nvjitlink
        v["nvjitlink"] = ".".join(map(str, nvjitlink.version()))
    except Exception:  # noqa: BLE001 -- for the record only: without it, cubins are not made
        v["nvjitlink"] = "unknown"
    return v


def pairs(families=None, dtypes=None):
    """The (family, dtype) kernels of the CUDA catalog to compile (all by default)."""
    from dynshape.errors import ArgumentError
    from dynshape_kernels.abi.fused_table import CUDA_FUSED_DTYPES
    from dynshape_kernels.catalog import CATALOG, CUDA_FAMILIES
    fams = dict(CATALOG.by_target["cuda"])
    known = list(CUDA_FAMILIES) + ["fused"]           # fused: no catalog entry (its steps are)
    chosen = list(families or known)
    bad = [f for f in chosen if f not in known]
    if bad:
        raise ArgumentError(f"no CUDA kernels for {', '.join(bad)}; accepted: "
                            f"{', '.join(known)}")
    out = [(f, d) for f in chosen
           for d in (fams[f].dtypes if f in fams else CUDA_FUSED_DTYPES)
           if not dtypes or d in dtypes]
    if not out:
        raise ArgumentError(f"no CUDA kernel of families {chosen} has dtype {dtypes}")
    return out


def _compile_one(job):
    """``(PTX, cubin bytes or None, why there is no cubin)`` of one (family, dtype, cc, cubin)
    job: the PTX from NVVM, the cubin from nvJitLink (both without a GPU)."""
    from dynshape_kernels.cuda.drivers import compile_ptx
    fam, dt, cc, want_cubin = job
    ptx = compile_ptx(fam, dt, cc)
    if not want_cubin:
        return ptx, None, "not asked for (cubin=False)"
    from dynshape_kernels.cuda.prebuilt import cubin_from_ptx
    try:
        return ptx, cubin_from_ptx(ptx, cc), None
    except Exception as exc:  # noqa: BLE001 -- any linker failure: a PTX-only record
        return ptx, None, f"{type(exc).__name__}: {exc}"


def _compile_all(jobs, processes):
    """PTX of every (family, dtype, cc) job, in order; in ``processes`` worker processes
    (NVVM compiles one kernel at a time per process)."""
    if processes <= 1 or len(jobs) < 2:
        return [_compile_one(j) for j in jobs]
    import concurrent.futures
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(processes, mp_context=ctx) as ex:
        return list(ex.map(_compile_one, jobs))


def build(out, ccs=((8, 0), (9, 0)), families=None, dtypes=None, force=False, progress=None,
          processes=None, cubin=True):
    """Compile the chosen CUDA kernels to PTX for every compute capability in ``ccs`` into
    package directory ``out`` (written to a temporary directory, then moved into place), in
    ``processes`` worker processes (default: one per CPU), and, with ``cubin`` (default),
    assemble each PTX to a cubin where nvJitLink allows (the manifest's ``cubin`` says why
    not otherwise; such a package loads from its PTX). Returns the manifest."""
    processes = processes or os.cpu_count() or 1
    from dynshape.cuda.arrays import simulating
    from dynshape_kernels.catalog import CATALOG
    PackageError = _packages_error()
    if simulating():
        raise PackageError("PTX needs the CUDA compiler, not the simulator: unset "
                           "NUMBA_ENABLE_CUDASIM to pregenerate CUDA kernels")
    if os.path.exists(out) and not force:
        raise PackageError(f"{out} exists; pass force=True (--force) to replace it")
    work = tempfile.mkdtemp(prefix=".dynshape-cuda-", dir=os.path.dirname(os.path.abspath(out)))
    try:
        os.makedirs(os.path.join(work, "ptx"))
        records = []
        no_cubin = set()
        cat = CATALOG.on("cuda")
        jobs = [(fam, dt, cc, cubin) for fam, dt in pairs(families, dtypes) for cc in ccs]
        for (fam, dt, cc, _), (ptx, cub, why) in zip(jobs, _compile_all(jobs, processes)):
            ids = None
            if fam in cat.families:
                spec = cat.families[fam]
                base = cat.family_base(fam, dt)
                ids = [base, base + len(spec.ops) * len(spec.tiles)]
            name = f"{fam}-{dt}-sm{cc[0]}{cc[1]}.ptx"
            data = ptx.encode()
            with open(os.path.join(work, "ptx", name), "wb") as f:
                f.write(data)
            entry = re.search(r"\.entry\s+([\w$]+)", ptx)
            rec = {"family": fam, "dtype": dt, "cc": f"{cc[0]}{cc[1]}",
                   "kernel_ids": ids, "entry": entry.group(1),
                   "file": f"ptx/{name}", "size": len(data),
                   "sha256": hashlib.sha256(data).hexdigest()}
            note = ""
            if cub is not None:
                cname = f"cubin/{name[:-len('.ptx')]}.cubin"
                os.makedirs(os.path.join(work, "cubin"), exist_ok=True)
                with open(os.path.join(work, cname), "wb") as f:
                    f.write(cub)
                rec["cubin"] = {"file": cname, "size": len(cub),
                                "sha256": hashlib.sha256(cub).hexdigest()}
                note = f", cubin {len(cub)} bytes"
            else:
                no_cubin.add(why)
            records.append(rec)
            if progress is not None:
                print(f"  {name}: {len(data)} bytes{note}", file=progress, flush=True)
        manifest = {"format": FORMAT, "target": "cuda", "catalog_hash": CATALOG.hash,
                    "versions": versions(), "ccs": [f"{a}{b}" for a, b in ccs],
                    "cubin": ("all" if not no_cubin else
                              ("none" if not any("cubin" in r for r in records) else "some")
                              + ": " + "; ".join(sorted(no_cubin))),
                    "kernels": records}
        with open(os.path.join(work, MANIFEST), "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
        if os.path.exists(out):
            shutil.rmtree(out)
        os.replace(work, out)
        return manifest
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _read_manifest(path):
    """The manifest of the package at ``path``; PackageError when there is none or it is not
    a readable manifest."""
    PackageError = _packages_error()
    mpath = os.path.join(path, MANIFEST)
    try:
        with open(mpath) as f:
            m = json.load(f)
    except FileNotFoundError:
        raise PackageError(f"{path}: not a CUDA kernel package (no {MANIFEST})") from None
    except (OSError, ValueError) as exc:
        raise PackageError(f"{mpath}: unreadable manifest ({exc})") from None
    if not isinstance(m, dict):
        raise PackageError(f"{mpath}: corrupt manifest, not a JSON object")
    for k in ("format", "catalog_hash", "versions", "ccs", "kernels"):
        if k not in m:
            raise PackageError(f"{mpath}: corrupt manifest, field {k!r} is missing")
    if m["format"] != FORMAT:
        raise PackageError(f"{path}: package format {m['format']} (this dynshape reads "
                           f"{FORMAT})")
    for i, r in enumerate(m["kernels"]):
        missing = [k for k in ("family", "dtype", "cc", "entry", "file", "size", "sha256")
                   if not isinstance(r, dict) or k not in r]
        if missing:
            raise PackageError(f"{mpath}: corrupt manifest, kernel record {i} lacks "
                               f"{', '.join(missing)}")
    return m


def _incompatibility(path, m, cc):
    """Why the package cannot serve this installation (and compute capability ``cc``), or
    None."""
    from dynshape_kernels.catalog import CATALOG
    if m["catalog_hash"] != CATALOG.hash:
        return (f"{path}: built for kernel catalog {m['catalog_hash']}, this "
                f"installation has {CATALOG.hash}: rebuild it with this version")
    ours = versions(tools=False)
    for k in ("dynshape", "numba", "numba_cuda"):
        if m["versions"].get(k) != ours[k]:
            return (f"{path}: built with {k} {m['versions'].get(k)}, this host has "
                    f"{ours[k]}")
    if cc is not None:
        want = f"{cc[0]}{cc[1]}"
        if want not in m["ccs"]:
            return (f"{path}: built for compute capabilities "
                    f"{', '.join(m['ccs'])}; this device is {cc[0]}.{cc[1]}")
    return None


def _read_verified(path, rec):
    """The bytes of the file ``rec`` names (a kernel record or its ``cubin``), checked against
    the record's size and SHA-256; PackageError naming the file otherwise."""
    PackageError = _packages_error()
    fp = os.path.join(path, rec["file"])
    try:
        with open(fp, "rb") as f:
            data = f.read()
    except OSError:
        raise PackageError(f"{path}: kernel file {rec['file']} is missing") from None
    if len(data) != rec["size"] or hashlib.sha256(data).hexdigest() != rec["sha256"]:
        raise PackageError(f"{path}: kernel file {rec['file']} does not match its "
                           f"checksum (corrupt or altered)")
    return data


def _files(rec):
    return [rec] + ([rec["cubin"]] if rec.get("cubin") else [])


def check(path, cc=None, verify_files=True):
    """The manifest of the CUDA package at ``path`` if it can serve this installation (and
    compute capability ``cc``, a (major, minor) pair, when given); PackageError naming what
    differs otherwise: no or an unreadable manifest, another format, kernel catalog,
    dynshape, Numba or numba-cuda version, a compute capability it was not built for, or
    (``verify_files``) a PTX or cubin file missing or not matching its SHA-256."""
    m = _read_manifest(path)
    why = _incompatibility(path, m, cc)
    if why:
        raise _packages_error()(why)
    if verify_files:
        for r in m["kernels"]:
            for f in _files(r):
                _read_verified(path, f)
    return m


class CudaKernelPackage:
    """A checked CUDA kernel package installed for compute capability ``cc``: ``kernels``
    maps (family, dtype) to a numba-cuda dispatcher over the packaged code (cubin when the
    package has one, else PTX); ``code`` says which ("cubin" or "ptx") per kernel.
    ``allow_compile``: a kernel the package lacks compiles with NVVM instead of raising.
    ``refused``: why the package is not used (only with ``allow_compile``)."""

    def __init__(self, path, manifest, cc, allow_compile=False):
        self.path = os.path.abspath(path)
        self.manifest = manifest
        self.cc = tuple(cc)
        self.allow_compile = bool(allow_compile)
        self.kernels = {}
        self.code = {}
        self.active = False
        self.refused = None
        self.seconds = 0.0

    def kernel(self, family, dtype):
        """The packaged dispatcher of ``(family, dtype)``; None when the package lacks it
        and ``allow_compile`` (the caller compiles), PackageError naming it otherwise."""
        hit = self.kernels.get((family, dtype))
        if hit is None and not self.allow_compile:
            held = ", ".join(f"{f}/{d}" for f, d in sorted(self.kernels)) or "none"
            raise _packages_error()(
                f"CUDA kernel {family}/{dtype} is not in the CUDA kernel package {self.path} "
                f"(it holds {held}) and compiling is disabled. Add it with `dynshape "
                f"pregenerate --target cuda --family {family} --dtype {dtype} ...`, or load "
                f"the package with allow_compile=True.")
        return hit

    def describe(self):
        state = "active" if self.active else f"not used: {self.refused}"
        cubins = sum(c == "cubin" for c in self.code.values())
        return (f"CUDA kernel package {self.path} ({state}) for cc {self.cc[0]}.{self.cc[1]}: "
                f"{len(self.kernels)} kernels ({cubins} from cubin, "
                f"{len(self.kernels) - cubins} from PTX), catalog {self.manifest['catalog_hash']}"
                f", numba-cuda {self.manifest['versions'].get('numba_cuda')}")

    def __repr__(self):
        return (f"<CudaKernelPackage {self.path} cc={self.cc[0]}.{self.cc[1]} "
                f"kernels={len(self.kernels)} active={self.active}>")


_active = None


def active():
    """The installed CUDA package, or None."""
    return _active


def is_package(path):
    """Whether ``path`` is a CUDA kernel package directory (holds a ``cuda-manifest.json``)."""
    return os.path.isfile(os.path.join(path, MANIFEST))


def _device_cc(cc):
    """The compute capability to load for: the current device's; ``cc`` only where no device
    is present (preparing or inspecting a package), or when it is the device's."""
    from numba import cuda

    from dynshape.errors import ArgumentError
    PackageError = _packages_error()
    if cc is not None:
        cc = parse_ccs(["".join(map(str, cc)) if isinstance(cc, (tuple, list)) else cc])
        if len(cc) != 1:
            raise ArgumentError(f"one compute capability, not {cc}")
        cc = cc[0]
    if not cuda.is_available():           # False without a driver or device, never raises
        if cc is None:
            raise PackageError("no CUDA device here: a CUDA package loads for the current "
                               "device's compute capability (pass cc=(8, 0), say, to check "
                               "and prepare it for one without a device)")
        return cc
    dev = tuple(cuda.get_current_device().compute_capability)
    if cc is not None and cc != dev:
        raise PackageError(f"asked to load for compute capability {cc[0]}.{cc[1]}, but the "
                           f"current device is {dev[0]}.{dev[1]}")
    return dev


def load(path, cc=None, allow_compile=False):
    """Check the CUDA kernel package at ``path`` and take every CUDA kernel from it from now
    on. Returns the :class:`CudaKernelPackage`.

    Contract: on return (package ``active``), every (family, dtype) kernel the package holds
    for the device's compute capability is a numba-cuda dispatcher over the packaged code,
    launched exactly as a kernel numba-cuda compiled (same arguments, grid, block and
    stream); its module is loaded through the CUDA driver at the first launch (the packaged
    cubin, or the packaged PTX assembled by the CUDA linker) and nothing is ever compiled
    with NVVM. A kernel the package lacks raises PackageError naming its family and dtype
    (``allow_compile=True``: it compiles with NVVM instead). Launchers made before are
    dropped: the next call takes its kernel from the package.

    ``cc``: the compute capability to load for; default the current device's. Without a
    device, pass it to check a package and build its kernels (they launch only on a device).

    Raises PackageError, installing nothing, under the CUDA simulator, without a device and
    ``cc``, for a missing, unreadable or corrupt manifest, a missing or altered file, a
    kernel whose PTX lacks its entry or needs functions linked, or a family this dynshape
    does not have, and for a package built for another kernel catalog, dynshape, Numba or
    numba-cuda version or compute capability. With ``allow_compile=True`` the latter only
    warns (:class:`dynshape.PackageWarning`): the package is not used (``refused`` says
    why) and kernels compile as without a package.
    """
    import time
    import warnings

    from dynshape.cuda.arrays import simulating
    from dynshape.packages.manifest import PackageWarning
    global _active
    PackageError = _packages_error()
    t0 = time.perf_counter()
    if simulating():
        raise PackageError("a CUDA package holds PTX and cubins for a device; the CUDA "
                           "simulator (NUMBA_ENABLE_CUDASIM=1) runs Python kernels instead: "
                           "unset it to load the package")
    cc = _device_cc(cc)
    m = _read_manifest(path)
    pkg = CudaKernelPackage(path, m, cc, allow_compile)
    why = _incompatibility(path, m, cc)
    if why:
        if not allow_compile:
            raise PackageError(why)
        pkg.refused = why
        warnings.warn(f"{why}; the CUDA package is not used, kernels compile instead "
                      f"(allow_compile=True)", PackageWarning, stacklevel=2)
        return pkg
    from dynshape_kernels.cuda import prebuilt
    from dynshape_kernels.cuda.drivers import FAMILIES
    want = f"{cc[0]}{cc[1]}"
    for r in m["kernels"]:
        if r["cc"] != want:
            continue
        ptx = _read_verified(path, r).decode()
        cubin = _read_verified(path, r["cubin"]) if r.get("cubin") else None
        fk = FAMILIES.get(r["family"])
        if fk is None:
            raise PackageError(f"{path}: kernel file {r['file']} is of family "
                               f"{r['family']!r}, which this dynshape has no CUDA kernels "
                               f"for (it has {', '.join(sorted(FAMILIES))})")
        try:
            disp = prebuilt.dispatcher(fk.python_function(r["dtype"]),
                                       fk.signature(r["dtype"]), r["entry"], cc, ptx, cubin)
        except prebuilt.NotPrebuilt as exc:
            raise PackageError(f"{path}: kernel file {r['file']}: {exc}") from None
        pkg.kernels[(r["family"], r["dtype"])] = disp
        pkg.code[(r["family"], r["dtype"])] = "cubin" if cubin is not None else "ptx"
    for r in m["kernels"]:               # the other compute capabilities' files: intact too
        if r["cc"] != want:
            for f in _files(r):
                _read_verified(path, f)
    from dynshape.cuda.target import DRIVERS
    DRIVERS.use_package(pkg)
    if _active is not None:
        _active.active = False
    pkg.active = True
    _active = pkg
    pkg.seconds = time.perf_counter() - t0
    return pkg


def unload():
    """Stop taking CUDA kernels from the installed package: the next call of each kernel
    compiles it with NVVM again (on first use)."""
    global _active
    if _active is None:
        return
    from dynshape.cuda.target import DRIVERS
    DRIVERS.use_package(None)
    _active.active = False
    _active = None
