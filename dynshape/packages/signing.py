"""Signing keys and the trust store of kernel packages.

A kernel package is code (Numba reads its files with ``pickle``), so a package is only loaded
when its manifest carries an Ed25519 signature by a trusted key (:mod:`dynshape.packages.load`
decides; this module holds the keys and the cryptography, done by the ``cryptography``
library, imported only when a key is used).

Files, in the configuration directory (``DYNSHAPE_CONFIG_DIR``, else
``$XDG_CONFIG_HOME/dynshape``, else ``~/.config/dynshape``; created with mode 0700)::

    signing_key.pem   this user's private key (PKCS#8 PEM, mode 0600), created on first use
    signing_key.pub   its public key line (read when checking, so that a package signed by
                      this user's key is checked without parsing the private key)
    trusted_keys      public keys whose packages load here, one key line each

A key line is ``dynshape-ed25519 <base64 of the 32-byte public key> [name]``; ``dynshape keys
export`` prints one, ``dynshape keys trust`` adds one to the trust store. The keys trusted are
the ``trusted`` argument of :func:`trusted_keys` if given, else those ``DYNSHAPE_TRUSTED_KEYS``
names, else the trust store plus this user's own public key (when it exists).

A package's signature lives in ``<package>/signature.json`` and signs the exact bytes of its
``manifest.json`` (which lists every file's size and SHA-256), prefixed by :data:`DOMAIN`.
"""
import base64
import binascii
import collections
import hashlib
import json
import os
import tempfile

from dynshape.errors import DynshapeError

ENV_CONFIG = "DYNSHAPE_CONFIG_DIR"
ENV_TRUSTED = "DYNSHAPE_TRUSTED_KEYS"
KEY_TYPE = "dynshape-ed25519"
OWN_KEY = "signing_key.pem"
OWN_PUBLIC = "signing_key.pub"
TRUST_STORE = "trusted_keys"
SIGNATURE = "signature.json"
SIGNATURE_FORMAT = 1
DOMAIN = b"dynshape kernel package manifest, signature format 1\n"


class SigningKeyError(DynshapeError, ValueError):
    """A private or public key that cannot be read or used, or a malformed key line."""


class PublicKey(collections.namedtuple("PublicKey", "raw name")):
    """An Ed25519 public key (``raw``: its 32 bytes) and a name for people (may be empty)."""

    @property
    def fingerprint(self):
        """``SHA256:`` and the first 16 hex digits of the SHA-256 of the raw key."""
        return "SHA256:" + hashlib.sha256(self.raw).hexdigest()[:16]

    def line(self, name=True):
        """The key line (with the name unless ``name`` is false)."""
        text = f"{KEY_TYPE} {base64.b64encode(self.raw).decode()}"
        return f"{text} {self.name}" if name and self.name else text

    def describe(self):
        return self.fingerprint + (f" ({self.name})" if self.name else "")

    def __eq__(self, other):          # the same key whatever it is called
        return isinstance(other, PublicKey) and self.raw == other.raw

    def __hash__(self):
        return hash(self.raw)


def parse_key_line(text, where="key line"):
    """The PublicKey of one key line; raises SigningKeyError naming ``where``."""
    parts = text.strip().split(None, 2)
    if len(parts) < 2 or parts[0] != KEY_TYPE:
        raise SigningKeyError(f"{where}: not a dynshape public key; expected "
                              f"'{KEY_TYPE} <base64 key> [name]' (from `dynshape keys export`)")
    try:
        raw = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise SigningKeyError(f"{where}: the key is not 32 bytes of base64 (an Ed25519 "
                              "public key)")
    return PublicKey(raw, parts[2].strip() if len(parts) > 2 else "")


