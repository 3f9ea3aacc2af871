"""Kernel packages: drivers compiled on a compile host, loaded on an execution host that then
compiles nothing.

How compiled code is stored
---------------------------
A package holds Numba's own on-disk cache files, the ones ``njit(cache=True)`` writes and
reads: per function one index (``.nbi``: the source stamp and one entry per compiled signature
and target machine) and per entry one data file (``.nbc``: the object code and what Numba needs
to rebuild the function). Drivers are loaded through the ordinary dispatcher path
(``compile(signature)`` hits the cache, then ``disable_compile()``), so there is no second
loader to keep in step with Numba (``numba.pycc`` is deprecated and not used).

- Relocatable: files live under ``cache/<import package>/<subdirectory>`` (for example
  ``cache/dynshape_kernels/cpu``) instead of Numba's hash of the absolute source directory,
  and the source stamp (``dynshape_kernels.cache_locator.module_hash``) hashes file names and
  contents only, so neither the package nor the sources need to sit where they were built.
  While a package is active the cache locator reads a function from (the verified copy
  of) the package when the package holds its index, and never writes there.
- Verified bytes only: :func:`load_package` copies each file into a private temporary
  directory (mode 0700) as it hashes it, and Numba reads that copy, so a file changed in
  the package after loading (drivers load lazily) is never read.
- Exact: an index holds only the packaged entries: the chosen drivers' signatures and the
  functions compiled while ``dynshape`` is imported (the simplified-combination builder).
  Functions a driver calls are linked into the driver's object code and need no entry.
- Checked: Numba keys entries by target machine (triple, CPU name, CPU features) and by its
  own version and treats a mismatch as a plain miss (it would compile). The manifest records
  those, the other versions, the catalog hash and the source stamps; :func:`load_package`
  compares them with this host and refuses a mismatch, naming it.
- Signed: a package is code (Numba unpickles its files), so the manifest, which lists every
  file's size and SHA-256, is signed with an Ed25519 key (:mod:`dynshape.packages.signing`: keys,
  trust store, ``DYNSHAPE_TRUSTED_KEYS``). Loading checks the signature against the trusted
  keys first, then every file, and only then lets Numba open a file: the cache locator is
  pointed at the verified copy when everything has passed. An unsigned package or one
  signed by a key not trusted here loads only with ``allow_unsigned`` (it then runs code
  nobody vouched for); a signature that does not match is always refused. This holds for
  every file a package lists, whatever its target.

Layout::

    <package>/signature.json   Ed25519 signature of manifest.json's bytes, and the signer's
                               public key
    <package>/manifest.json    format, python, versions, machine, catalog hash, drivers (kernel
                               ids, ops, tiles), import-time functions, indexes (source file
                               and stamp), files (size and SHA-256), manifest_sha256
    <package>/cache/dynshape_kernels/cpu/elementwise.unary_driver-<line>.py311.nbi
    <package>/cache/dynshape_kernels/cpu/elementwise.unary_driver-<line>.py311.1.nbc ...

Loading verifies everything first (signature, manifest checksum, every file's size and
SHA-256, no file missing or extra, compatibility) and activates nothing when any check
fails. Once a package is active without ``allow_compile``, any compilation of a dynshape
function raises :class:`PackageError` instead (a driver the package lacks is named by family
and dtype).
Packages are built by ``dynshape pregenerate`` (:mod:`dynshape.packages.build`).
"""
import atexit
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings

from dynshape_kernels import cache_locator, drivers

from dynshape.errors import DynshapeError

FORMAT = 1
MANIFEST = "manifest.json"
CACHE = "cache"
ENV = "DYNSHAPE_PACKAGE"
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


_HOW_TO_TRUST = ("To trust the key that signed it: on the build host run `dynshape keys export "
                 "> key.pub`, here `dynshape keys trust key.pub` (or pass trusted_keys= to "
                 "load_package, or set DYNSHAPE_TRUSTED_KEYS=key.pub).")


