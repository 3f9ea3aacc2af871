"""dynshape blocks against NumPy blocks in the same Dask graph, on a 2-worker LocalCluster.

    python -m bench.bench_dask [--quick] [--elements N] [--json PATH]

An irregularly chunked float32 array of ``N`` elements (default 2e8: shape (N // 1000, 1000),
row chunks of random lengths, the last axis whole) is generated on the workers and kept
there (persisted); then, each timed as the wall time from submitting the graph to having
its result (outputs persisted on the workers, reductions brought back):

* fused chain: ``dynshape.dask.fuse([("add", "bias"), ("gelu", tanh), "softmax"])`` against
  the same blocks through the NumPy expression (``x + b``, tanh-GELU, softmax), and the
  elementwise chain ``[("add", "bias"), ("gelu", tanh), ("mul", 0.5), "exp"]``;
* reductions: ``sum`` over axis 0 and ``mean`` of everything, ``dynshape.dask.run`` (dask's
  tree reduction with dynshape partials) against ``x.sum(0)`` and ``x.mean()`` (dask's
  tree reduction with NumPy partials), with the same chunks.

Workers: 2 processes x 1 thread, each dynshape block call on one core
(``NUMBA_NUM_THREADS=1`` in the workers; NumPy's ufuncs are single-threaded too), so both
sides use the 2 cores through Dask's parallelism. Threads are not bound (``--no-bind`` is
implied: two worker processes binding "cores" would both land on core 0). The workers load
dynshape's drivers from the Numba cache of this process's environment; compilations on the
workers are counted and printed. Scheduler overhead: the same number of no-op tasks (one
per block of the fused graph), wall time per task; and per timed graph, (2 x wall - the
summed task compute time) / tasks from Dask's task stream.
"""
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.harness import environment  # noqa: E402

if __name__ == "__main__":
    os.environ["NUMBA_NUM_THREADS"] = "1"          # inherited by the worker processes
    environment.prepare(bind=False)

import logging  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bench.harness import session  # noqa: E402
from bench.harness.timing import fmt_time  # noqa: E402

C = np.float32(0.7978845608028654)
K = np.float32(0.044715)
STEPS = [("add", "bias"), ("gelu", {"approximate": "tanh"}), "softmax"]
EW_STEPS = [("add", "bias"), ("gelu", {"approximate": "tanh"}), ("mul", 0.5), "exp"]


def numpy_gelu(x, b):
    v = x + b
    return np.float32(0.5) * v * (np.float32(1) + np.tanh(C * (v + K * v * v * v)))


