"""Time from process start to the first result of an op on a never-seen shape, each case in a
fresh subprocess: dynshape with a kernel package (empty Numba cache), dynshape with a warm
Numba cache (yours), dynshape cold (empty cache, no package: every driver compiles), and
torch.compile with an empty and with a warm inductor cache.

    python -m bench.bench_first_start [--quick] [--shape MxN] [--repeats R] [--no-cold]
                                      [--no-torch] [--json PATH]

The op is a fused chain ``gelu(x + bias)`` (torch: ``F.gelu(x + b)``). Target: with a
package, at most 1 s from process start, of which dynshape's own work (its import beyond
NumPy, Numba and Numba's target set-up, package verification, first call) is a small
part; the split is printed. The package is built with the public command ``dynshape
pregenerate`` (reusing your Numba cache) and loaded through ``DYNSHAPE_PACKAGE``, as a user
would. Subprocesses inherit this process's prepared
environment; only the package and empty-cache cases point NUMBA_CACHE_DIR at a fresh
temporary directory, on purpose. ``--quick``: a small shape, one repeat, no cold and no
torch.compile cases. Wall-clock on a possibly shared machine: indicative only.
"""
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.harness import environment  # noqa: E402

if __name__ == "__main__":
    environment.prepare(bind=environment.wants_bind())

import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from bench.harness import session  # noqa: E402

_DYNSHAPE = r"""
import sys, time, json
t_script = time.time()
import numpy as np
t_numpy = time.time()
from numba.core import event
compiles = []
class Count(event.Listener):
    def on_start(self, ev): compiles.append(1)
    def on_end(self, ev): pass
event.register("numba:compile", Count())
from numba.core.registry import cpu_target       # Numba's own set-up before its first load
cpu_target.target_context.refresh()
cpu_target.typing_context.refresh()
t_numba = time.time()
import dynshape                        # loads the package named by DYNSHAPE_PACKAGE first
t_import = time.time()
workload, m, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
x = rng.standard_normal((m, n)).astype(np.float32)
b = rng.standard_normal(n).astype(np.float32)
t_inputs = time.time()
if workload == "fused":
    y = dynshape.fuse([("add", "bias"), "gelu"])(x, bias=b)
else:
    y = dynshape.run("softmax", dynshape.run("relu", x), axis=-1)
t_result = time.time()
cpu = time.process_time()
# the package loaded from DYNSHAPE_PACKAGE (its verification time); no top-level name yet
pkg = getattr(getattr(dynshape, "package", None), "active_package", lambda: None)()
print(json.dumps(dict(script=t_script, numpy=t_numpy, numba=t_numba, imported=t_import,
                      inputs=t_inputs, result=t_result, cpu=cpu, compilations=len(compiles),
                      package_s=pkg.seconds if pkg else None,
                      checksum=float(np.float64(y.sum())))))
"""

_TORCH = r"""
import sys, time, json
t_script = time.time()
import numpy as np
t_numpy = time.time()
import torch
import torch.nn.functional as F
t_import = time.time()
workload, m, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
x = torch.from_numpy(rng.standard_normal((m, n)).astype(np.float32))
b = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
if workload == "fused":
    fn = torch.compile(lambda x, b: F.gelu(x + b), dynamic=True)
else:
    fn = torch.compile(lambda x, b: torch.softmax(torch.relu(x), -1), dynamic=True)
t_inputs = time.time()
y = fn(x, b)
t_result = time.time()
cpu = time.process_time()
# the package loaded from DYNSHAPE_PACKAGE (its verification time); no top-level name yet
pkg = getattr(getattr(dynshape, "package", None), "active_package", lambda: None)()
print(json.dumps(dict(script=t_script, numpy=t_numpy, numba=t_numpy, imported=t_import,
                      inputs=t_inputs, result=t_result, cpu=cpu, compilations=None,
                      package_s=None,
                      checksum=float(y.double().sum()))))
"""


def _run(code, args, env):
    start = time.time()
    r = subprocess.run([sys.executable, "-c", code] + [str(a) for a in args],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    got = json.loads(r.stdout.strip().splitlines()[-1])
    got["start"] = start
    return got


def _split(g):
    """Seconds from process start: interpreter start-up, imports, inputs, first call."""
    return dict(total=g["result"] - g["start"], cpu=g["cpu"],
                startup=g["script"] - g["start"],
                numpy=g["numpy"] - g["script"], numba=g["numba"] - g["numpy"],
                library=g["imported"] - g["numba"], inputs=g["inputs"] - g["imported"],
                first_call=g["result"] - g["inputs"], package=g["package_s"],
                compilations=g["compilations"], checksum=g["checksum"])


def _env(**kw):
    """This process's environment (prepared by the harness) without a kernel package."""
    env = dict(os.environ)
    for k in ("DYNSHAPE_PACKAGE", "DYNSHAPE_PACKAGE_ALLOW_COMPILE"):
        env.pop(k, None)
    env.update({k: v for k, v in kw.items() if v is not None})
    return env


def build_package(path, families):
    """``dynshape pregenerate`` (the public command) into ``path``, reusing the Numba cache."""
    cmd = [sys.executable, "-m", "dynshape", "pregenerate", "--out", path, "--dtype", "float32"]
    for fam in families:
        cmd += ["--family", fam]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env())
    if r.returncode != 0:
        raise RuntimeError("dynshape pregenerate failed:\n" + r.stderr[-2000:])


