"""Signing keys and the trust store (dynshape.packages.signing) and ``dynshape keys``. Every test keeps
its configuration directory under tmp_path; packages themselves are tested in
test_package.py."""
import json
import os
import stat
import subprocess
import sys

import pytest

from dynshape import cli

from dynshape.packages import signing


@pytest.fixture
def config(tmp_path, monkeypatch):
    """An empty configuration directory of this test (not created yet)."""
    path = tmp_path / "config"
    monkeypatch.setenv(signing.ENV_CONFIG, str(path))
    monkeypatch.delenv(signing.ENV_TRUSTED, raising=False)
    return path


def test_the_configuration_directory_honours_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(signing.ENV_CONFIG, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert signing.config_dir() == str(tmp_path / "xdg" / "dynshape")
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert signing.config_dir() == str(tmp_path / "home" / ".config" / "dynshape")
    monkeypatch.setenv(signing.ENV_CONFIG, str(tmp_path / "mine"))
    assert signing.own_key_path() == str(tmp_path / "mine" / "signing_key.pem")
    assert signing.trust_store_path() == str(tmp_path / "mine" / "trusted_keys")
    assert not any(p.exists() for p in (tmp_path / "xdg", tmp_path / "home", tmp_path / "mine"))


def test_the_own_key_is_created_on_first_use_private_and_once(config):
    assert signing.own_public_key() is None and not config.exists()      # asking creates none
    key, public = signing.load_private_key()
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(signing.own_key_path()).st_mode) == 0o600
    assert signing.load_private_key()[1] == public == signing.own_public_key()
    assert signing.create_key(signing.own_key_path()) == public      # never replaced
    assert sorted(os.listdir(config)) == ["signing_key.pem", "signing_key.pub"]   # no tmp left
    assert (config / "signing_key.pub").read_text() == public.line() + "\n"
    # a key replaced by hand (openssl genpkey) is the own key from its first use on
    os.unlink(signing.own_key_path())
    other = signing.create_key(signing.own_key_path())
    assert other != public and signing.own_public_key() == other
    assert "@" in public.name


def test_key_lines_round_trip_and_bad_ones_are_named(config, tmp_path):
    public = signing.create_key(tmp_path / "ci.pem")
    assert public.name == "ci"
    line = public.line()
    assert line.startswith("dynshape-ed25519 ") and line.endswith(" ci")
    back = signing.parse_key_line(line)
    assert back == public and back.name == "ci" and back.fingerprint == public.fingerprint
    assert signing.parse_key_line(public.line(name=False)).name == ""
    with pytest.raises(signing.SigningKeyError, match=r"here: not a dynshape public key; "
                                                      r"expected 'dynshape-ed25519"):
        signing.parse_key_line("ssh-ed25519 AAAA", "here")
    with pytest.raises(signing.SigningKeyError, match="not 32 bytes of base64"):
        signing.parse_key_line("dynshape-ed25519 !!!!")
    with pytest.raises(signing.SigningKeyError, match="not 32 bytes of base64"):
        signing.parse_key_line("dynshape-ed25519 AAAA")
    (tmp_path / "keys").write_text(f"# team keys\n\n{line}\nnonsense\n")
    with pytest.raises(signing.SigningKeyError, match=r"keys line 4: not a dynshape"):
        signing.read_key_lines(tmp_path / "keys")


