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
import os
import shutil
import tempfile
import threading
import time
import warnings

from dynshape_kernels import cache_locator, drivers


from dynshape.packages.manifest import (_OURS, CACHE, ENV, ENV_ALLOW_COMPILE,  # noqa: F401
                                        ENV_ALLOW_UNSIGNED, FORMAT, MANIFEST, SIGNATURE,
                                        PackageError, PackageWarning, UnsignedPackageWarning,
                                        file_digest, host_facts, incompatibilities,
                                        manifest_checksum, package_files, write_manifest)
from dynshape.packages.verify import check_signature, verify, _verify  # noqa: F401

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

    def load_driver(self, family, dtype, py_func, signature, options, before=lambda: None):
        """The driver of ``(family, dtype)`` (the hook ``dynshape_kernels.drivers`` calls):
        loaded from the package; else compiled (``allow_compile``) or refused. ``before()``
        loads what the driver calls by address (its step interpreter) the same way."""
        from numba import njit
        name = f"{family}/{dtype}"
        if (family, dtype) in self.drivers:
            disp = njit(**options)(py_func)
            try:
                with self._guard.loading(name):
                    before()
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
        before()
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
    (compiling on a miss). Drivers already loaded stay in use. An installed CUDA package is
    dropped too (its kernels compile again on their next use)."""
    import sys
    with _lock:
        _deactivate()
    if "dynshape.cuda.package" in sys.modules:
        sys.modules["dynshape.cuda.package"].unload()


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

    A directory holding a ``cuda-manifest.json`` (built by ``dynshape pregenerate --target
    cuda``) is a CUDA package: it is checked and installed for the current device by
    :func:`dynshape.cuda.package.load` (``allow_compile`` as there; CUDA packages are not
    signed, ``trusted_keys`` and ``allow_unsigned`` do not apply), returning its
    ``CudaKernelPackage``.
    """
    from dynshape.cuda import package as cuda_package
    if cuda_package.is_package(path) and not os.path.exists(os.path.join(path, MANIFEST)):
        return cuda_package.load(path, allow_compile=allow_compile)
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
