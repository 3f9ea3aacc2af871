"""Callables timed in alternating blocks.

Runtimes with spinning worker threads (OpenBLAS, ONNX Runtime, PyTorch, Numba's prange)
keep a core busy for a while after each call, so timing peers call by call makes each one
pay for the previous one's workers. :func:`alternating` runs the callables in turns, a
block of calls each: the first calls of a block are untimed (the pool wakes up), then
samples of ``inner`` back-to-back calls (``inner`` chosen so that a sample lasts at least
``sample_s``: perf_counter resolution and loop overhead stay out of microsecond timings)
until the block has lasted ``block_s``. Load from other processes hits every callable
alike, and each keeps its thread pool warm within its block, as in a serving loop.

Before each block the process sleeps ``settle_s``: the previous callable's workers must
stop spinning first, or they take cores from the next one. OpenBLAS's spin for 2**28
cycles after each call (its default THREAD_TIMEOUT, ~70 ms at 3.7 GHz): measured on
conv2d 3->64 7x7/2 over 225x227 (2 cores), one 512x512 NumPy matmul before each round of
20 dynshape calls made them take 1028-1106 us instead of 552-558 us, and the benchmark's
im2col peer (an OpenBLAS matmul, timed just before dynshape's block) had put dynshape at
338 GFLOP/s where it runs at 440 alone.
"""
import contextlib
import gc
import statistics
import time
from dataclasses import asdict, dataclass

perf = time.perf_counter


@dataclass
class Stat:
    """Seconds per call of one callable over all its blocks."""
    median: float
    min: float
    samples: int
    inner: int          # calls per sample
    blocks: int

    def as_dict(self):
        return asdict(self)


def calls_per_sample(fn, sample_s, first_s=None):
    """How many back-to-back calls make a sample of at least ``sample_s`` (one call of
    ``fn`` unless ``first_s``, the time a call already took, is given)."""
    if first_s is None:
        t = perf()
        fn()
        first_s = perf() - t
    return max(1, int(sample_s / max(first_s, 1e-9)))


@contextlib.contextmanager
def gc_paused():
    """The garbage collector off within the block (back on after it if it was on)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


#: seconds slept before each block (see the module): longer than any peer's spin-wait
SETTLE_S = 0.1


def alternating(fns, blocks=5, block_s=0.05, sample_s=2e-4, warm_calls=1, first_s=None,
                settle_s=SETTLE_S):
    """``{name: Stat}`` for the callables of ``fns`` (name -> zero-argument callable), timed
    in ``blocks`` rounds of one block each, in the order given.

    ``first_s``: optional {name: seconds one call took} (from a verification call), which
    saves a calibration call of slow callables. GC is off while timing."""
    first_s = first_s or {}
    with gc_paused():
        inner = {n: calls_per_sample(fn, sample_s, first_s.get(n)) for n, fn in fns.items()}
        samples = {n: [] for n in fns}
        for _ in range(blocks):
            for name, fn in fns.items():
                k = inner[name]
                if settle_s > 0:
                    time.sleep(settle_s)
                for _ in range(warm_calls):
                    fn()
                out = samples[name]
                end = perf() + block_s
                while True:
                    t = perf()
                    for _ in range(k):
                        fn()
                    now = perf()
                    out.append((now - t) / k)
                    if now >= end:
                        break
    return {n: Stat(statistics.median(s), min(s), len(s), inner[n], blocks)
            for n, s in samples.items()}


def after_eviction(fns, evict, calls=100, settle_s=SETTLE_S):
    """``{name: Stat}`` of single calls of the callables of ``fns``, each timed right after
    ``evict()`` (which should push the calling core's caches out: a copy larger than L2),
    the callables in turns call by call. What a call costs when the work before it (a large
    kernel, the caller's own) has left nothing of the call's code and data in cache: a
    Python path that takes 2 us hot took 12-16 us there (``kernel_level.dispatch_families
    --cold``). GC is off while timing."""
    with gc_paused():
        samples = {n: [] for n in fns}
        if settle_s > 0:
            time.sleep(settle_s)
        for _ in range(calls):
            for name, fn in fns.items():
                evict()
                t = perf()
                fn()
                samples[name].append(perf() - t)
    return {n: Stat(statistics.median(s), min(s), len(s), 1, 1) for n, s in samples.items()}


def fmt_time(s):
    """Seconds as a short human string (ns, us, ms, s); "-" for None."""
    if s is None or s != s:
        return "-"
    if s < 1e-6:
        return f"{s * 1e9:.0f}ns"
    if s < 1e-3:
        return f"{s * 1e6:.1f}us" if s < 1e-4 else f"{s * 1e6:.0f}us"
    if s < 1:
        return f"{s * 1e3:.2f}ms" if s < 1e-2 else f"{s * 1e3:.1f}ms"
    return f"{s:.2f}s"
