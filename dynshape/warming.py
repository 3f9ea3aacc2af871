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
import itertools
import os
import queue
import subprocess
import sys
import threading
import time

import numpy as np
from dynshape_kernels import compile_child
from dynshape_kernels.catalog import CATALOG

from dynshape.errors import SettingError
from dynshape.ops.elementwise import copy_driver


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
            # copies move bytes: one driver per item size (items of 4 and 8 bytes on the
            # unary family's float driver of that size: ops.elementwise.copy_driver)
            use = fam
            if fam == "copy" and f"uint{8 * np_dt.itemsize}" in known[fam]:
                use, name = copy_driver(np_dt.itemsize)
            if name in known.get(use, ()) and (use, name) not in pairs:
                pairs.append((use, name))
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


# compile seconds per float32 driver, two compiling at a time on 2 cores (each child on one
# core; alone they take ~15% less), with the step interpreter ("steps") already compiled:
# the demo's five in a clean-clone CI run at fac4617 (conv 16.3, binary 14.9, matmul 11.1,
# unary 8.4, pool 4.3), the others from one process compiling them in turn, scaled alike.
# Only their ratios matter: they plan the order in which idle children take ready jobs.
_COMPILE_COST = {"unary": 8.5, "copy": 4, "binary": 15, "reduce": 13.5, "rowwise": 19,
                 "matmul": 11, "conv": 16, "pool": 4.5, "fused": 13, "steps": 6}
#: job sets up to this size are ordered by trying every order (720 simulations at most)
_EXACT_JOBS = 6
#: the pseudo-family of a child's job that compiles the step interpreter of a dtype
STEPS = compile_child.STEPS