def read_key_lines(path):
    """The keys of a key file (blank lines and ``#`` comments skipped)."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise SigningKeyError(f"cannot read the key file {path}: {exc.strerror}") from None
    return [parse_key_line(line, f"{path} line {i}") for i, line in enumerate(lines, 1)
            if line.strip() and not line.lstrip().startswith("#")]


# ---------------------------------------------------------------- where keys live


from dynshape.runtime.config import config_dir  # noqa: E402


def own_key_path():
    return os.path.join(config_dir(), OWN_KEY)


def trust_store_path():
    return os.path.join(config_dir(), TRUST_STORE)


def _write_new(path, data, mode):
    """Write ``data`` to ``path`` atomically unless ``path`` exists (then leave it)."""
    d = os.path.dirname(path)
    os.makedirs(d, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".new-")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            os.link(tmp, path)         # fails if another process created it first
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


# ---------------------------------------------------------------- private keys


def create_key(path):
    """Create a new private key at ``path`` (PKCS#8 PEM, mode 0600) unless one exists there;
    return its public key (for this user's own key also written to ``signing_key.pub``)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    _write_new(os.path.abspath(path), pem, 0o600)
    return load_private_key(path)[1]


def load_private_key(path=None):
    """``(private key, PublicKey)`` of the PEM file ``path`` (an unencrypted Ed25519 key, as
    ``openssl genpkey -algorithm ed25519`` writes). Without ``path``: this user's own key,
    created on first use (and ``signing_key.pub`` brought up to date with it)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    if path is None:
        path = own_key_path()
        if not os.path.exists(path):
            create_key(path)
    try:
        with open(path, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
    except OSError as exc:
        raise SigningKeyError(f"cannot read the signing key {path}: {exc.strerror}") from None
    except (ValueError, TypeError) as exc:
        raise SigningKeyError(f"{path}: not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"{path}: a {type(key).__name__.lstrip('_')}; packages are "
                              "signed with Ed25519 keys (openssl genpkey -algorithm ed25519)")
    raw = key.public_key().public_bytes(serialization.Encoding.Raw,
                                        serialization.PublicFormat.Raw)
    public = PublicKey(raw, _key_name(path))
    if os.path.abspath(path) == own_key_path():
        _write_public(public)
    return key, public


def _write_public(public):
    path = os.path.join(config_dir(), OWN_PUBLIC)
    text = public.line() + "\n"
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(dir=config_dir(), prefix=".new-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _key_name(path):
    if os.path.abspath(path) == own_key_path():
        import getpass
        import socket
        try:
            return f"{getpass.getuser()}@{socket.gethostname()}"
        except (KeyError, OSError):
            return socket.gethostname()
    return os.path.splitext(os.path.basename(path))[0]


def own_public_key():
    """This user's public key if the key pair exists (never creates it), else None: read from
    ``signing_key.pub`` (rewritten whenever the private key is used) if present."""
    pem, pub = own_key_path(), os.path.join(config_dir(), OWN_PUBLIC)
    if not os.path.exists(pem):
        return None
    keys = read_key_lines(pub) if os.path.exists(pub) else []
    return keys[0] if len(keys) == 1 else load_private_key(pem)[1]


# ---------------------------------------------------------------- trust


def trusted_keys(trusted=None):
    """``(keys, source)``: the public keys trusted now and where they came from.

    ``trusted``: a key line, a key file path or a PublicKey, or a list of them; it replaces
    every other source. Else ``DYNSHAPE_TRUSTED_KEYS`` (key files or key lines separated by
    ``os.pathsep``) replaces them. Else the trust store plus this user's own public key.
    """
    if trusted is None and os.environ.get(ENV_TRUSTED):
        trusted = [t for t in os.environ[ENV_TRUSTED].split(os.pathsep) if t.strip()]
        source = ENV_TRUSTED
    elif trusted is not None:
        source = "trusted_keys="
    else:
        keys = read_key_lines(trust_store_path()) if os.path.exists(trust_store_path()) else []
        own = own_public_key()
        return (keys + [own] if own is not None and own not in keys else keys), \
            f"the trust store {trust_store_path()} and your own key"
    if isinstance(trusted, (str, os.PathLike, PublicKey)):
        trusted = [trusted]
    keys = []
    for t in trusted:
        if isinstance(t, PublicKey):
            keys.append(t)
        elif str(t).lstrip().startswith(KEY_TYPE + " "):
            keys.append(parse_key_line(str(t), source))
        else:
            keys.extend(read_key_lines(os.fspath(t)))
    return keys, source


def trust(key):
    """Add ``key`` (a PublicKey) to the trust store; return False if it was there already."""
    path = trust_store_path()
    present = read_key_lines(path) if os.path.exists(path) else []
    if key in present:
        return False
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with open(path, "a") as f:
        f.write(key.line() + "\n")
    return True


# ---------------------------------------------------------------- signatures


def sign(manifest_bytes, key_path=None):
    """The signature record (a dict for ``signature.json``) of ``manifest_bytes``, signed
    with the key at ``key_path`` (default: this user's own key, created on first use)."""
    key, public = load_private_key(key_path)
    return {"format": SIGNATURE_FORMAT, "algorithm": "ed25519",
            "key": base64.b64encode(public.raw).decode(), "key_name": public.name,
            "signature": base64.b64encode(key.sign(DOMAIN + manifest_bytes)).decode()}


Verdict = collections.namedtuple("Verdict", "status key detail")
Verdict.__doc__ = """How a signature checked out. ``status``: "signed" (by a trusted key),
"unsigned", "untrusted" (a valid or invalid signature by a key not trusted here) or "bad"
(by a trusted key, but not over these bytes, or unreadable); ``key``: the signer's
PublicKey or None; ``detail``: words for a message."""


def check(manifest_bytes, signature_bytes, trusted):
    """The Verdict of ``signature_bytes`` (the contents of ``signature.json``, or None when
    there is none) over ``manifest_bytes``, given the trusted PublicKeys."""
    if signature_bytes is None:
        return Verdict("unsigned", None, f"{SIGNATURE} is missing")
    try:
        rec = json.loads(signature_bytes)
        if rec.get("format") != SIGNATURE_FORMAT or rec.get("algorithm") != "ed25519":
            return Verdict("bad", None, f"{SIGNATURE} has format {rec.get('format')!r} and "
                           f"algorithm {rec.get('algorithm')!r}; this dynshape reads format "
                           f"{SIGNATURE_FORMAT}, ed25519")
        raw = base64.b64decode(rec["key"], validate=True)
        sig = base64.b64decode(rec["signature"], validate=True)
        name = str(rec.get("key_name") or "")
    except (ValueError, TypeError, KeyError, AttributeError, binascii.Error):
        return Verdict("bad", None, f"{SIGNATURE} is unreadable")
    if len(raw) != 32:
        return Verdict("bad", None, f"{SIGNATURE} names no Ed25519 key")
    key = PublicKey(raw, name)
    if key not in trusted:
        return Verdict("untrusted", key, f"signed by {key.describe()}, a key not trusted here")
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(sig, DOMAIN + manifest_bytes)
    except InvalidSignature:
        return Verdict("bad", key, f"the signature by {key.describe()} does not match the "
                       "manifest (edited after signing, or forged)")
    return Verdict("signed", key, f"signed by {key.describe()}")
