"""Kernel packages: built and signed by ``dynshape pregenerate``, loaded without compiling
anything, and refused (activating nothing, and before Numba reads any of their files) when
unsigned, signed by an untrusted key, tampered with, corrupt, incomplete or built for another
host or version.

The session's signing key and trust store live in a temporary configuration directory
(``DYNSHAPE_CONFIG_DIR``, set by conftest.py); the package is built once per session."""
import io
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import dynshape
from dynshape.packages import load as package
from dynshape.packages import build as pregenerate
from dynshape.packages import signing
from dynshape.errors import ArgumentError
from dynshape_kernels import cache_locator, drivers
from dynshape_kernels.cpu import elementwise

PAIRS = ["unary/float32", "copy/uint16"]


def _python(script, env_extra, cache_dir, *args, pythonpath=None):
    """Run ``script`` in a fresh interpreter with Numba cache ``cache_dir``; its last stdout
    line is JSON."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir), **env_extra)
    for k in (package.ENV, package.ENV_ALLOW_COMPILE, package.ENV_ALLOW_UNSIGNED,
              signing.ENV_TRUSTED):
        if k not in env_extra:
            env.pop(k, None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                       capture_output=True, text=True, env=env, cwd=str(cache_dir))
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """One package (unary float32, copy of 2-byte items) built and signed (with the session's own key)
    through the command line, reusing the session's Numba cache; returns (path, completed
    process)."""
    out = tmp_path_factory.mktemp("pkg") / "kernels"
    r = subprocess.run([sys.executable, "-m", "dynshape", "pregenerate", "--family", "unary",
                        "--family", "copy", "--dtype", "float32", "--dtype", "uint16",
                        "--out", str(out)],
                       capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    return out, r


@pytest.fixture
def pkg(built, tmp_path):
    """A private copy of the built package that a test may damage."""
    dst = tmp_path / "copy_of_package"
    shutil.copytree(built[0], dst)
    return dst


@pytest.fixture(autouse=True)
def _nothing_active():
    yield
    assert package.active_package() is None
    assert drivers._package is None and cache_locator._package_dir is None


def _edit_manifest(path, edit, sign=True, checksum=None):
    """Edit the manifest; ``checksum`` (default: ``sign``) recomputes its checksum, ``sign``
    signs it again with the session's (trusted) key, as a rebuild would."""
    mpath = path / package.MANIFEST
    m = json.loads(mpath.read_text())
    edit(m)
    if sign if checksum is None else checksum:
        package.write_manifest(str(path), m)
    else:
        mpath.write_text(json.dumps(m))
    if sign:
        pregenerate.sign(str(path))


def _a_data_file(path):
    return sorted(path.glob("cache/dynshape_kernels/cpu/*.nbc"))[0]


# ---------------------------------------------------------------- building


def test_the_command_line_shows_progress_and_a_summary(built):
    out, r = built
    assert "[###############...............] 1/2 copy/uint16" in r.stderr
    assert "[##############################] 2/2 unary/float32" in r.stderr
    assert f"kernel package {out}" in r.stderr
    assert "drivers    2: copy/uint16, unary/float32" in r.stderr
    assert "at import  1: dynshape.planning.plane.uniform_entries" in r.stderr
    assert ("by address 3: dynshape_kernels.cpu.elementwise._unary_run, "
            "dynshape_kernels.cpu.elementwise._unary_rows, "
            "dynshape_kernels.cpu.elementwise._unary_scratch") in r.stderr
    assert "0 compilations" in r.stderr
    own = signing.own_public_key()
    assert f"signed     by {own.describe()}, key {signing.own_key_path()}" in r.stderr
    m = package.verify(str(out))
    assert {(d["family"], d["dtype"]) for d in m["drivers"]} == {("unary", "float32"),
                                                                 ("copy", "uint16")}
    unary = [d for d in m["drivers"] if d["family"] == "unary"][0]
    base = dynshape.CATALOG.family_base("unary", "float32")
    spec = dynshape.CATALOG.families["unary"]
    assert unary["kernel_ids"] == [base, base + len(spec.ops) * len(spec.tiles)]
    assert [tuple(t) for t in unary["tiles"]] == [tuple(t) for t in spec.tiles]
    assert m["catalog_hash"] == dynshape.CATALOG.hash
    assert package.incompatibilities(m) == []
    # written atomically: no temporary directory is left next to the package
    assert os.listdir(out.parent) == [out.name]
    assert sorted(os.listdir(out)) == ["cache", package.MANIFEST, package.SIGNATURE]
    assert package.SIGNATURE == signing.SIGNATURE