def main(argv=None):
    ap = session.options(__doc__, "first_start.json")
    ap.add_argument("--shape", default="517x1531", help="the never-seen shape (M x N)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of the package case")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-compile cases")
    args = ap.parse_args(argv)
    s = session.Session("dynshape first start", args)
    s.start(families=["fused"], dtypes=["float32"])
    quick = s.quick
    m, n = (int(v) for v in ("33x47" if quick else args.shape).split("x"))
    no_cold = args.no_cold or quick
    no_torch = args.no_torch or args.no_compile or quick or s.peers.torch is None
    workload, families = "fused", ["fused"]
    tmp = tempfile.mkdtemp(prefix="dynshape-first-start-")
    rows, out = [], {"workload": workload, "shape": [m, n]}
    try:
        pkg = os.path.join(tmp, "package")
        t0 = time.perf_counter()
        build_package(pkg, families)
        out["package_build_s"] = time.perf_counter() - t0

        def empty_cache():
            return tempfile.mkdtemp(dir=tmp, prefix="nbcache-")

        runs = [_split(_run(_DYNSHAPE, [workload, m, n],
                            _env(NUMBA_CACHE_DIR=empty_cache(), DYNSHAPE_PACKAGE=pkg)))
                for _ in range(1 if quick else max(args.repeats, 1))]
        best = sorted(runs, key=lambda r: r["total"])[len(runs) // 2]
        rows.append(("dynshape, package, empty Numba cache", best))
        rows.append(("dynshape, warm Numba cache, no package",
                     _split(_run(_DYNSHAPE, [workload, m + 1, n + 3], _env()))))
        if not no_cold:
            rows.append(("dynshape, empty Numba cache, no package (compiles)",
                         _split(_run(_DYNSHAPE, [workload, m, n],
                                     _env(NUMBA_CACHE_DIR=empty_cache())))))
        if not no_torch:
            inductor = tempfile.mkdtemp(dir=tmp, prefix="inductor-")
            tenv = _env(TORCHINDUCTOR_CACHE_DIR=inductor)
            if not no_cold:
                rows.append(("torch.compile(dynamic=True), empty inductor cache",
                             _split(_run(_TORCH, [workload, m + 7, n + 5], tenv))))
            else:
                _run(_TORCH, [workload, m + 7, n + 5], tenv)       # fills the cache
            rows.append(("torch.compile(dynamic=True), warm inductor cache",
                         _split(_run(_TORCH, [workload, m, n], tenv))))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    P = s.print
    P(f"first result of {workload} on a new {m}x{n} float32 shape, from process start "
      f"(package built in {out['package_build_s']:.1f} s)")
    head = (f"{'case':52s} {'total':>7s} {'cpu':>7s} {'python':>7s} {'numpy':>7s} "
            f"{'numba':>7s} {'library':>8s} {'1st call':>8s} {'compiles':>8s}")
    P(head)
    for label, r in rows:
        comp = "-" if r["compilations"] is None else str(r["compilations"])
        P(f"{label:52s} {r['total']:7.2f} {r['cpu']:7.2f} {r['startup']:7.2f} "
          f"{r['numpy']:7.2f} {r['numba']:7.2f} {r['library']:8.2f} "
          f"{r['first_call']:8.2f} {comp:>8s}")
    p = rows[0][1]
    own = p["library"] + p["first_call"]
    P(f"with a package: {p['total']:.2f} s = python start-up {p['startup']:.2f} + numpy "
      f"{p['numpy']:.2f} + numba import and set-up {p['numba']:.2f} + import dynshape "
      f"{p['library']:.2f} (of which package verification "
      f"{p['package'] if p['package'] is None else format(p['package'], '.3f')}) + "
      f"inputs {p['inputs']:.2f} + first call {p['first_call']:.2f}; dynshape's own share "
      f"{own:.2f} s ({100 * own / p['total']:.0f}%); CPU time {p['cpu']:.2f} s")
    ok = p["total"] <= 1.0 and p["compilations"] == 0
    P(f"target (<= 1 s from process start, 0 compilations): "
      f"{'met' if ok else 'MISSED'} ({p['total']:.2f} s, {p['compilations']} compilations)")
    out["cases"] = {label: r for label, r in rows}
    s.finish(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