def test_private_keys_that_cannot_sign_packages_are_refused(config, tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    ec_pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    (tmp_path / "ec.pem").write_bytes(ec_pem)
    with pytest.raises(signing.SigningKeyError, match="packages are signed with Ed25519 keys"):
        signing.load_private_key(str(tmp_path / "ec.pem"))
    (tmp_path / "junk.pem").write_text("junk")
    with pytest.raises(signing.SigningKeyError, match="not an unencrypted PEM private key"):
        signing.load_private_key(str(tmp_path / "junk.pem"))
    with pytest.raises(signing.SigningKeyError, match="cannot read the signing key"):
        signing.load_private_key(str(tmp_path / "absent.pem"))


def test_the_trusted_keys_come_from_one_place(config, tmp_path, monkeypatch):
    a = signing.create_key(tmp_path / "a.pem")
    b = signing.create_key(tmp_path / "b.pem")
    assert signing.trusted_keys()[0] == []
    own = signing.load_private_key()[1]
    assert signing.trust(a) and not signing.trust(a)                 # once
    keys, source = signing.trusted_keys()
    assert keys == [a, own] and source.startswith(f"the trust store {config}")
    signing.trust(own)
    assert signing.trusted_keys()[0] == [a, own]                     # listed once
    (tmp_path / "b.pub").write_text(b.line() + "\n")
    monkeypatch.setenv(signing.ENV_TRUSTED, f"{tmp_path / 'b.pub'}{os.pathsep}{a.line()}")
    assert signing.trusted_keys() == ([b, a], signing.ENV_TRUSTED)  # replaces the store
    assert signing.trusted_keys([b.line()]) == ([b], "trusted_keys=")  # replaces the variable
    assert signing.trusted_keys(str(tmp_path / "b.pub"))[0] == [b]
    assert signing.trusted_keys([])[0] == []


def test_signatures_check_out_by_name(config, tmp_path):
    manifest = b'{"files": {}}'
    trusted = [signing.load_private_key()[1]]
    record = signing.sign(manifest)
    good = json.dumps(record).encode()
    assert signing.check(manifest, good, trusted).status == "signed"
    assert signing.check(manifest, good, trusted).key == trusted[0]
    assert signing.check(manifest + b" ", good, trusted).status == "bad"
    assert signing.check(manifest, None, trusted).status == "unsigned"
    assert signing.check(manifest, good, []).status == "untrusted"
    assert signing.check(manifest, b"[]", trusted).status == "bad"
    # the signature covers DOMAIN + manifest: a bare signature over the manifest is refused
    key = signing.load_private_key()[0]
    import base64
    bare = dict(record, signature=base64.b64encode(key.sign(manifest)).decode())
    assert signing.check(manifest, json.dumps(bare).encode(), trusted).status == "bad"


def test_keys_export_trust_list(config, tmp_path, monkeypatch, capsys):
    assert cli.main(["keys", "list"]) == 0
    assert "none yet (created on first use)" in capsys.readouterr().out
    assert cli.main(["keys", "export"]) == 0
    line = capsys.readouterr().out.strip()
    assert signing.parse_key_line(line) == signing.own_public_key()
    other = signing.create_key(tmp_path / "build_host.pem")
    assert cli.main(["keys", "export", "--key", str(tmp_path / "build_host.pem")]) == 0
    (tmp_path / "key.pub").write_text(capsys.readouterr().out)
    assert cli.main(["keys", "trust", str(tmp_path / "key.pub")]) == 0
    assert f"trusted {other.describe()}" in capsys.readouterr().out
    assert cli.main(["keys", "trust", str(tmp_path / "key.pub")]) == 0
    assert f"already trusted {other.describe()}" in capsys.readouterr().out
    assert cli.main(["keys", "list"]) == 0
    out = capsys.readouterr().out
    assert f"your key    {signing.own_public_key().describe()}" in out
    assert "trusted     2 keys" in out and other.fingerprint in out
    (tmp_path / "empty.pub").write_text("# nothing\n")
    assert cli.main(["keys", "trust", str(tmp_path / "empty.pub")]) == 2
    assert "no key lines" in capsys.readouterr().err
    assert cli.main(["keys", "trust", str(tmp_path / "absent.pub")]) == 2
    assert "cannot read the key file" in capsys.readouterr().err


def test_importing_dynshape_without_a_package_loads_no_cryptography(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNSHAPE_PACKAGE")}
    r = subprocess.run([sys.executable, "-c", "import sys, dynshape; print(sorted(m for m in "
                        "sys.modules if m.startswith(('cryptography', 'dynshape.packages.signing'))))"],
                       capture_output=True, text=True, env=env, check=True)
    assert r.stdout.strip() == "[]"
