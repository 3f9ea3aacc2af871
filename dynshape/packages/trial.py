"""The trial load of a new kernel package: in a fresh process with an empty Numba cache,
trusting only the key that signed it, every driver of the package must load without a
single compilation (``pregenerate`` refuses to finish otherwise)."""
import os
import subprocess
import sys
import tempfile

from dynshape.packages import signing
from dynshape.packages import load as package

_CHECK = """
import os, sys
from numba.core import event
count = []
class C(event.Listener):
    def on_start(self, ev): count.append(str(ev.data.get("dispatcher")))
    def on_end(self, ev): pass
event.register("numba:compile", C())
import dynshape
from dynshape_kernels import drivers
for pair in sys.argv[1:]:
    fam, dt = pair.split("/")
    drivers.get(fam, dt)
print(len(count), *count)
"""


def check(path, pairs, signer=None):
    """Load ``pairs`` from the package at ``path`` in a fresh process with an empty Numba
    cache, trusting only ``signer`` (a PublicKey; None: the keys trusted here); raise
    PackageError unless that compiles nothing."""
    with tempfile.TemporaryDirectory(prefix="dynshape-check-") as empty:
        env = dict(os.environ, NUMBA_CACHE_DIR=empty)
        env[package.ENV] = path
        env.pop(package.ENV_ALLOW_COMPILE, None)
        env.pop(package.ENV_ALLOW_UNSIGNED, None)
        if signer is not None:
            env[signing.ENV_TRUSTED] = signer.line(name=False)
        r = subprocess.run([sys.executable, "-c", _CHECK] + [f"{f}/{d}" for f, d in pairs],
                           capture_output=True, text=True, env=env)
    if r.returncode != 0 or r.stdout.split()[:1] != ["0"]:
        tail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-6:]
        raise package.PackageError(f"the new package at {path} does not load without "
                                   "compiling:\n" + "\n".join(tail))