def check_signature(path, manifest_bytes, trusted_keys=None, allow_unsigned=False):
    """The signer (a :class:`dynshape.packages.signing.PublicKey`) of ``manifest_bytes``, the manifest
    of the package at ``path``, when a trusted key signed them (see :mod:`dynshape.packages.signing`
    for ``trusted_keys``); None for a package loaded with ``allow_unsigned`` (warns
    :class:`UnsignedPackageWarning`). Raises PackageError saying whether the package is
    unsigned, signed by an untrusted key or badly signed; a bad signature is always refused.
    """
    from dynshape.packages import signing
    try:
        trusted, source = signing.trusted_keys(trusted_keys)
        verdict = signing.check(manifest_bytes, _read(os.path.join(path, SIGNATURE)), trusted)
    except signing.SigningKeyError as exc:
        raise PackageError(f"kernel package {path}: cannot read the trusted keys, nothing was "
                           f"loaded: {exc}") from None
    if verdict.status == "signed":
        return verdict.key
    held = ", ".join(k.describe() for k in trusted) or "none"
    if verdict.status == "bad":
        raise PackageError(f"kernel package {path} has a bad signature, nothing was loaded: "
                           f"{verdict.detail}. A package is code; a bad signature is never "
                           "accepted. Rebuild and sign it with `dynshape pregenerate`.")
    what = ("is unsigned" if verdict.status == "unsigned" else "is signed by an untrusted key")
    if allow_unsigned:
        warnings.warn(f"kernel package {path} {what} ({verdict.detail}): loading it anyway "
                      "(allow_unsigned=True) runs the code in it, which no trusted key vouches "
                      "for", UnsignedPackageWarning, stacklevel=4)
        return None
    raise PackageError(
        f"kernel package {path} {what} ({verdict.detail}), nothing was loaded. A package is "
        f"code: it loads only when signed by a trusted key. Trusted here ({source}): {held}. "
        + (_HOW_TO_TRUST if verdict.status == "untrusted" else
           "Rebuild it with `dynshape pregenerate`, which signs it.")
        + " To run its code without a trusted signature: allow_unsigned=True "
        f"({ENV_ALLOW_UNSIGNED}=1).")


def verify(path, trusted_keys=None, allow_unsigned=False):
    """The manifest of the package at ``path`` after checking that a trusted key signed it
    (:func:`check_signature`) and its integrity: the manifest's own checksum and format, and
    every file's presence, size and SHA-256, with no file more. Only file bytes are read
    (hashed); nothing of the package is unpickled or imported.

    Raises PackageError naming every problem found; it never returns a partial result.
    """
    return _verify(path, trusted_keys, allow_unsigned)[0]