def warm(families=None, dtypes=None, progress=None, *, pairs=None, processes=1,
         epilogues=True):
    """Load or compile the drivers of ``families`` (default: all, the fused-sequence driver
    included) for ``dtypes`` (default: all each supports), so that no later call compiles.
    ``pairs``: an explicit list of ``(family, dtype)`` instead (see :func:`plan`).

    ``epilogues``: also the step interpreter that conv2d and matmul run only as a fused
    sequence's epilogue (default True). False leaves it to the first such call (it compiles
    then, unless cached): plain conv2d and matmul calls never need it.

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
            done = _compile_in_children(missing, processes, stream, t0, len(pairs),
                                        epilogues, loaded=drivers.get)

    def load(fam, dt):
        drivers.get(fam, dt)
        if epilogues:
            drivers.fill_on_demand(fam, dt)
    compiled_elsewhere = {(f, d) for f, d, _, _ in done}
    i = len(done)
    for fam, dt in pairs:
        if (fam, dt) in compiled_elsewhere:
            load(fam, dt)                   # from the cache the children filled
            continue
        i += 1
        if stream is not None:
            print(f"  [{i}/{len(pairs)}] {fam} {dt} ...", end="", file=stream, flush=True)
        t = time.perf_counter()
        with count_compilations() as c:
            load(fam, dt)
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


def _jobs(pairs, epilogues=True):
    """The children's jobs: each driver pair, and ``(STEPS, dtype)`` for the step interpreter
    of each dtype whose drivers call it (with ``epilogues`` False: whose drivers need it to
    load, the fused-sequence driver's). Per job, ``(locks, needs)``:

    * ``locks``: the Numba cache indexes the job writes: the driver's Python function (unary
      and copy share one) and the functions it reaches by address (``cpu.address_link``).
      Two processes saving entries of one index at once may lose one, so no two running
      jobs share a lock. A driver only reads the step interpreter's index; the
      interpreter's own job writes it.
    * ``needs``: the jobs that must be done first (a driver that runs step programs loads
      its dtype's interpreter, compiled by another job; conv and matmul, which call it on
      demand only, compile without it)."""
    from dynshape_kernels import drivers
    from dynshape_kernels.cpu import step_link

    def loads_with_steps(fam):
        return (drivers.runs_step_programs(fam)
                and step_link.STEPS not in drivers.on_demand_links(fam))
    jobs = {}
    for fam, dt in pairs:
        if loads_with_steps(fam) or (epilogues and drivers.runs_step_programs(fam)):
            jobs.setdefault((STEPS, dt), (frozenset({step_link.STEPS.name}), frozenset()))
    for fam, dt in pairs:
        locks = {drivers.function_name(fam)}
        locks |= {link.name for link in drivers.links_of(fam) if link is not step_link.STEPS}
        needs = {(STEPS, dt)} if loads_with_steps(fam) else set()
        jobs[(fam, dt)] = (frozenset(locks), frozenset(needs))
    return jobs


def _pick(jobs, pending, done, held, order):
    """The job an idle child starts next, or None: the first in ``order`` (:func:`_order`)
    that is pending, whose needs are done and whose locks no running job holds (``held``)."""
    for j in order:
        if j in pending and jobs[j][1] <= done and not jobs[j][0] & held:
            return j
    return None


def _cost(job):
    return _COMPILE_COST.get(job[0], 30)


def _makespan(jobs, order, children):
    """When the last job ends if ``children`` idle children take jobs by :func:`_pick` in
    ``order``, each job taking its ``_COMPILE_COST`` seconds; inf if they cannot all run."""
    pending, done, held, busy, now = set(jobs), set(), set(), [], 0.0
    while pending or busy:
        while len(busy) < children:
            job = _pick(jobs, pending, done, held, order)
            if job is None:
                break
            pending.discard(job)
            held |= jobs[job][0]
            busy.append((now + _cost(job), job))
        if not busy:
            return float("inf")
        busy.sort()
        now, job = busy.pop(0)
        held -= jobs[job][0]
        done.add(job)
    return now


def _order(jobs, children):
    """The order in which idle children take the ready jobs: the one whose simulated
    schedule (:func:`_makespan`) ends first. Step interpreters first (drivers wait on
    them), then the longest first; that order is the start, and for up to ``_EXACT_JOBS``
    jobs every other order is tried, for more any swap of two jobs that ends sooner is
    taken, for two rounds. Longest-first alone can leave the short jobs on one child: the
    demo's five (conv 16.3 s, binary 14.9, matmul 11.1, unary 8.4, pool 4.3) end at 29.0
    that way, and at 27.6 as conv + matmul beside binary + unary + pool."""
    start = sorted(jobs, key=lambda j: (j[0] != STEPS, -_cost(j), j))
    best, best_t = start, _makespan(jobs, start, children)
    if len(start) <= _EXACT_JOBS:
        for cand in itertools.permutations(start):
            t = _makespan(jobs, cand, children)
            if t < best_t - 1e-9:
                best, best_t = list(cand), t
        return best
    for _ in range(2):
        improved = False
        for i in range(len(best)):
            for k in range(i + 1, len(best)):
                cand = best[:]
                cand[i], cand[k] = cand[k], cand[i]
                t = _makespan(jobs, cand, children)
                if t < best_t - 1e-9:
                    best, best_t, improved = cand, t, True
        if not improved:
            break
    return best


def _compile_in_children(pairs, processes, stream, t0, total, epilogues=True, loaded=None):
    """Compile ``pairs`` into Numba's on-disk cache in ``processes`` child processes. The
    parent hands each idle child its next job (:func:`_pick`) as the jobs finish, so a
    driver waits only for what it needs, and never compiles while another job writes one
    of its cache indexes. Returns ``(family, dtype, seconds, True)`` per pair, in the order
    they finished, once the last job is done: the children exit on their own (stdin closed;
    a thread reaps them), not on the caller's time (0.3 s each on 2 cores).

    ``loaded(family, dtype)``: called in this process for each driver as soon as a child has
    compiled it (after the idle children have their next job), while the others still
    compile: loading the drivers the demo uses from the cache took 0.35 s after the last
    child had finished."""
    jobs = _jobs(pairs, epilogues)
    order = _order(jobs, min(processes, len(jobs)))
    pending, finished, held = list(jobs), set(), set()
    lines = queue.Queue()
    running = {}                    # child -> its job, or None while idle
    for _ in range(min(processes, len(jobs))):
        p = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=_relay, args=(p, lines), daemon=True).start()
        running[p] = None
    failed = []

    def hand_out():
        for p, job in running.items():
            if job is not None or p.stdin.closed:
                continue
            nxt = None if failed else _pick(jobs, pending, finished, held, order)
            if nxt is None:
                if failed or not pending:
                    p.stdin.close()            # no more work: the child exits
                continue
            pending.remove(nxt)
            held.update(jobs[nxt][0])
            running[p] = nxt
            try:
                p.stdin.write(f"{nxt[0]}:{nxt[1]}\n")
                p.stdin.flush()
            except BrokenPipeError:
                pass                           # it died: its end of output says so

    hand_out()
    done, output, alive = [], [], len(running)
    while alive and (pending or any(j is not None for j in running.values()) or failed):
        kind, p, text = lines.get()
        if kind == "eof":
            alive -= 1
            if running[p] is not None or p.wait() != 0:
                failed.append(p)               # died: the others finish their job and exit
                hand_out()
            continue
        output.append(text)
        parts = text.split()
        if len(parts) == 4 and parts[0] == "ready" and running[p] == (parts[1], parts[2]):
            job = running[p]
            running[p] = None
            held.difference_update(jobs[job][0])
            finished.add(job)
            if job[0] != STEPS:
                sec = float(parts[3])
                done.append((job[0], job[1], sec, True))
                if stream is not None:
                    print(f"  [{len(done)}/{total}] {job[0]} {job[1]} ... compiled in "
                          f"{sec:.1f} s in a child process (elapsed "
                          f"{time.perf_counter() - t0:.1f} s)", file=stream, flush=True)
            hand_out()
            if loaded is not None and job[0] != STEPS:
                try:
                    loaded(*job)
                except BaseException:
                    _release(running)
                    raise
    if failed or pending:
        failed += [p for p in running if p.wait() != 0 and p not in failed]
        tail = "".join(output[-20:])
        raise RuntimeError(f"compiling drivers in a child process failed:\n{tail}")
    _release(running)
    return done


def _release(children):
    """Close the children's stdin (each then exits after its job) and reap them in a thread."""
    for p in children:
        if not p.stdin.closed:
            p.stdin.close()
    threading.Thread(target=lambda: [p.wait() for p in children], daemon=True).start()


def _relay(proc, lines):
    for text in proc.stdout:
        lines.put(("line", proc, text))
    lines.put(("eof", proc, ""))


# what a child runs (``dynshape_kernels.compile_child``: the kernel library without the rest
# of dynshape, which a child does not use)
_CHILD = "import sys; from dynshape_kernels.compile_child import main; main(sys.stdin)"