def test_the_package_holds_exactly_the_chosen_entries(built):
    import pickle
    m = package.verify(str(built[0]))
    idx = [r for r in m["indexes"] if "unary_driver" in r]
    assert len(idx) == 1 and m["indexes"][idx[0]]["entries"] == 2   # unary f32 + copy u16
    with open(built[0] / idx[0], "rb") as f:
        pickle.load(f)                                  # numba version
        stamp, overloads = pickle.loads(f.read())
    assert stamp == cache_locator.module_hash(elementwise.__file__)
    assert sorted(overloads.values()) == sorted(
        r.rsplit("/", 1)[1] for r in m["files"] if "unary_driver" in r and r.endswith(".nbc"))


def test_plan_names_bfloat16_without_the_optional_ml_dtypes_imported():
    """NumPy knows bfloat16 only once ml_dtypes is imported; planning a package of the
    catalog's families (which list it) must not depend on that."""
    code = textwrap.dedent("""
        import sys
        from dynshape.packages.build import plan
        pairs, notes = plan()
        assert "ml_dtypes" not in sys.modules, "the check needs ml_dtypes not imported"
        assert ("rowwise", "bfloat16") in pairs and ("unary", "bfloat16") in pairs, pairs
        pairs, _ = plan(["copy"], ["bfloat16"])
        assert pairs == [("copy", "uint16")], pairs
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr


def test_plan_takes_families_from_the_catalog_and_the_driver_registry():
    pairs, notes = pregenerate.plan(["copy", "rowwise"], ["float32", "int32"])
    assert pairs == [("rowwise", "float32"), ("unary", "float32")]   # 4-byte copies: unary
    assert any(n.startswith("rowwise/int32") for n in notes)
    everything, notes = pregenerate.plan()
    fams = {f for f, _ in everything}
    declared = {f for f in drivers.registered() if drivers.declared_dtypes(f)}
    assert fams == {f for f in dynshape.CATALOG.families if f in drivers.registered()} | declared
    undeclared = [f for f in drivers.registered()
                  if f not in dynshape.CATALOG.families and f not in declared]
    assert all(any(n.startswith(f"{f}: its driver declares no dtypes") for n in notes)
               for f in undeclared)
    with pytest.raises(ArgumentError, match="unknown kernel family 'nope'"):
        pregenerate.plan(["nope"])
    with pytest.raises(ArgumentError, match="target 'cuda' cannot be pregenerated"):
        pregenerate.plan(["unary"], targets=("cuda",))
    with pytest.raises(ArgumentError, match="nothing to package"):
        pregenerate.plan(["rowwise"], ["int32"])


def test_build_never_replaces_something_else_and_cleans_up_on_failure(tmp_path, monkeypatch):
    other = tmp_path / "not_a_package"
    other.mkdir()
    with pytest.raises(ArgumentError, match="exists; pass --force"):
        pregenerate.build(str(other), ["unary"], ["float32"], stream=io.StringIO())
    with pytest.raises(ArgumentError, match="not a kernel package"):
        pregenerate.build(str(other), ["unary"], ["float32"], force=True,
                          stream=io.StringIO())

    def fail(tmp, *a):
        open(os.path.join(tmp, "half-written"), "w").close()
        raise package.PackageError("staging failed")
    monkeypatch.setattr(pregenerate, "_run_stage", fail)
    with pytest.raises(package.PackageError, match="staging failed"):
        pregenerate.build(str(tmp_path / "new"), ["unary"], ["float32"], stream=io.StringIO())
    assert sorted(os.listdir(tmp_path)) == ["not_a_package"]


def test_the_locator_names_files_like_numba_and_relative_to_the_package():
    d = drivers.get("copy", "uint8")
    f = elementwise.__file__
    assert cache_locator.index_name(d.py_func, f) == d._cache._cache_file._index_name
    assert cache_locator.package_subpath(f) == "dynshape_kernels/cpu"
    assert cache_locator.source_relpath(f) == "dynshape_kernels/cpu/elementwise.py"
    assert cache_locator.source_path("dynshape_kernels/cpu/elementwise.py") == \
        os.path.abspath(f)
    assert cache_locator.package_subpath(dynshape.packages.load.__file__) == "dynshape/packages"


def test_the_import_scan_misses_no_import_a_full_parse_finds(monkeypatch):
    """Stamps (and so package compatibility) rest on the import closure: the fast scan of
    import lines may over-approximate it but never lose a file."""
    import ast
    roots, files = cache_locator._sources()
    fast = {f: cache_locator._imports(f, roots) for f in files}

    def full(source, path):
        return (n for n in ast.walk(ast.parse(source, path))
                if isinstance(n, (ast.Import, ast.ImportFrom)))
    monkeypatch.setattr(cache_locator, "_import_nodes", full)
    for f in files:
        assert cache_locator._imports(f, roots) <= fast[f], f


# ---------------------------------------------------------------- loading without compiling

_RUN_OPS = """
    import json, sys
    from numba.core import event
    compiles = []
    class Count(event.Listener):
        def on_start(self, ev): compiles.append(str(ev.data.get("dispatcher")))
        def on_end(self, ev): pass
    event.register("numba:compile", Count())       # counts from before the import
    import numpy as np
    import dynshape
    {load}
    rng = np.random.default_rng(7)
    ok = []
    for shape in [(517, 1531), (3, 255, 257), (1, 77), (4099,)]:     # never-seen shapes
        x = rng.standard_normal(shape).astype(np.float32)
        ok.append(np.array_equal(dynshape.run("relu", x), np.maximum(x, 0)))
        ok.append(np.array_equal(dynshape.run("abs", x[..., ::-2]), np.abs(x[..., ::-2])))
        ok.append(np.array_equal(dynshape.run("copy", x.T), x.T))
    try:
        dynshape.run("relu", np.ones((5, 7)))                 # float64: not in the package
        refused = ""
    except dynshape.PackageError as exc:
        refused = str(exc)
    pkg = dynshape.packages.load.active_package()
    print(json.dumps(dict(compiles=compiles, ok=ok, refused=refused,
                          active=pkg is not None and pkg.active)))
"""


def test_a_fresh_process_with_an_empty_cache_compiles_nothing(built, tmp_path):
    moved = tmp_path / "elsewhere" / "pkg"            # a package is relocatable
    shutil.copytree(built[0], moved)
    empty = tmp_path / "empty_cache"
    empty.mkdir()
    got = _python(_RUN_OPS.format(load=""), {package.ENV: str(moved)}, empty)
    assert got["active"] and all(got["ok"]) and len(got["ok"]) == 12
    assert got["compiles"] == []
    assert "driver unary/float64 is not in the kernel package" in got["refused"]
    assert "dynshape pregenerate --family unary --dtype float64" in got["refused"]
    assert not list(empty.rglob("*.nb[ic]"))           # nothing was compiled and saved
    package.verify(str(moved))                         # nor written into the package


def test_load_package_after_import_then_compiles_nothing(built, tmp_path):
    empty = tmp_path / "empty_cache"
    empty.mkdir()
    script = _RUN_OPS.format(load="dynshape.load_package(sys.argv[1]); compiles.clear()")
    got = _python(script, {}, empty, built[0])
    assert got["active"] and all(got["ok"]) and got["compiles"] == []
    assert "unary/float64" in got["refused"]


def test_relocated_sources_load_the_same_package(built, tmp_path):
    """Numba's own cache subpath hashes the absolute source directory; the package's does not."""
    src = tmp_path / "site"
    shutil.copytree(os.path.dirname(drivers.__file__), src / "dynshape_kernels",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.dirname(dynshape.__file__), src / "dynshape",
                    ignore=shutil.ignore_patterns("__pycache__"))
    empty = tmp_path / "empty_cache"
    empty.mkdir()
    script = _RUN_OPS.format(load="assert dynshape.__file__.startswith(sys.argv[1])")
    got = _python(script, {package.ENV: str(built[0])}, empty, src, pythonpath=str(src))
    assert got["active"] and all(got["ok"]) and got["compiles"] == []


def test_allow_compile_falls_back_for_what_the_package_lacks(built, tmp_path):
    script = """
        import json, sys
        import numpy as np
        import dynshape
        from dynshape_kernels import drivers
        x = np.linspace(-2, 2, 1001)
        ok = [np.array_equal(dynshape.run("relu", x), np.maximum(x, 0)),
              np.array_equal(dynshape.run("relu", x.astype(np.float32)),
                             np.maximum(x, 0).astype(np.float32))]
        where = {f"{f}/{d}": drivers.get(f, d)._cache._impl.locator.in_package
                 for f, d in drivers.loaded()}
        active = dynshape.packages.load.active_package().active
        print(json.dumps(dict(ok=ok, where=where, active=active)))
    """
    # the session's cache: unary/float64 loads from there or compiles into it, not the package
    got = _python(script, {package.ENV: str(built[0]), package.ENV_ALLOW_COMPILE: "1"},
                  os.environ["NUMBA_CACHE_DIR"])
    assert got["active"] and all(got["ok"])
    assert got["where"]["unary/float32"] is True and got["where"]["unary/float64"] is False
    package.verify(str(built[0]))


def test_a_package_holds_the_step_interpreter_its_drivers_call(tmp_path):
    """The fused driver calls the step interpreter by address (``cpu.step_link``): the
    package holds the interpreter too, and a fresh process with an empty cache runs a chain
    from the package alone, compiling nothing."""
    out = tmp_path / "fused"
    r = subprocess.run([sys.executable, "-m", "dynshape", "pregenerate", "--family", "fused",
                        "--dtype", "float32", "--out", str(out)],
                       capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    m = json.loads((out / package.MANIFEST).read_text())
    assert [f["name"] for f in m["functions"] if "steps" in f["name"]] == [
        "dynshape_kernels.cpu.steps._apply_steps_range"]
    script = """
        import json, sys
        from numba.core import event
        compiles = []
        class Count(event.Listener):
            def on_start(self, ev): compiles.append(str(ev.data.get("dispatcher")))
            def on_end(self, ev): pass
        event.register("numba:compile", Count())
        import numpy as np
        import dynshape
        from dynshape_kernels.cpu import step_link
        x = np.linspace(-3, 3, 3000, dtype=np.float32).reshape(3, 1000, 1)[:, ::3]
        b = np.float32(0.01) * np.arange(334, dtype=np.float32)[:, None]
        got = dynshape.fuse([("add", "b"), "relu", ("mul", 0.5), "exp"])(x, b=b)
        ref = np.exp(np.maximum(x + b, 0) * np.float32(0.5))
        print(json.dumps(dict(compiles=compiles, err=float(np.abs(got / ref - 1).max()),
                              filled=step_link.STEPS.filled())))
    """
    empty = tmp_path / "empty_cache"
    empty.mkdir()
    got = _python(script, {package.ENV: str(out)}, empty)
    assert got["compiles"] == [] and got["err"] < 1e-5
    assert got["filled"] == ["float32"]
    assert not list(empty.rglob("*.nb[ic]"))


# ---------------------------------------------------------------- refusals


def _refused(path, match, **kw):
    with pytest.raises(package.PackageError, match=match):
        package.load_package(str(path), **kw)


def test_another_numba_version_is_refused(pkg):
    _edit_manifest(pkg, lambda m: m["versions"].update(numba="0.1.0"))
    _refused(pkg, r"another host or version: numba 0\.1\.0 \(this host: ")


def test_another_cpu_is_refused(pkg):
    def other_cpu(m):
        m["machine"]["cpu_name"] = "haswell"
        m["machine"]["cpu_features"] = m["machine"]["cpu_features"].replace("+avx", "-avx")
    _edit_manifest(pkg, other_cpu)
    _refused(pkg, r"CPU 'haswell' \(this host: .*CPU features differ \(.*avx")


def test_other_sources_and_another_catalog_are_refused(pkg):
    def stale(m):
        for info in m["indexes"].values():
            info["stamp"] = "0" * 64
        m["catalog_hash"] = "feedfeedfeedfeed"
    _edit_manifest(pkg, stale)
    _refused(pkg, r"catalog feedfeedfeedfeed .*sources differ: dynshape")


def test_allow_compile_warns_and_uses_nothing_from_another_cpu(pkg):
    _edit_manifest(pkg, lambda m: m["machine"].update(cpu_name="haswell"))
    with pytest.warns(package.PackageWarning, match="CPU 'haswell'.*compiling instead"):
        p = package.load_package(str(pkg), allow_compile=True)
    assert not p.active and "haswell" in p.refused


def test_a_corrupt_file_is_refused(pkg):
    f = _a_data_file(pkg)
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    _refused(pkg, r"corrupt, nothing was loaded: 1 files failing their SHA-256 checksum: "
                  r"cache/dynshape_kernels/cpu/")
    _refused(pkg, "SHA-256", allow_compile=True)       # corruption is never a fallback


def test_a_truncated_file_is_refused(pkg):
    f = _a_data_file(pkg)
    f.write_bytes(f.read_bytes()[:1000])
    _refused(pkg, r"wrong size \(truncated or appended to\): .*\(1000 bytes, manifest: ")


def test_a_missing_file_is_refused(pkg):
    _a_data_file(pkg).unlink()
    _refused(pkg, r"1 files missing: cache/dynshape_kernels/cpu/")


def test_extra_garbage_is_refused(pkg):
    (pkg / "cache" / "dynshape" / "stray.nbc").write_bytes(b"garbage")
    _refused(pkg, r"1 files not in the manifest: cache/dynshape/stray\.nbc")
    (pkg / "cache" / "dynshape" / "stray.nbc").unlink()
    with open(_a_data_file(pkg), "ab") as f:
        f.write(b"garbage")
    _refused(pkg, r"wrong size")


def test_a_damaged_manifest_is_refused(pkg):
    # signed (a rebuild would not write this), but its checksum is stale
    _edit_manifest(pkg, lambda m: m["versions"].update(numba="0.1.0"), checksum=False)
    _refused(pkg, "does not match its checksum")
    mpath = pkg / package.MANIFEST
    mpath.write_text(mpath.read_text()[:100])
    pregenerate.sign(str(pkg))
    _refused(pkg, "manifest.json is corrupt or truncated")
    mpath.unlink()
    _refused(pkg, "not a kernel package")
    _refused(pkg / "nowhere", "no such directory")


# ---------------------------------------------------------------- signatures and tampering


class _Touch:
    """A pickle payload: unpickling it creates the file ``path`` (as an attacker's code)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "x"))


def _attack(path, suffix, marker):
    """Prepend a pickle payload to every ``suffix`` file of the package at ``path`` and
    rewrite the manifest with their new sizes and hashes and a new checksum, as anyone who
    can write the files can (the signature cannot be redone without the key)."""
    import pickle
    payload = pickle.dumps(_Touch(marker), protocol=2)
    m = json.loads((path / package.MANIFEST).read_text())
    hit = [rel for rel in m["files"] if rel.endswith(suffix)]
    assert hit
    for rel in hit:
        f = path.joinpath(*rel.split("/"))
        f.write_bytes(payload + f.read_bytes())
        m["files"][rel] = {"size": f.stat().st_size, "sha256": package.file_digest(str(f))}
    package.write_manifest(str(path), m)


_LOAD = """
    import json, os, sys
    route, path, marker = sys.argv[1:4]
    error = ""
    try:
        import dynshape
        if route == "load_package":
            dynshape.load_package(path)
        import numpy as np
        dynshape.run("relu", np.ones(100, np.float32))
        dynshape.run("copy", np.ones(100, np.float32))
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    pkg = sys.modules["dynshape.packages.load"]         # loaded even when the import failed
    from dynshape_kernels import cache_locator
    print(json.dumps(dict(error=error, marker=os.path.exists(marker),
                          active=pkg.active_package() is not None,
                          located=cache_locator._package_dir is not None)))
"""


def _load_in_fresh_process(route, path, marker, tmp_path, **env):
    """Load the package at ``path`` in a new interpreter with an empty Numba cache, through
    ``DYNSHAPE_PACKAGE`` (route "env") or ``load_package`` after import, and run two ops."""
    empty = tmp_path / f"empty_cache_{route}"
    empty.mkdir()
    if route == "env":
        env[package.ENV] = str(path)
    return _python(_LOAD, env, empty, route, path, marker)


@pytest.mark.parametrize("route", ["env", "load_package"])
@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
def test_a_payload_with_a_recomputed_manifest_is_refused_and_never_runs(pkg, tmp_path, route,
                                                                       suffix):
    marker = tmp_path / "payload_ran"
    _attack(pkg, suffix, marker)
    got = _load_in_fresh_process(route, pkg, marker, tmp_path)
    assert got["error"].startswith(f"PackageError: kernel package {pkg} has a bad signature, "
                                   "nothing was loaded: the signature by SHA256:")
    assert "does not match the manifest" in got["error"]
    assert not got["marker"] and not marker.exists()
    assert not got["active"] and not got["located"]


@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
def test_the_payload_is_live_once_the_signature_is_ignored(pkg, tmp_path, suffix):
    """The attack of the test above works when nothing checks signatures: the payload runs."""
    marker = tmp_path / "payload_ran"
    _attack(pkg, suffix, marker)
    (pkg / package.SIGNATURE).unlink()
    got = _load_in_fresh_process("env", pkg, marker, tmp_path,
                                 **{package.ENV_ALLOW_UNSIGNED: "1"})
    assert marker.exists() and got["marker"]


def test_an_attacker_removing_or_replacing_the_signature_is_refused(pkg, tmp_path):
    marker = tmp_path / "payload_ran"
    _attack(pkg, ".nbc", marker)
    pregenerate.sign(str(pkg), signing.create_key(tmp_path / "attacker.pem") and
                     str(tmp_path / "attacker.pem"))
    attacker = signing.load_private_key(str(tmp_path / "attacker.pem"))[1]
    got = _load_in_fresh_process("env", pkg, marker, tmp_path)
    assert got["error"].startswith(f"PackageError: kernel package {pkg} is signed by an "
                                   f"untrusted key (signed by {attacker.describe()}")
    (pkg / package.SIGNATURE).unlink()
    got = _load_in_fresh_process("load_package", pkg, marker, tmp_path)
    assert got["error"].startswith(f"PackageError: kernel package {pkg} is unsigned "
                                   "(signature.json is missing), nothing was loaded")
    assert not marker.exists() and not got["active"]


def test_nothing_of_the_package_is_located_before_it_is_verified(pkg, monkeypatch):
    seen = []
    monkeypatch.setattr(cache_locator, "use_package_dir", seen.append)
    _edit_manifest(pkg, lambda m: m.update(created="later"), sign=False)
    _refused(pkg, "bad signature")
    assert seen == []


def test_a_manifest_edited_after_signing_is_refused(pkg):
    _edit_manifest(pkg, lambda m: m["versions"].update(numba="0.1.0"), sign=False)
    _refused(pkg, r"bad signature, nothing was loaded: the signature by SHA256:\w+ \(.*\) "
                  r"does not match the manifest \(edited after signing, or forged\)\. A package "
                  r"is code; a bad signature is never accepted")
    _refused(pkg, "bad signature", allow_unsigned=True)      # never a fallback


def test_a_swapped_file_with_its_hash_updated_is_refused(pkg):
    one, other = sorted(pkg.glob("cache/dynshape_kernels/cpu/*.nbc"))[:2]
    one.write_bytes(other.read_bytes())
    rel = one.relative_to(pkg).as_posix()

    def update(m):
        m["files"][rel] = {"size": one.stat().st_size, "sha256": package.file_digest(str(one))}
    _edit_manifest(pkg, update, sign=False, checksum=True)
    _refused(pkg, "bad signature, nothing was loaded: .* does not match the manifest")


def test_a_signature_by_an_untrusted_key_is_refused_until_the_key_is_trusted(pkg, tmp_path,
                                                                             monkeypatch):
    key = signing.create_key(tmp_path / "ci.pem")
    assert pregenerate.sign(str(pkg), str(tmp_path / "ci.pem")) == key
    own = signing.own_public_key()
    _refused(pkg, rf"is signed by an untrusted key \(signed by {re.escape(key.describe())}, "
                  r"a key not trusted here\), nothing was loaded\. A package is code: .* "
                  rf"Trusted here \(the trust store .*\): {own.fingerprint} "
                  r".*`dynshape keys trust key\.pub`")
    p = package.load_package(str(pkg), trusted_keys=key.line())
    assert p.active and p.signer == key and f"signed by {key.describe()}" in p.describe()
    package.unload_package()
    (tmp_path / "ci.pub").write_text(key.line() + "\n")
    monkeypatch.setenv(signing.ENV_TRUSTED, str(tmp_path / "ci.pub"))
    assert package.load_package(str(pkg)).signer == key
    package.unload_package()
    # the variable replaces the trust store: the session's own key is not trusted with it
    _refused(pkg.parent / "nowhere", "no such directory")
    monkeypatch.setenv(signing.ENV_TRUSTED, own.line())
    _refused(pkg, rf"untrusted key .* Trusted here \({signing.ENV_TRUSTED}\): {own.fingerprint}")
    with pytest.warns(package.UnsignedPackageWarning, match="signed by an untrusted key"):
        p = package.load_package(str(pkg), allow_unsigned=True)
    assert p.active and p.signer is None
    package.unload_package()


def test_a_missing_signature_is_refused_unless_allow_unsigned(pkg):
    (pkg / package.SIGNATURE).unlink()
    _refused(pkg, r"is unsigned \(signature\.json is missing\), nothing was loaded\. A package "
                  r"is code: .*Rebuild it with `dynshape pregenerate`.* allow_unsigned=True "
                  r"\(DYNSHAPE_PACKAGE_ALLOW_UNSIGNED=1\)")
    with pytest.warns(package.UnsignedPackageWarning,
                      match=r"is unsigned .*runs the code in it"):
        p = package.load_package(str(pkg), allow_unsigned=True)
    assert p.active and p.signer is None and "NOT signed" in p.describe()
    package.unload_package()
    (pkg / "cache" / "stray.nbi").write_bytes(b"x")            # files are still checked
    with pytest.warns(package.UnsignedPackageWarning):
        _refused(pkg, "files not in the manifest", allow_unsigned=True)


def test_an_unreadable_signature_is_refused(pkg):
    (pkg / package.SIGNATURE).write_text("{not json")
    _refused(pkg, r"bad signature, nothing was loaded: signature\.json is unreadable")
    (pkg / package.SIGNATURE).write_text(json.dumps({"format": 1, "algorithm": "rsa"}))
    _refused(pkg, r"bad signature.*this dynshape reads format 1, ed25519")


def test_a_package_signed_with_another_key_from_the_command_line(built, tmp_path):
    """``--sign KEY``: the build checks the package trusting that key only; a host loads it
    once it trusts the exported public key."""
    key = signing.create_key(tmp_path / "release.pem")
    out = tmp_path / "release"
    r = subprocess.run([sys.executable, "-m", "dynshape", "pregenerate", "--family", "copy",
                        "--dtype", "uint32", "--out", str(out), "--sign",
                        str(tmp_path / "release.pem")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"signed     by {key.describe()}, key {tmp_path / 'release.pem'}" in r.stderr
    _refused(out, "signed by an untrusted key")
    host = dict(os.environ, DYNSHAPE_CONFIG_DIR=str(tmp_path / "execution_host"))
    exported = subprocess.run([sys.executable, "-m", "dynshape", "keys", "export", "--key",
                               str(tmp_path / "release.pem")], capture_output=True, text=True,
                              check=True).stdout
    subprocess.run([sys.executable, "-m", "dynshape", "keys", "trust", "-"], input=exported,
                   env=host, check=True, capture_output=True, text=True)
    empty = tmp_path / "empty_cache"
    empty.mkdir()
    got = _python("""
        import json, numpy as np, dynshape
        x = np.arange(10, dtype=np.uint32)
        p = dynshape.packages.load.active_package()
        print(json.dumps(dict(ok=bool((dynshape.run("copy", x) == x).all()), active=p.active,
                              signer=p.signer.fingerprint)))
    """, {package.ENV: str(out), "DYNSHAPE_CONFIG_DIR": host["DYNSHAPE_CONFIG_DIR"]}, empty)
    assert got == {"ok": True, "active": True, "signer": key.fingerprint}


def test_persisted_tables_stay_data_a_pickled_member_is_refused_unread(tmp_path):
    """Unlike a package, a parameter table holds no code: a pickled member is never read."""
    import numpy as np
    marker = tmp_path / "payload_ran"
    path = tmp_path / "table.npz"
    np.savez(path, header=np.array([_Touch(marker)], dtype=object),
             entries=np.zeros((1, 7), np.int64), common=np.zeros(4, np.int64),
             checksum=np.zeros(32, np.uint8))
    with pytest.raises(dynshape.TableFormatError, match="not a readable parameter-table file"):
        dynshape.ParamTable.load(str(path))
    assert not marker.exists()
    np.load(path, allow_pickle=True)["header"]            # the payload is live
    assert marker.exists()


_CHANGE_AFTER_LOADING = """
    import json, os, pickle, sys
    import numpy as np
    import dynshape
    from dynshape_kernels import drivers
    path, marker = sys.argv[1:3]
    pkg = dynshape.packages.load.active_package()
    before = [f"{f}/{d}" for f, d in drivers.loaded()]

    class Touch:
        def __reduce__(self):
            return (open, (marker, "x"))
    payload = pickle.dumps(Touch(), protocol=2)
    for d, _, names in os.walk(os.path.join(path, "cache")):     # after the checks
        for n in names:
            with open(os.path.join(d, n), "rb") as f:
                data = f.read()
            with open(os.path.join(d, n), "wb") as f:
                f.write(payload + data)
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    ok = bool(np.array_equal(dynshape.run("relu", x), np.maximum(x, 0)))
    print(json.dumps(dict(before=before, ok=ok, marker=os.path.exists(marker),
                          snapshot=pkg.snapshot, reads=pkg.cache_dir)))
"""


def test_files_changed_after_loading_are_never_read(pkg, tmp_path):
    """Drivers load lazily; Numba reads the verified private copy, not the package."""
    marker = tmp_path / "payload_ran"
    empty = tmp_path / "empty_cache"
    empty.mkdir()
    got = _python(_CHANGE_AFTER_LOADING, {package.ENV: str(pkg)}, empty, pkg, marker)
    assert "unary/float32" not in got["before"]        # so it loads after the change
    assert got["ok"] and not got["marker"] and not marker.exists()
    assert got["reads"] == os.path.join(got["snapshot"], "cache")
    assert not got["snapshot"].startswith(str(pkg))
    assert not os.path.exists(got["snapshot"])          # removed when the process exited
    with pytest.raises(package.PackageError, match="wrong size"):     # the change is real
        package.verify(str(pkg))


def test_the_verified_copy_is_private_and_a_refused_package_leaves_none(pkg, tmp_path,
                                                                        monkeypatch):
    import stat
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    os.mkdir(tmp_path / "tmp")
    p = package.load_package(str(pkg))
    try:
        assert os.path.dirname(p.snapshot) == str(tmp_path / "tmp")
        assert stat.S_IMODE(os.stat(p.snapshot).st_mode) == 0o700
        assert package.package_files(p.snapshot) == sorted(p.manifest["files"])
        for rel in p.manifest["files"]:
            assert (pkg / rel).read_bytes() == open(os.path.join(p.snapshot, rel), "rb").read()
    finally:
        package.unload_package()
    shutil.rmtree(p.snapshot)
    _edit_manifest(pkg, lambda m: m["versions"].update(numba="0.1.0"))
    _refused(pkg, "another host or version")
    _a_data_file(pkg).write_bytes(b"changed")
    _refused(pkg, "wrong size")
    assert os.listdir(tmp_path / "tmp") == []
