"""Verifying a kernel package before anything of it is read by Numba: the signature over the
manifest by a trusted key, then every file's size and SHA-256 (copied as it is hashed into a
private snapshot that Numba then reads), no file missing or extra, the manifest checksum."""
import json
import os
import warnings


from dynshape.packages.manifest import (_REQUIRED, CACHE, ENV_ALLOW_UNSIGNED, FORMAT,  # noqa: F401
                                        MANIFEST, SIGNATURE, PackageError,
                                        UnsignedPackageWarning, _listed, _read, file_digest,
                                        manifest_checksum, package_files)

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
    if os.path.isfile(path):
        raise PackageError(f"{path}: a file, not a kernel package; a package is the directory "
                           f"`dynshape pregenerate --out DIR` writes")
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
