"""Where first use goes: each driver compiled alone, in a fresh process with an empty cache.

    python -m bench.kernel_level.compile_profile [--quick] [--pairs unary:float32,conv:float32]

Kernel-level on purpose: it times Numba's code library internals. Per (family, dtype), a
child process with an empty NUMBA_CACHE_DIR compiles the driver and reports:
- the wall seconds;
- how many functions Numba compiled;
- the seconds in LLVM's module passes and in code generation, summed over every library.
  Each library is optimized and code-generated again in every caller up to the driver, so
  a deep call tree pays several times;
- the helpers compiled for more than one signature with the same array types. These are
  usually a literal or a uint64 (``prange``) integer argument, and each costs a whole
  extra compile of the helper's call tree.

The default pairs are the demo's drivers. ``--quick`` compiles only the pool driver.
"""
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
from bench.harness import environment  # noqa: E402

if __name__ == "__main__":
    environment.prepare(bind=environment.wants_bind())

import json  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402

from bench.harness import session  # noqa: E402

DEMO_PAIRS = "conv:float32,matmul:float32,unary:float32,copy:uint32,binary:float32,pool:float32"

_CHILD = r"""
import importlib, json, pkgutil, sys, time
from numba import types
from numba.core import codegen, event
from numba.core.registry import CPUDispatcher
spent = {"module_passes": 0.0, "codegen": 0.0}
def timed(cls, name, key):
    orig = getattr(cls, name)
    def f(self, *a, **k):
        t = time.perf_counter()
        try:
            return orig(self, *a, **k)
        finally:
            spent[key] += time.perf_counter() - t
    setattr(cls, name, f)
timed(codegen.CPUCodeLibrary, "_optimize_final_module", "module_passes")
timed(codegen.JITCodeLibrary, "_finalize_specific", "codegen")
count = [0]
class Count(event.Listener):
    def on_start(self, ev): count[0] += 1
    def on_end(self, ev): pass
event.register("numba:compile", Count())
import dynshape  # noqa: F401
from dynshape_kernels import drivers
import dynshape_kernels.cpu as cpu
fam, dt = sys.argv[1].split(":")
t = time.perf_counter()
drivers.get(fam, dt)
wall = time.perf_counter() - t
def shape(sig):     # the signature with integers and booleans unliteral-ed and widened
    out = []
    for a in sig:
        a = types.unliteral(a)
        out.append("int" if isinstance(a, types.Integer) else str(a))
    return tuple(out)
dups = {}
for m in pkgutil.iter_modules(cpu.__path__):
    mod = importlib.import_module("dynshape_kernels.cpu." + m.name)
    for name, d in vars(mod).items():
        if isinstance(d, CPUDispatcher) and d.__module__ == mod.__name__:
            seen = {}
            for sig in d.signatures:
                seen.setdefault(shape(sig), []).append(sig)
            extra = sum(len(v) - 1 for v in seen.values())
            if extra:
                dups[f"{m.name}.{name}"] = extra
print(json.dumps({"wall_s": wall, "compiled": count[0], "duplicates": dups,
                  **{k + "_s": v for k, v in spent.items()}}))
"""


def profile(pair):
    """The child's report for one ``family:dtype``."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out = subprocess.run([sys.executable, "-c", _CHILD, pair], env=env,
                             capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = session.options(__doc__, "compile_profile.json")
    ap.add_argument("--pairs", default=DEMO_PAIRS,
                    help="family:dtype pairs, comma-separated (default: the demo's drivers)")
    args = ap.parse_args(argv)
    s = session.Session("dynshape driver compile profile (kernel-level)", args)
    s.start(warm=False)
    pairs = ["pool:float32"] if s.quick else args.pairs.split(",")
    s.print(f"  {'driver':16s} {'wall':>7s} {'fns':>5s} {'passes':>7s} {'codegen':>8s}  "
            f"helpers compiled again (extra signatures)")
    res = {}
    for pair in pairs:
        r = res[pair] = profile(pair)
        if "error" in r:
            s.print(f"  {pair:16s} failed: {r['error']}")
            continue
        dups = ", ".join(f"{k} +{v}" for k, v in sorted(r["duplicates"].items())) or "none"
        s.print(f"  {pair:16s} {r['wall_s']:6.1f}s {r['compiled']:5d} "
                f"{r['module_passes_s']:6.1f}s {r['codegen_s']:7.1f}s  {dups}")
    ok = [r for r in res.values() if "error" not in r]
    total = sum(r["wall_s"] for r in ok)
    s.print(f"  sum {total:.1f} s: on 2 cores at least {total / 2:.1f} s with the drivers "
            "shared out between two processes (`dynshape.warm(processes=2)`)")
    s.print("  passes / codegen: LLVM module passes and code generation summed over every "
            "library; extra signatures of the same array types (a literal or uint64 integer "
            "argument) compile a helper's call tree once more, and some are on purpose "
            "(a literal that prunes branches)")
    s.finish({"drivers": res}, {"pairs": pairs})


if __name__ == "__main__":
    main()
