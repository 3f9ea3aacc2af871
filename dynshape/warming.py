"""Warming: load (or, the first time on a machine, compile) the compiled drivers up front.

A driver is loaded from the active kernel package or Numba's on-disk cache in well under a
second; without either it is compiled, which takes seconds to tens of seconds per driver.
``warm`` does this for a set of families and dtypes so that no later call compiles, and
reports its progress (which driver, n of m, loaded or compiled, elapsed time) when asked.
With ``processes > 1`` the drivers missing from the cache are compiled in that many child
processes in parallel (Numba compiles on one core), then loaded here: on 2 cores the first
use of a machine takes about half the time, and the compiler's memory is returned when
each child exits.
"""
import os
import queue
import subprocess
import sys
import threading
import time

import numpy as np
from dynshape_kernels.catalog import CATALOG

from dynshape.errors import SettingError


def driver_families():
    """family -> the dtypes its driver is built for (catalog families, then the others
    whose drivers declare their dtypes, like the fused-sequence driver)."""
    from dynshape_kernels import drivers
    known = {f: tuple(spec.dtypes) for f, spec in CATALOG.families.items()}
    for f in drivers.registered():
        if f not in known and drivers.declared_dtypes(f) is not None:
            known[f] = tuple(drivers.declared_dtypes(f))
    return known


def plan(families=None, dtypes=None):
    """The (family, dtype) driver pairs ``warm`` loads, in order, without duplicates."""
    known = driver_families()
    pairs = []
    for fam in families or known:
        if fam not in known:
            raise SettingError(f"unknown kernel family {fam!r}; known: {', '.join(known)}")
        for dt in (dtypes or known[fam]):
            try:
                np_dt = np.dtype(dt) if dt != "bfloat16" else np.dtype(np.uint16)
                name = dt if dt == "bfloat16" else np_dt.name
            except TypeError:
                raise SettingError(f"unknown dtype {dt!r}; accepted: "
                                   f"{', '.join(sorted(set(sum(known.values(), ()))))}") from None
            # copies move bytes: one driver per item size
            name = f"uint{8 * np_dt.itemsize}" if fam == "copy" else name
            if name in known[fam] and (fam, name) not in pairs:
                pairs.append((fam, name))
    if dtypes and not pairs:
        raise SettingError(f"no driver of {', '.join(families or known)} is built for "
                           f"{', '.join(map(str, dtypes))}; accepted: " +
                           "; ".join(f"{f}: {', '.join(known[f])}" for f in families or known))
    return pairs


def cache_location():
    """Where compiled drivers are kept between processes (for messages)."""
    from dynshape_kernels import drivers
    if getattr(drivers, "_package", None) is not None:
        return "the kernel package in use"
    d = os.environ.get("NUMBA_CACHE_DIR")
    return f"Numba's cache in {d}" if d else "Numba's cache next to the installed sources"


# compile seconds per float32 driver on a quiet 2-core machine, each one alone or two at a
# time, with the step interpreter ("steps") already compiled; they only steer the schedule
# (share work among child processes: longest group first, each to the least loaded child)
_COMPILE_COST = {"unary": 7, "copy": 4, "binary": 7, "reduce": 9, "rowwise": 12,
                 "matmul": 8, "conv": 14, "pool": 4, "fused": 18, "steps": 6}
#: the pseudo-family of a child's job that compiles the step interpreter of a dtype
STEPS = "steps"


def warm(families=None, dtypes=None, progress=None, *, pairs=None, processes=1):
    """Load or compile the drivers of ``families`` (default: all, the fused-sequence driver
    included) for ``dtypes`` (default: all each supports), so that no later call compiles.
    ``pairs``: an explicit list of ``(family, dtype)`` instead (see :func:`plan`).

    ``progress``: None (silent), True (lines on stderr) or a writable text file: one line per
    driver (n of m, family and dtype, loaded or compiled, seconds, total elapsed), and a last
    line saying where later runs load them from. Returns a list of
    ``(family, dtype, seconds, compiled)``.

    ``processes``: compile the drivers missing from the cache in this many child processes
    at once (default 1: compile here, one after the other).
    """
    from dynshape_kernels import drivers

    from dynshape.testing.compilations import count_compilations
    if pairs is None:
        pairs = plan(families, dtypes)
    else:
        pairs = list(dict.fromkeys(p for fam, dt in pairs for p in plan([fam], [dt])))
    stream = sys.stderr if progress is True else progress
    t0 = time.perf_counter()
    done = []
    if processes > 1:
        from dynshape_kernels import drivers as _d
        missing = [p for p in pairs if not _d.load_cached(*p)]
        if len(missing) > 1:
            done = _compile_in_children(missing, processes, stream, t0, len(pairs))
    compiled_elsewhere = {(f, d) for f, d, _, _ in done}
    i = len(done)
    for fam, dt in pairs:
        if (fam, dt) in compiled_elsewhere:
            drivers.get(fam, dt)            # from the cache the children filled
            continue
        i += 1
        if stream is not None:
            print(f"  [{i}/{len(pairs)}] {fam} {dt} ...", end="", file=stream, flush=True)
        t = time.perf_counter()
        with count_compilations() as c:
            drivers.get(fam, dt)
        dt_s = time.perf_counter() - t
        done.append((fam, dt, dt_s, c.count > 0))
        if stream is not None:
            what = "compiled" if c.count else "loaded"
            print(f" {what} in {dt_s:.1f} s (elapsed {time.perf_counter() - t0:.1f} s)",
                  file=stream, flush=True)
    n_compiled = sum(1 for d in done if d[3])
    if stream is not None and n_compiled:
        print(f"  compiled {n_compiled} of {len(done)} drivers once for this machine; later "
              f"runs load them from {cache_location()} in well under a second each",
              file=stream, flush=True)
    return done