def numpy_chain(x, b):
    g = numpy_gelu(x, b)
    e = np.exp(g - g.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def numpy_elementwise(x, b):
    return np.exp(numpy_gelu(x, b) * np.float32(0.5))


def row_chunks(rows, rng, mean_rows):
    """Random row-chunk lengths (0.5x..1.5x ``mean_rows``) adding up to ``rows``."""
    out, left = [], rows
    while left > 0:
        n = min(left, int(rng.integers(mean_rows // 2, mean_rows * 3 // 2 + 1)))
        out.append(n)
        left -= n
    return tuple(out)


def main():
    ap = session.options(__doc__, "dask.json")
    ap.add_argument("--elements", type=float, default=2e8,
                    help="elements of the float32 array (default %(default)g)")
    ap.add_argument("--chunk-rows", type=int, default=None,
                    help="mean rows per chunk (default: about 24 chunks)")
    args = ap.parse_args()
    args.no_torch = args.no_ort = args.no_compile = True
    s = session.Session("dynshape.dask on a 2-worker LocalCluster", args)
    s.start(families=["fused", "reduce"], dtypes=["float32"])

    import dask
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    import dynshape.dask as dd
    from dynshape import testing

    n = int(2e6 if s.quick else args.elements)
    cols = 1000
    rows = n // cols
    rng = np.random.default_rng(0)
    chunks = (row_chunks(rows, rng, args.chunk_rows or max(1, rows // 24)), (cols,))
    s.print(f"array ({rows}, {cols}) float32 = {rows * cols / 1e6:.0f}e6 elements, "
            f"{rows * cols * 4 / 2 ** 20:.0f} MiB, {len(chunks[0])} row chunks of "
            f"{min(chunks[0])}..{max(chunks[0])} rows")
    dask.config.set({"distributed.worker.memory.target": False,
                     "distributed.worker.memory.spill": False})
    lc = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR,
                      memory_limit="9GB")
    client = Client(lc)
    try:
        results = _run(s, client, da, dd, testing, wait, chunks, cols)
    finally:
        client.close()
        lc.close()
    s.finish(results, config={"elements": rows * cols, "chunks": [list(c) for c in chunks]})


def _run(s, client, da, dd, testing, wait, chunks, cols):
    bias = np.linspace(-1, 1, cols, dtype=np.float32)
    x = da.random.default_rng(1).standard_normal((sum(chunks[0]), cols), chunks=chunks,
                                                 dtype=np.float32)
    x = x.persist()
    wait(x)
    client.run(testing.start_counting)

    fused_dyn = dd.fuse(STEPS)(x, bias=bias)
    fused_np = x.map_blocks(numpy_chain, bias, dtype=np.float32)
    graphs = {
        "fused chain": (fused_dyn, fused_np, True),
        "fused eltwise": (dd.fuse(EW_STEPS)(x, bias=bias),
                          x.map_blocks(numpy_elementwise, bias, dtype=np.float32), True),
        "sum axis 0": (dd.run("sum", x, axis=0), x.sum(axis=0), False),
        "mean all": (dd.run("mean", x), x.mean(), False),
    }

    def runner(g, persist):
        if persist:
            def call():
                p = client.persist(g)
                wait(p)
                del p
        else:
            def call():
                return client.compute(g).result()
        return call

    # verification (also the warm-up: drivers load on the workers here)
    for name, (gd, gn, persist) in graphs.items():
        err = float(abs(gd - gn).max().compute()) if persist else \
            float(np.max(np.abs(client.compute(gd).result() - client.compute(gn).result())))
        scale = 1.0 if persist else float(np.max(np.abs(client.compute(gn).result()))) or 1.0
        assert err / scale < 1e-4, f"{name}: dynshape and NumPy blocks differ by {err}"
    ntasks = len(chunks[0])
    rows = []
    s.print(f"{'graph':14s} {'tasks':>6s} {'dynshape':>11s} {'numpy':>11s} {'ratio':>7s} "
            f"{'overhead/task dyn':>18s} {'numpy':>8s}")
    for name, (gd, gn, persist) in graphs.items():
        fns = {"dynshape": runner(gd, persist), "numpy": runner(gn, persist)}
        for _ in range(2):              # steady state: tables of every block shape built and
            for fn in fns.values():     # optimized (the workers' background policy)
                fn()
        st = s.time(fns, first_s={"dynshape": 1.0, "numpy": 1.0},
                    blocks=2 if s.quick else 5, block_s=0.0, warm_calls=0)
        over = {k: _overhead(client, fn) for k, fn in fns.items()}
        n_t = {k: over[k][1] for k in fns}
        t = {k: v.median for k, v in st.items()}
        ratio = t["numpy"] / t["dynshape"]
        s.print(f"{name:14s} {n_t['dynshape']:>6d} {fmt_time(t['dynshape']):>11s} "
                f"{fmt_time(t['numpy']):>11s} {ratio:>6.2f}x "
                f"{fmt_time(over['dynshape'][0]):>18s} {fmt_time(over['numpy'][0]):>8s}")
        rows.append({"graph": name, "tasks": n_t, "seconds": {k: v.as_dict() for k, v in st.items()},
                     "ratio_numpy_over_dynshape": ratio,
                     "overhead_per_task_s": {k: over[k][0] for k in fns}})
    noop = da.ones((ntasks,), chunks=1, dtype=np.float32).map_blocks(lambda b: b)
    t0 = time.perf_counter()
    for _ in range(3):
        wait(client.persist(noop))
    per = (time.perf_counter() - t0) / 3 / (2 * ntasks)
    s.print(f"no-op graph of {ntasks} blocks ({2 * ntasks} tasks): {fmt_time(per)} per task "
            f"(submit to result, 2 workers)")
    counts = client.run(testing.counted)
    s.print("Numba compilations on the workers during the timed graphs: " +
            ", ".join(f"{c}" for c, _ in counts.values()))
    return {"graphs": rows, "noop_per_task_s": per,
            "worker_compilations": [c for c, _ in counts.values()]}


def _overhead(client, fn):
    """(scheduler overhead per task, tasks) of one run of ``fn`` from the task stream:
    (2 workers x wall - summed compute time) / tasks."""
    from distributed import get_task_stream
    t0 = time.perf_counter()
    with get_task_stream(client) as ts:
        fn()
    wall = time.perf_counter() - t0
    busy = sum(sum(p["stop"] - p["start"] for p in r["startstops"] if p["action"] == "compute")
               for r in ts.data)
    tasks = len(ts.data)
    return max(0.0, (2 * wall - busy) / max(tasks, 1)), tasks


if __name__ == "__main__":
    main()
