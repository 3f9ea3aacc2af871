"""Build a kernel package (``dynshape pregenerate``); the format is in :mod:`dynshape.packages.load`.

1. :func:`plan` chooses the drivers: the catalog's families that have a registered driver
   (plus drivers registered without a catalog entry), on the chosen targets, times dtypes.
2. A staging subprocess loads every chosen driver through the Numba cache it is given (the
   user's cache by default, so a warm cache is reused, or a fresh one), compiling what is
   missing, and copies exactly the packaged cache entries into a temporary directory next to
   the output: the drivers' signatures and every function compiled while ``dynshape`` is
   imported. Its progress reaches the parent as JSON lines.
3. The parent writes the manifest (checksums, kernel ids, tiles, versions, machine), signs
   it (:mod:`dynshape.packages.signing`: this user's key, created on first use, or ``sign_key``),
   checks that the package loads in a fresh process with an empty Numba cache without
   compiling (trusting the signer's key only), and renames the directory into place: the
   output is complete or absent.
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from dynshape.ops.elementwise import copy_driver
from dynshape.packages import load as package

from dynshape.packages import signing, trial
from dynshape.errors import ArgumentError

TARGETS = ("cpu",)       # targets whose compiled code lives in Numba's CPU cache


# ---------------------------------------------------------------- choosing the drivers


def _dtype_name(d):
    """A dtype's name; bfloat16 by name, since NumPy knows it only once the optional
    ml_dtypes is imported (the catalog's families list it either way)."""
    if str(d) == "bfloat16":
        return "bfloat16"
    try:
        return np.dtype(d).name
    except TypeError:
        raise ArgumentError(f"unknown dtype {d!r}; a NumPy dtype name like float32, or "
                            "bfloat16") from None


def _family_dtype(fam_dtypes, dtype):
    """The driver dtype of ``dtype`` in a family, or None. A family whose dtypes are all
    unsigned integers moves bytes (copies): it serves any dtype of the same item size, as
    :func:`dynshape.warm` does."""
    if dtype in fam_dtypes:
        return dtype
    if fam_dtypes and all(np.dtype(d).kind == "u" for d in fam_dtypes):
        size = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize
        as_bytes = f"uint{8 * size}"
        return as_bytes if as_bytes in fam_dtypes else None
    return None


def plan(families=None, dtypes=None, targets=TARGETS):
    """``(pairs, notes)``: the (family, dtype) drivers to package, sorted, and why requested
    combinations were left out. A family's dtypes come from the catalog, else from its driver
    registration (``drivers.register(..., dtypes=)``), else from ``dtypes``. Raises
    ArgumentError for an unknown family, dtype or target, or when nothing is left."""
    from dynshape_kernels import drivers
    from dynshape_kernels.catalog import CATALOG
    registered = drivers.registered()
    known = [f for f in CATALOG.families if f in registered] + \
            [f for f in registered if f not in CATALOG.families]
    for t in targets:
        if t not in TARGETS:
            raise ArgumentError(f"target {t!r} cannot be pregenerated; accepted: "
                                f"{', '.join(TARGETS)}")
    for f in families or ():
        if f not in known:
            raise ArgumentError(f"unknown kernel family {f!r}; families with a driver: "
                                f"{', '.join(known)}")
    for d in dtypes or ():
        _dtype_name(d)
    pairs, notes = set(), []
    for fam in families or known:
        spec = CATALOG.families.get(fam)
        if spec is not None and spec.target not in targets:
            notes.append(f"{fam}: target {spec.target} not chosen")
            continue
        fam_dtypes = spec.dtypes if spec is not None else \
            drivers.declared_dtypes(fam) or (tuple(dtypes) if dtypes else None)
        if fam_dtypes is None:
            why = f"{fam}: its driver declares no dtypes; name them (--dtype)"
            if families:
                raise ArgumentError(why)
            notes.append(why)
            continue
        for dt in (dtypes or fam_dtypes):
            d = _family_dtype(fam_dtypes, _dtype_name(dt))
            if d is None:
                notes.append(f"{fam}/{dt}: not a dtype of {fam} ({', '.join(fam_dtypes)})")
            elif fam == "copy" and spec is not None and spec.target == "cpu":
                # the CPU driver these copies run on (4- and 8-byte items: a unary one)
                pairs.add(copy_driver(np.dtype(d).itemsize))
            else:
                pairs.add((fam, d))
    if not pairs:
        raise ArgumentError("nothing to package: " + ("; ".join(notes) or "no families"))
    return sorted(pairs), notes


# ---------------------------------------------------------------- staging (subprocess)


def _import_time_dispatchers():
    """Cache-enabled dispatchers of dynshape's modules that hold compiled code right after
    ``import dynshape`` (they compile or load while importing, e.g. the combination builder).
    Raises PackageError for one whose code Numba cannot cache: no package could hold it."""
    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher
    found = {}
    for name, mod in sorted(sys.modules.items()):
        if name.split(".")[0] not in ("dynshape", "dynshape_kernels") or mod is None:
            continue
        for obj in list(vars(mod).values()):
            if isinstance(obj, Dispatcher) and obj.overloads:
                found.setdefault(id(obj), obj)
    out = []
    for disp in found.values():
        if isinstance(disp._cache, NullCache):
            raise package.PackageError(
                f"{disp.py_func.__module__}.{disp.py_func.__qualname__} compiles when dynshape "
                "is imported but is not cached (cache=True): a package cannot hold it")
        out.append(disp)
    return sorted(out, key=lambda d: (d.py_func.__module__, d.py_func.__qualname__))


def _emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _stage(dest, pairs):
    """Staging-process body: load or compile ``pairs`` and copy their cache entries (and the
    import-time functions') into ``dest/cache``; emit progress and a description."""
    from numba.core import event
    from numba.core.caching import IndexDataCacheFile
    from numba.core.registry import cpu_target

    import dynshape  # noqa: F401  (import-time functions compile or load now)
    from dynshape_kernels import cache_locator, drivers

    eager = _import_time_dispatchers()
    compiles = []

    class Count(event.Listener):
        def on_start(self, ev):
            compiles.append(1)

        def on_end(self, ev):
            pass

    _emit(event="start", total=len(pairs), imported=len(eager))
    chosen = []          # (dispatcher, keys, description)
    codegen = cpu_target.target_context.codegen()
    with event.install_listener("numba:compile", Count()):
        for fam, dt in pairs:
            t0 = time.perf_counter()
            before = len(compiles)
            disp = drivers.get(fam, dt)
            drivers.fill_on_demand(fam, dt)     # a package holds what its drivers may call
            _emit(event="driver", family=fam, dtype=dt, seconds=time.perf_counter() - t0,
                  compiled=len(compiles) > before)
            key = disp._cache._index_key(drivers.signature(fam, dt), codegen)
            chosen.append((disp, {key}, {"family": fam, "dtype": dt}))
    # the functions the drivers call by address (cpu.address_link), one per dtype
    from dynshape_kernels.cpu import address_link
    for link in address_link.LINKS:
        disp = link.dispatcher()
        if disp.overloads:
            chosen.append((disp, {disp._cache._index_key(sig, codegen) for sig in disp.overloads},
                           {"name": f"{disp.py_func.__module__}.{disp.py_func.__qualname__}",
                            "linked": True}))
    for disp in eager:
        _, magic, code = disp._cache._index_key(None, codegen)
        keys = {k for k in disp._cache._cache_file._load_index() if k[1:] == (magic, code)}
        name = f"{disp.py_func.__module__}.{disp.py_func.__qualname__}"
        chosen.append((disp, keys, {"name": name}))

    indexes, entries = {}, []       # package-relative index path -> selection
    for disp, keys, desc in chosen:
        cache = disp._cache
        src = cache._cache_file
        py_file = cache._impl.locator._py_file
        sub = cache_locator.package_subpath(py_file)
        rel = f"{package.CACHE}/{sub}/{src._index_name}"
        sel = indexes.setdefault(rel, {"cache": cache, "keys": set(), "sub": sub,
                                       "source": cache_locator.source_relpath(py_file)})
        sel["keys"] |= keys
        entries.append(dict(desc, index=rel))
    described = {}
    for rel, sel in indexes.items():
        cache = sel["cache"]
        src = cache._cache_file
        stamp = src._source_stamp      # the sources the cached code was compiled from
        overloads = src._load_index()
        missing = [k for k in sel["keys"] if k not in overloads]
        if missing or not sel["keys"]:
            raise package.PackageError(
                f"{rel}: compiled code is not in the Numba cache {src._cache_path} (is it "
                "writable? was it built from other sources?)")
        out_dir = os.path.join(dest, package.CACHE, *sel["sub"].split("/"))
        os.makedirs(out_dir, exist_ok=True)
        kept = {k: overloads[k] for k in sel["keys"]}
        for data_name in kept.values():
            shutil.copyfile(src._data_path(data_name), os.path.join(out_dir, data_name))
        IndexDataCacheFile(out_dir, cache._impl.filename_base, stamp)._save_index(kept)
        described[rel] = {"source": sel["source"], "stamp": stamp, "entries": len(kept)}
    _emit(event="done", facts=package.host_facts(), indexes=described,
          drivers=[e for e in entries if "family" in e],
          functions=[e for e in entries if "name" in e], compilations=len(compiles))


# ---------------------------------------------------------------- the parent


class _Progress:
    """A plain text progress bar on ``stream`` (redrawn in place on a terminal, one line per
    step otherwise)."""

    def __init__(self, total, stream, width=30):
        self.total, self.stream, self.width, self.done = max(total, 1), stream, width, 0
        self.tty = getattr(stream, "isatty", lambda: False)()

    def step(self, label):
        self.done += 1
        filled = self.width * self.done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        line = f"[{bar}] {self.done}/{self.total} {label}"
        if self.tty:
            self.stream.write("\r" + line.ljust(79))
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _run_stage(tmp, pairs, cache_dir, progress):
    env = dict(os.environ)
    env.pop(package.ENV, None)
    env.pop(package.ENV_ALLOW_COMPILE, None)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    cmd = [sys.executable, "-c",
           "import sys, json; from dynshape.packages.build import _stage; "
           "_stage(sys.argv[1], [tuple(p) for p in json.loads(sys.argv[2])])",
           tmp, json.dumps(pairs)]
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        done, steps = None, []
        for line in proc.stdout:
            ev = json.loads(line)
            if ev["event"] == "driver":
                how = "compiled" if ev["compiled"] else "from cache"
                progress.step(f"{ev['family']}/{ev['dtype']} {how} {ev['seconds']:.1f} s")
                steps.append(ev)
            elif ev["event"] == "done":
                done = ev
        code = proc.wait()
        if code != 0 or done is None:
            err.seek(0)
            tail = err.read().strip().splitlines()[-12:]
            raise package.PackageError("building the package failed in the staging process:\n"
                                       + "\n".join(tail))
    return done, steps


def _manifest(tmp, done):
    from dynshape_kernels.catalog import CATALOG
    drivers = []
    for d in done["drivers"]:
        spec = CATALOG.families.get(d["family"])
        if spec is not None:
            base = CATALOG.family_base(d["family"], d["dtype"])
            n = len(spec.ops) * len(spec.tiles)
            d = dict(d, target=spec.target, kernel_ids=[base, base + n], ops=list(spec.ops),
                     tiles=[list(t) for t in spec.tiles])
        else:
            d = dict(d, target="cpu", kernel_ids=None, ops=None, tiles=None)
        drivers.append(d)
    files = {}
    for rel in package.package_files(tmp):
        full = os.path.join(tmp, *rel.split("/"))
        files[rel] = {"size": os.path.getsize(full), "sha256": package.file_digest(full)}
    facts = done["facts"]
    return dict(format=package.FORMAT, created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                python=facts["python"], versions=facts["versions"], machine=facts["machine"],
                catalog_hash=facts["catalog_hash"], drivers=drivers,
                functions=done["functions"], indexes=done["indexes"], files=files,
                cost_model=_cost_model())


def _cost_model():
    """The compile host's cost-model constants and where they came from (an execution host
    without a calibration of its own plans with these: same CPU, as the package requires)."""
    from dataclasses import asdict

    from dynshape.planning import cost_model
    return {"source": cost_model.SOURCE, "model": asdict(cost_model.MODEL)}


def build(out, families=None, dtypes=None, targets=TARGETS, cache_dir=None, fresh=False,
          force=False, verify_load=True, stream=None, sign_key=None):
    """Build a kernel package at ``out`` (see the module docstring) and return its manifest.

    The manifest is signed with the Ed25519 private key in the PEM file ``sign_key``
    (default: this user's own key, created on first use); loading hosts must trust its
    public key (``dynshape keys export`` / ``dynshape keys trust``).

    ``cache_dir``: the Numba cache the staging process reads and fills (default: the
    environment's); ``fresh``: a new empty one (everything compiles). ``force`` replaces an
    existing package at ``out`` (never another kind of directory). Raises ArgumentError for
    bad choices and PackageError when building or checking fails; ``out`` is then untouched.
    """
    stream = stream or sys.stderr
    out = os.path.abspath(out)
    if os.path.exists(out):
        if not force:
            raise ArgumentError(f"{out} exists; pass --force to replace it")
        if not os.path.isfile(os.path.join(out, package.MANIFEST)):
            raise ArgumentError(f"{out} exists and is not a kernel package; not replacing it")
    pairs, notes = plan(families, dtypes, targets)
    _, signer = signing.load_private_key(sign_key)      # a bad key fails before compiling
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.tmp-", dir=parent)
    staging = tempfile.mkdtemp(prefix="dynshape-staging-") if fresh else None
    t0 = time.perf_counter()
    try:
        stream.write(f"pregenerating {len(pairs)} drivers into {out}\n")
        done, steps = _run_stage(tmp, [list(p) for p in pairs], staging or cache_dir,
                                 _Progress(len(pairs), stream))
        manifest = package.write_manifest(tmp, _manifest(tmp, done))
        sign(tmp, sign_key)
        if verify_load:
            trial.check(tmp, pairs, signer)
        if os.path.exists(out):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.old-", dir=parent)
            os.rmdir(old)
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
    stream.write(summary(out, manifest, steps, notes, time.perf_counter() - t0,
                         staging or cache_dir or os.environ.get("NUMBA_CACHE_DIR"),
                         verify_load, signer, sign_key or signing.own_key_path()) + "\n")
    stream.flush()
    return manifest


def sign(path, key_path=None):
    """Sign the manifest of the package at ``path`` (writes ``signature.json``) with the key
    in ``key_path`` (default: this user's own key); return the signer's PublicKey."""
    with open(os.path.join(path, package.MANIFEST), "rb") as f:
        record = signing.sign(f.read(), key_path)
    tmp = os.path.join(path, signing.SIGNATURE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, os.path.join(path, signing.SIGNATURE))
    return signing.PublicKey(base64.b64decode(record["key"]), record["key_name"])


def summary(out, manifest, steps, notes, seconds, cache_dir, checked, signer=None,
            key_path=None):
    m = manifest
    size = sum(f["size"] for f in m["files"].values())
    n_kernels = sum(d["kernel_ids"][1] - d["kernel_ids"][0] for d in m["drivers"]
                    if d["kernel_ids"])
    uncatalogued = sorted({d["family"] for d in m["drivers"] if not d["kernel_ids"]})
    compiled = sum(1 for s in steps if s["compiled"])
    eager = [f for f in m["functions"] if not f.get("linked")]
    linked = [f for f in m["functions"] if f.get("linked")]
    v, p, mach = m["versions"], m["python"], m["machine"]
    rows = [
        f"kernel package {out}",
        f"  drivers    {len(m['drivers'])}: "
        + ", ".join(f"{d['family']}/{d['dtype']}" for d in m["drivers"]),
        f"  kernels    {n_kernels} static kernels, catalog {m['catalog_hash']}"
        + (f" (no catalog entry: {', '.join(uncatalogued)})" if uncatalogued else ""),
        f"  at import  {len(eager)}: " + ", ".join(f["name"] for f in eager),
        f"  by address {len(linked)}: " + (", ".join(f["name"] for f in linked) or "none"),
        f"  files      {len(m['files'])} ({size / 1e6:.1f} MB)",
        f"  built      {compiled} compiled, {len(steps) - compiled} from the cache "
        f"({cache_dir or 'next to the sources'}) in {seconds:.1f} s",
        f"  for        {p['implementation']} {p['version']}, dynshape {v['dynshape']}, numba "
        f"{v['numba']}, llvmlite {v['llvmlite']} (LLVM {v['llvm']}), numpy {v['numpy']}, "
        f"{mach['triple']}, CPU {mach['cpu_name']}",
    ]
    if signer is not None:
        rows.append(f"  signed     by {signer.describe()}, key {key_path}; loading hosts must "
                    "trust it (dynshape keys export / dynshape keys trust)")
    if checked:
        rows.append("  checked    loads in a fresh process with an empty cache, 0 compilations")
    rows += [f"  skipped    {n}" for n in notes]
    return "\n".join(rows)