def _schedule(pairs, processes):
    """The jobs of each child. Drivers that share a Numba cache index (their Python
    function, or a function they reach by address: ``cpu.address_link``) go to the same
    child, longest group first to the least loaded child: two processes saving entries of
    one index at once may lose one, which the parent then compiles again. The step
    interpreter of each dtype (the pseudo-family ``steps``) heads the child of the drivers
    that call it, which come after that child's other drivers."""
    from dynshape_kernels import drivers
    index_of = {}                   # cache index name -> group id (union-find)
    parent = {}

    def find(g):
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g
    for i, (fam, _) in enumerate(pairs):
        parent[i] = i
        for name in (drivers.function_name(fam), *(l.name for l in drivers.links_of(fam))):
            j = index_of.setdefault(name, i)
            parent[find(i)] = find(j)
    groups = {}
    for i, pair in enumerate(pairs):
        groups.setdefault(find(i), []).append(pair)
    stepping = {(f, d) for f, d in pairs if drivers.runs_step_programs(f)}
    for g in groups.values():
        for dt in dict.fromkeys(d for p in g if p in stepping for d in [p[1]]):
            g.insert(0, (STEPS, dt))
    work = [[] for _ in range(min(processes, len(groups)))]
    load = [0.0] * len(work)
    cost = lambda g: sum(_COMPILE_COST.get(f, 30) for f, _ in g)  # noqa: E731
    for g in sorted(groups.values(), key=lambda g: -cost(g)):
        k = load.index(min(load))
        work[k] += g
        load[k] += cost(g)
    return [sorted(w, key=lambda p: (p[0] != STEPS) + (p in stepping)) for w in work]


def _compile_in_children(pairs, processes, stream, t0, total):
    """Compile ``pairs`` into Numba's on-disk cache in ``processes`` child processes; pairs
    whose drivers share a Python function (and so a cache index) go to the same child.
    Returns ``(family, dtype, seconds, True)`` per pair, in the order they finished."""
    work = _schedule(pairs, processes)
    lines = queue.Queue()
    children = []
    for chunk in work:
        args = [f"{f}:{d}" for f, d in chunk]
        p = subprocess.Popen([sys.executable, "-m", "dynshape.warming", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=_relay, args=(p, lines), daemon=True).start()
        children.append(p)
    done, output, running = [], [], len(children)
    while running:
        kind, p, text = lines.get()
        if kind == "eof":
            running -= 1
            continue
        output.append(text)
        parts = text.split()
        if len(parts) == 4 and parts[0] == "compiled":
            fam, dt, sec = parts[1], parts[2], float(parts[3])
            done.append((fam, dt, sec, True))
            if stream is not None:
                print(f"  [{len(done)}/{total}] {fam} {dt} ... compiled in {sec:.1f} s in a "
                      f"child process (elapsed {time.perf_counter() - t0:.1f} s)",
                      file=stream, flush=True)
    failed = [p for p in children if p.wait() != 0]
    if failed:
        tail = "".join(output[-20:])
        raise RuntimeError(f"compiling drivers in a child process failed:\n{tail}")
    return done


def _relay(proc, lines):
    for text in proc.stdout:
        lines.put(("line", proc, text))
    lines.put(("eof", proc, ""))


def _child(args):
    """Entry point of a compiling child: load or compile each ``family:dtype``."""
    from dynshape_kernels import drivers

    import dynshape  # noqa: F401  (registers every family's driver)
    from dynshape_kernels.cpu import step_link
    for arg in args:
        fam, dt = arg.split(":")
        t = time.perf_counter()
        if fam == STEPS:
            step_link.STEPS.ensure(dt)
            continue
        drivers.get(fam, dt)
        print(f"compiled {fam} {dt} {time.perf_counter() - t:.2f}", flush=True)


if __name__ == "__main__":
    _child(sys.argv[1:])