def _verify(path, trusted_keys, allow_unsigned, snapshot=None):
    """``(manifest, signer)``, see :func:`verify`. With ``snapshot`` (a private directory),
    the files are copied there as they are hashed: the copy holds the bytes verified."""
    if not os.path.isdir(path):
        raise PackageError(f"{path}: not a kernel package (no such directory)")
    raw = _read(os.path.join(path, MANIFEST))
    if raw is None:
        raise PackageError(f"{path}: not a kernel package ({MANIFEST} is missing)")
    signer = check_signature(path, raw, trusted_keys, allow_unsigned)
    try:
        manifest = json.loads(raw)
    except ValueError as exc:
        raise PackageError(f"kernel package {path}: {MANIFEST} is corrupt or truncated "
                           f"(not JSON: {exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else None
        raise PackageError(f"kernel package {path}: format {got!r}; this dynshape reads "
                           f"format {FORMAT}")
    missing_keys = [k for k in _REQUIRED if k not in manifest]
    if missing_keys:
        raise PackageError(f"kernel package {path}: {MANIFEST} lacks {', '.join(missing_keys)}")
    if manifest_checksum(manifest) != manifest["manifest_sha256"]:
        raise PackageError(f"kernel package {path}: {MANIFEST} does not match its checksum "
                           "(edited or corrupt)")
    files = manifest["files"]
    bad = [r for r in files if r.startswith("/") or ".." in r.split("/")
           or not r.startswith(CACHE + "/")]
    if bad:
        raise PackageError(f"kernel package {path}: file names outside {CACHE}/: {bad[:4]}")
    present = set(package_files(path))
    problems = []
    _listed(problems, "files missing", sorted(set(files) - present))
    _listed(problems, "files not in the manifest", sorted(present - set(files)))
    sizes, sums = [], []
    for rel in sorted(set(files) & present):
        full = os.path.join(path, *rel.split("/"))
        size = os.path.getsize(full)
        if size != files[rel]["size"]:
            sizes.append(f"{rel} ({size} bytes, manifest: {files[rel]['size']})")
        elif file_digest(full, _snapshot_path(snapshot, rel)) != files[rel]["sha256"]:
            sums.append(rel)
    _listed(problems, "files of the wrong size (truncated or appended to)", sizes)
    _listed(problems, "files failing their SHA-256 checksum", sums)
    refs = [d["index"] for d in manifest["drivers"] + manifest["functions"]]
    _listed(problems, "indexes named but not listed",
            sorted({r for r in refs + list(manifest["indexes"]) if r not in files}))
    if problems:
        raise PackageError(f"kernel package {path} is corrupt, nothing was loaded: "
                           + "; ".join(problems))
    return manifest, signer


def _snapshot_path(snapshot, rel):
    if snapshot is None:
        return None
    full = os.path.join(snapshot, *rel.split("/"))
    os.makedirs(os.path.dirname(full), mode=0o700, exist_ok=True)
    return full


# ---------------------------------------------------------------- the active package


class _Miss(Exception):
    """A packaged function would compile: Numba did not find its compiled code."""


class _CompileGuard:
    """Numba compile listener. Inside ``loading(name)`` (this thread) any compile raises
    ``_Miss``; when ``strict``, any compile of a dynshape function raises PackageError."""

    def __init__(self, package, strict):
        from numba.core import event

        class Listener(event.Listener):
            def on_start(_, ev):
                self.on_start(ev)

            def on_end(_, ev):
                pass

        self.listener = Listener()
        self.package = package
        self.strict = strict
        self._local = threading.local()

    def on_start(self, ev):
        if getattr(self._local, "name", None) is not None:
            raise _Miss(self._local.name)
        disp = ev.data.get("dispatcher")
        func = getattr(disp, "py_func", None)
        module = getattr(func, "__module__", None) or ""
        if self.strict and module.split(".")[0] in _OURS:
            raise PackageError(
                f"{module}.{func.__qualname__} would compile for {ev.data.get('args')}, but "
                f"compiling is disabled: the kernel package {self.package.path} does not hold "
                f"it. Rebuild the package with `dynshape pregenerate` (it packages the drivers "
                f"and the functions compiled at import), or load it with allow_compile=True.")

    @contextlib.contextmanager
    def loading(self, name):
        self._local.name = name
        try:
            yield
        finally:
            self._local.name = None


class KernelPackage:
    """A verified kernel package. ``active``: drivers come from it; ``refused``: why it was
    not used (only with ``allow_compile``); ``signer``: the trusted key that signed it (None:
    loaded with ``allow_unsigned``); ``seconds``: time :func:`load_package` spent verifying
    it; ``snapshot``: the private copy of its verified files that Numba reads (removed when
    the process exits)."""

    def __init__(self, path, manifest, allow_compile, signer=None, snapshot=None):
        self.path = os.path.abspath(path)
        self.manifest = manifest
        self.signer = signer
        self.snapshot = snapshot
        self.allow_compile = bool(allow_compile)
        self.drivers = frozenset((d["family"], d["dtype"]) for d in manifest["drivers"])
        self.active = False
        self.refused = None
        self.seconds = 0.0
        self._guard = _CompileGuard(self, strict=not allow_compile)

    @property
    def cache_dir(self):
        """The cache root Numba reads: the verified copy (the package itself without one)."""
        return os.path.join(self.snapshot or self.path, CACHE)

    def load_driver(self, family, dtype, py_func, signature, options):
        """The driver of ``(family, dtype)`` (the hook ``dynshape_kernels.drivers`` calls):
        loaded from the package; else compiled (``allow_compile``) or refused."""
        from numba import njit
        name = f"{family}/{dtype}"
        if (family, dtype) in self.drivers:
            disp = njit(**options)(py_func)
            try:
                with self._guard.loading(name):
                    disp.compile(signature)
                return disp
            except _Miss:
                if not self.allow_compile:
                    raise PackageError(
                        f"driver {name}: the kernel package {self.path} lists it but Numba "
                        "did not accept its compiled code (sources or machine changed since "
                        "the package was loaded?); compiling is disabled") from None
        elif not self.allow_compile:
            held = ", ".join(f"{f}/{d}" for f, d in sorted(self.drivers)) or "none"
            raise PackageError(
                f"driver {name} is not in the kernel package {self.path} (it holds {held}) "
                f"and compiling is disabled. Add it with `dynshape pregenerate --family "
                f"{family} --dtype {dtype} ...`, or load the package with allow_compile=True.")
        with cache_locator.bypass_package():
            disp = njit(**options)(py_func)
        disp.compile(signature)
        return disp

    def describe(self):
        m = self.manifest
        state = "active" if self.active else f"not used: {self.refused}"
        signed = f"signed by {self.signer.describe()}" if self.signer else "NOT signed"
        return (f"kernel package {self.path} ({state}, {signed}): "
                f"{len(self.drivers)} drivers, {len(m['files'])} files, catalog "
                f"{m['catalog_hash']}, CPU {m['machine']['cpu_name']}, numba "
                f"{m['versions']['numba']}")

    def __repr__(self):
        return f"<KernelPackage {self.path} drivers={len(self.drivers)} active={self.active}>"


_active = None
_lock = threading.Lock()


def active_package():
    """The package drivers come from, or None."""
    return _active


def _activate(pkg):
    from numba.core import event
    global _active
    with _lock:
        _deactivate()
        cache_locator.use_package_dir(pkg.cache_dir)
        drivers.use_package(pkg)
        event.register("numba:compile", pkg._guard.listener)
        pkg.active = True
        _active = pkg
    _use_packaged_cost_model(pkg)


def _use_packaged_cost_model(pkg):
    """A host without a calibration of its own plans with the compile host's constants
    (recorded by ``pregenerate``; the package requires the same CPU)."""
    from dynshape.planning import calibration, cost_model
    recorded = pkg.manifest.get("cost_model")
    if not recorded or cost_model.SOURCE != calibration.DEFAULTS:
        return
    fields = cost_model.CostModel.__dataclass_fields__
    try:
        model = cost_model.CostModel(**{k: v for k, v in recorded["model"].items()
                                        if k in fields})
    except (TypeError, KeyError, AttributeError):
        return
    cost_model.use(model, f"from the kernel package {pkg.path} ({recorded.get('source')})")


def _deactivate():
    from numba.core import event
    global _active
    if _active is not None:
        event.unregister("numba:compile", _active._guard.listener)
        drivers.use_package(None)
        cache_locator.use_package_dir(None)
        _active.active = False
        _active = None


def unload_package():
    """Stop using the active package: drivers not yet loaded come from Numba's cache again
    (compiling on a miss). Drivers already loaded stay in use."""
    with _lock:
        _deactivate()


def load_package(path, allow_compile=False, trusted_keys=None, allow_unsigned=False):
    """Verify the kernel package at ``path`` and take drivers from it from now on.

    A package is code: it is used only when its manifest is signed by a trusted key
    (``trusted_keys``: key lines, key files or PublicKeys, replacing ``DYNSHAPE_TRUSTED_KEYS``
    and the trust store, see :mod:`dynshape.packages.signing`) and every file matches the manifest;
    all of that is checked before Numba opens any file of the package.
    ``allow_unsigned=True`` also loads a package that is unsigned or signed by an untrusted
    key, with an :class:`UnsignedPackageWarning`: it RUNS THE CODE IN THE PACKAGE, which
    nobody trusted here vouches for. Use it only for a package you built yourself.

    Contract: on return with ``package.active``, a driver in the package loads from it without
    compiling, and (without ``allow_compile``) any compilation of a dynshape function, such
    as a driver the package lacks, raises :class:`PackageError` naming it. Drivers already in
    memory stay in use; a previously active package is replaced.

    Raises PackageError, activating nothing, when the package is unsigned or signed by an
    untrusted key (unless ``allow_unsigned``), badly signed, corrupt, truncated or
    incomplete (always) or was built for another host, version or source tree. With
    ``allow_compile=True`` the latter only warns (:class:`PackageWarning`): the package is not
    used (``package.refused`` says why) and drivers load or compile as without a package.
    """
    t0 = time.perf_counter()
    snapshot = tempfile.mkdtemp(prefix="dynshape-package-")      # mode 0700: this user's
    try:
        manifest, signer = _verify(path, trusted_keys, allow_unsigned, snapshot)
        problems = incompatibilities(manifest)
    except BaseException:
        shutil.rmtree(snapshot, ignore_errors=True)
        raise
    pkg = KernelPackage(path, manifest, allow_compile, signer, snapshot)
    pkg.seconds = time.perf_counter() - t0
    if problems:
        shutil.rmtree(snapshot, ignore_errors=True)
        pkg.snapshot = None
        msg = (f"kernel package {pkg.path} was built for another host or version: "
               + "; ".join(problems) + ". Rebuild it here with `dynshape pregenerate`")
        if not allow_compile:
            raise PackageError(msg + ", or load it with allow_compile=True to compile instead.")
        pkg.refused = "; ".join(problems)
        warnings.warn(msg + "; compiling instead (allow_compile=True).", PackageWarning,
                      stacklevel=2)
        return pkg
    if not _snapshots:
        atexit.register(_remove_snapshots)
    _snapshots.append(snapshot)
    _activate(pkg)
    return pkg


_snapshots = []          # verified copies of the packages loaded by this process


def _remove_snapshots():
    for path in _snapshots:
        shutil.rmtree(path, ignore_errors=True)


def from_environment():
    """Load the package named by ``DYNSHAPE_PACKAGE`` (if set; ``allow_compile`` when
    ``DYNSHAPE_PACKAGE_ALLOW_COMPILE`` is 1/true/yes, ``allow_unsigned`` when
    ``DYNSHAPE_PACKAGE_ALLOW_UNSIGNED`` is; trusted keys from ``DYNSHAPE_TRUSTED_KEYS`` or the
    trust store). Called when dynshape is imported, before anything compiles or loads."""
    path = os.environ.get(ENV)
    if not path:
        return None

    def flag(name):
        return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")
    return load_package(path, allow_compile=flag(ENV_ALLOW_COMPILE),
                        allow_unsigned=flag(ENV_ALLOW_UNSIGNED))
