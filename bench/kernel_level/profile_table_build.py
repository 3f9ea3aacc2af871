"""Profiling: the parts of a table build for a never-seen shape (relu float32).

    python -m bench.kernel_level.profile_table_build [--quick] [--shapes N]

Kernel-level on purpose: it calls the runtime's internals (``dynshape.runtime.plane``,
``dynshape.ops``) to time, per shape, ``executor._tiling`` (the Tiling problem),
``Tiling.simplified()/optimized()`` (the combination alone) and ``executor.build_table``
(both plus ParamTable construction and bind). The public view of the same thing (explain on
a miss minus explain on a hit) is in ``python -m bench.run_core``. Two layouts: a
contiguous 4-D shape (coalesces to one row) and a ``.transpose(0, 2, 1, 3)`` view.
"""
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
from bench.harness import environment  # noqa: E402

if __name__ == "__main__":
    environment.prepare(bind=environment.wants_bind())

import statistics  # noqa: E402

import numpy as np  # noqa: E402

from bench.harness import session  # noqa: E402
from bench.harness.timing import fmt_time, perf  # noqa: E402
from bench.run_core import LAYOUTS, _new_shapes, _placeholder  # noqa: E402


def combination_alone(arg, variant):
    """Seconds of the miss path's parts for one shape and the number of entries."""
    import math

    from dynshape import ops
    from dynshape.planning.plane import Tiling
    from dynshape.runtime.plane import PLANE
    from dynshape_kernels.abi.tail_mode import TailMode
    from dynshape_kernels.catalog import CATALOG
    a = _placeholder(arg) if isinstance(arg, tuple) else arg
    with ops.planning():
        launch = ops.get("relu").prepare([a], None, {})
    p = PLANE.geometry(launch)
    key = PLANE.key(launch, p, "cpu")
    t = perf()
    modes = frozenset(TailMode) if key.overlap else frozenset(TailMode) - {TailMode.OVERLAP}
    tiling = Tiling(CATALOG, key.family, key.op, key.dtype, key.bucket, (p.m, p.n),
                    math.prod(p.outer), any(abs(st[-1]) > 1 for st in p.strides), modes)
    t_tiling = perf() - t
    t = perf()
    comb = tiling.simplified() if variant == "simplified" else tiling.optimized()
    t_comb = perf() - t
    t = perf()
    PLANE.build(launch, p, key, variant)
    t_build = perf() - t
    return t_tiling, t_comb, t_build, len(comb.entries)


def main(argv=None):
    ap = session.options(__doc__, "profile_table_build.json")
    ap.add_argument("--shapes", type=int, default=200)
    args = ap.parse_args(argv)
    s = session.Session("dynshape table build profile (kernel-level)", args)
    s.start(families=["unary"], dtypes=["float32"])
    n = 10 if s.quick else args.shapes
    shapes = _new_shapes(np.random.default_rng(20240601), n)
    s.print(f"medians over {n} never-seen 4-D shapes (dims 2..48), relu float32")
    s.print(f"  {'variant | layout':50s} {'Tiling':>8s} {'comb.':>8s} {'b_table':>8s} "
            f"{'rest':>8s} {'entries':>7s}")
    res = {}
    for variant in ("simplified", "optimized"):
        for lname, mk in LAYOUTS.items():
            try:
                c = [combination_alone(mk(sh), variant) for sh in shapes]
            except Exception as exc:            # internals moved: say so
                s.print(f"  {variant + ' | ' + lname:50s} not measured "
                        f"({type(exc).__name__}: {exc})")
                res[f"{variant} | {lname}"] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            r = {"tiling_s": statistics.median(x[0] for x in c),
                 "combination_s": statistics.median(x[1] for x in c),
                 "build_table_s": statistics.median(x[2] for x in c),
                 "entries_median": statistics.median(x[3] for x in c)}
            rest = r["build_table_s"] - r["tiling_s"] - r["combination_s"]
            s.print(f"  {variant + ' | ' + lname:50s} {fmt_time(r['tiling_s']):>8s} "
                    f"{fmt_time(r['combination_s']):>8s} {fmt_time(r['build_table_s']):>8s} "
                    f"{fmt_time(rest if rest > 0 else None):>8s} {r['entries_median']:7.0f}")
            res[f"{variant} | {lname}"] = r
    s.print("  b_table = executor.build_table = Tiling (executor._tiling) + comb. "
            "(Tiling.simplified()/optimized() alone) + rest (ParamTable + bind)")
    s.finish({"table_build": res}, {"shapes": n})


if __name__ == "__main__":
    main()
