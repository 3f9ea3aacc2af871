"""CUDA kernel packages: every CUDA kernel of the catalog compiled to PTX ahead of time, on
a machine with no GPU (NVVM from numba-cuda's CUDA toolkit packages does the compiling).

Layout of a package directory::

    cuda-manifest.json    format, catalog hash, versions (dynshape, numba, numba-cuda, NVVM),
                          compute capabilities, one record per kernel file: family, dtype,
                          cc, kernel id range (none for the fused interpreter), entry name, file, size, SHA-256
    ptx/<family>-<dtype>-sm<cc>.ptx

:func:`build` writes one; :func:`check` reads one and says, by name, why it cannot serve a
host: another catalog or version, a compute capability it was not built for, a file whose
checksum differs.
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


def versions():
    import numba
    import numba_cuda

    import dynshape
    v = {"dynshape": dynshape.__version__, "numba": numba.__version__,
         "numba_cuda": getattr(numba_cuda, "__version__", "unknown")}
    try:
        from numba.cuda.cudadrv.nvvm import NVVM
        v["nvvm"] = ".".join(map(str, NVVM().get_version()))
    except Exception:               # the version is for the record; compiling still decides
        v["nvvm"] = "unknown"
    return v


def pairs(families=None, dtypes=None):
    """The (family, dtype) kernels of the CUDA catalog to compile (all by default)."""
    from dynshape_kernels.catalog import CATALOG, CUDA_FAMILIES

    from dynshape.errors import ArgumentError
    from dynshape_kernels.abi.fused_table import CUDA_FUSED_DTYPES
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
    from dynshape_kernels.cuda.drivers import compile_ptx
    fam, dt, cc = job
    return compile_ptx(fam, dt, cc)


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
          processes=None):
    """Compile the chosen CUDA kernels to PTX for every compute capability in ``ccs`` into
    package directory ``out`` (written to a temporary directory, then moved into place), in
    ``processes`` worker processes (default: one per CPU). Returns the manifest."""
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
        cat = CATALOG.on("cuda")
        jobs = [(fam, dt, cc) for fam, dt in pairs(families, dtypes) for cc in ccs]
        for (fam, dt, cc), ptx in zip(jobs, _compile_all(jobs, processes)):
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
            records.append({"family": fam, "dtype": dt, "cc": f"{cc[0]}{cc[1]}",
                            "kernel_ids": ids, "entry": entry.group(1),
                            "file": f"ptx/{name}", "size": len(data),
                            "sha256": hashlib.sha256(data).hexdigest()})
            if progress is not None:
                print(f"  {name}: {len(data)} bytes", file=progress, flush=True)
        manifest = {"format": FORMAT, "target": "cuda", "catalog_hash": CATALOG.hash,
                    "versions": versions(), "ccs": [f"{a}{b}" for a, b in ccs],
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


def check(path, cc=None, verify_files=True):
    """The manifest of the CUDA package at ``path`` if it can serve this installation (and
    compute capability ``cc``, a (major, minor) pair, when given); PackageError naming what
    differs otherwise."""
    from dynshape_kernels.catalog import CATALOG
    PackageError = _packages_error()
    mpath = os.path.join(path, MANIFEST)
    try:
        with open(mpath) as f:
            m = json.load(f)
    except FileNotFoundError:
        raise PackageError(f"{path}: not a CUDA kernel package (no {MANIFEST})") from None
    except (OSError, ValueError) as exc:
        raise PackageError(f"{mpath}: unreadable manifest ({exc})") from None
    for k in ("format", "catalog_hash", "versions", "ccs", "kernels"):
        if k not in m:
            raise PackageError(f"{mpath}: corrupt manifest, field {k!r} is missing")
    if m["format"] != FORMAT:
        raise PackageError(f"{path}: package format {m['format']} (this dynshape reads "
                           f"{FORMAT})")
    if m["catalog_hash"] != CATALOG.hash:
        raise PackageError(f"{path}: built for kernel catalog {m['catalog_hash']}, this "
                           f"installation has {CATALOG.hash}: rebuild it with this version")
    ours = versions()
    for k in ("dynshape", "numba", "numba_cuda"):
        if m["versions"].get(k) != ours[k]:
            raise PackageError(f"{path}: built with {k} {m['versions'].get(k)}, this host has "
                               f"{ours[k]}")
    if cc is not None:
        want = f"{cc[0]}{cc[1]}"
        if want not in m["ccs"]:
            raise PackageError(f"{path}: built for compute capabilities "
                               f"{', '.join(m['ccs'])}; this device is {cc[0]}.{cc[1]}")
    if verify_files:
        for r in m["kernels"]:
            fp = os.path.join(path, r["file"])
            try:
                with open(fp, "rb") as f:
                    data = f.read()
            except OSError:
                raise PackageError(f"{path}: kernel file {r['file']} is missing") from None
            if len(data) != r["size"] or hashlib.sha256(data).hexdigest() != r["sha256"]:
                raise PackageError(f"{path}: kernel file {r['file']} does not match its "
                                   f"checksum (corrupt or altered)")
    return m
