"""The kernel-package format: file layout, manifest (host facts, drivers, files with size and
SHA-256, checksum) and the compatibility check against this host. Also the package errors."""
import contextlib
import hashlib
import json
import os
import sys

from dynshape_kernels import cache_locator
from dynshape_kernels.compile_child import PACKAGE_ENV

from dynshape.errors import DynshapeError

FORMAT = 1
MANIFEST = "manifest.json"
CACHE = "cache"
ENV = PACKAGE_ENV                       # read by compiling children too, before dynshape
ENV_ALLOW_COMPILE = "DYNSHAPE_PACKAGE_ALLOW_COMPILE"
ENV_ALLOW_UNSIGNED = "DYNSHAPE_PACKAGE_ALLOW_UNSIGNED"
SIGNATURE = "signature.json"           # dynshape.packages.signing.SIGNATURE (not imported at start)
_OURS = ("dynshape", "dynshape_kernels")
_REQUIRED = ("format", "python", "versions", "machine", "catalog_hash", "drivers", "functions",
             "indexes", "files", "manifest_sha256")


class PackageError(DynshapeError, RuntimeError):
    """A kernel package that is corrupt, incomplete or built for another host or version, or
    that lacks compiled code a call needs while compiling is disabled."""


class PackageWarning(UserWarning):
    """A kernel package was not used and dynshape compiles instead (``allow_compile``)."""


class UnsignedPackageWarning(UserWarning):
    """A kernel package without a signature by a trusted key was loaded (``allow_unsigned``):
    the code in it runs although nobody trusted here vouched for it."""


# ---------------------------------------------------------------- host facts


def host_facts():
    """What a package must match on this host: python, versions, machine, catalog hash.

    ``machine`` is Numba's codegen key (target triple, CPU name, CPU features), which honours
    ``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES``, plus the CPU llvmlite detects, for the record.
    """
    import llvmlite
    import llvmlite.binding as ll
    import numba
    import numpy
    from dynshape_kernels.catalog import CATALOG
    from numba.core.registry import cpu_target

    import dynshape
    triple, cpu, features = cpu_target.target_context.codegen().magic_tuple()
    return {
        "python": {"implementation": sys.implementation.name,
                   "version": "%d.%d" % sys.version_info[:2],
                   "abiflags": getattr(sys, "abiflags", "")},
        "versions": {"dynshape": dynshape.__version__, "numba": numba.__version__,
                     "llvmlite": llvmlite.__version__,
                     "llvm": ".".join(map(str, ll.llvm_version_info)),
                     "numpy": numpy.__version__},
        "machine": {"triple": triple, "cpu_name": cpu, "cpu_features": features,
                    "host_cpu_name": ll.get_host_cpu_name(),
                    "host_cpu_features": ll.get_host_cpu_features().flatten()},
        "catalog_hash": CATALOG.hash,
    }


def _features_diff(theirs, ours):
    a, b = set(theirs.split(",")) - {""}, set(ours.split(",")) - {""}
    diff = sorted(a ^ b)
    return ", ".join(diff[:6]) + (" ..." if len(diff) > 6 else "")


def incompatibilities(manifest, facts=None):
    """Why the package cannot serve this host (empty list: it can). NumPy must match in its
    major.minor version, everything else exactly; a package's source stamps must equal the
    stamps of this installation's sources."""
    facts = facts or host_facts()
    out = []
    for k, ours in facts["python"].items():
        if manifest["python"].get(k) != ours:
            out.append(f"python {k} {manifest['python'].get(k)!r} (this host: {ours!r})")
    for k, ours in facts["versions"].items():
        theirs = manifest["versions"].get(k)
        same = (theirs is not None and theirs.split(".")[:2] == ours.split(".")[:2]
                if k == "numpy" else theirs == ours)
        if not same:
            out.append(f"{k} {theirs} (this host: {ours})")
    m, h = manifest["machine"], facts["machine"]
    if m.get("triple") != h["triple"]:
        out.append(f"target {m.get('triple')} (this host: {h['triple']})")
    if m.get("cpu_name") != h["cpu_name"]:
        out.append(f"CPU {m.get('cpu_name')!r} (this host: {h['cpu_name']!r})")
    if m.get("cpu_features") != h["cpu_features"]:
        out.append("CPU features differ (" + _features_diff(m.get("cpu_features") or "",
                                                            h["cpu_features"]) + ")")
    if manifest["catalog_hash"] != facts["catalog_hash"]:
        out.append(f"catalog {manifest['catalog_hash']} (this build: {facts['catalog_hash']})")
    for rel, info in sorted(manifest["indexes"].items()):
        try:
            src = cache_locator.source_path(info["source"])
        except ValueError as exc:
            out.append(str(exc))
            continue
        if not os.path.isfile(src):
            out.append(f"source {info['source']} does not exist in this installation")
        elif cache_locator.module_hash(src) != info["stamp"]:
            out.append(f"sources differ: {info['source']} or a module it imports changed")
    return out


# ---------------------------------------------------------------- integrity


def manifest_checksum(manifest):
    """SHA-256 of the manifest without its ``manifest_sha256`` field (canonical JSON)."""
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


def write_manifest(package_dir, manifest):
    """Write ``manifest`` (with a fresh ``manifest_sha256``) into ``package_dir``."""
    manifest = dict(manifest, manifest_sha256=manifest_checksum(manifest))
    tmp = os.path.join(package_dir, MANIFEST + ".tmp")
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, os.path.join(package_dir, MANIFEST))
    return manifest


def file_digest(path, copy_to=None):
    """SHA-256 (hex) of the file ``path``; with ``copy_to``, of exactly the bytes written
    there, a copy of the file."""
    h = hashlib.sha256()
    with open(path, "rb") as f, \
            (open(copy_to, "xb") if copy_to else contextlib.nullcontext()) as out:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            if out is not None:
                out.write(block)
    return h.hexdigest()


def package_files(package_dir):
    """Package-relative paths (``/``-separated) of every file but the manifest and its
    signature."""
    out = []
    for d, _, names in os.walk(package_dir):
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), package_dir).replace(os.sep, "/")
            if rel not in (MANIFEST, SIGNATURE):
                out.append(rel)
    return sorted(out)


def _listed(problems, what, items):
    if items:
        problems.append(f"{len(items)} {what}: " + ", ".join(items[:4])
                        + (" ..." if len(items) > 4 else ""))


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
