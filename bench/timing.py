"""Timing helpers shared by the benchmarks: medians of repeated perf_counter samples.

``measure`` times one callable: warm-up, then samples of ``inner`` back-to-back calls (``inner``
chosen so that a sample lasts at least ``sample_s``, which keeps perf_counter resolution and
loop overhead out of microsecond timings) until both ``min_samples`` and the time budget are
reached. ``interleaved`` times a few callables round-robin for a fixed number of rounds, so
that load from other processes on a shared machine hits them alike (for microsecond calls and
the copy-bandwidth comparison; op cases are timed in blocks, see bench/README.md).
"""
import gc
import statistics
import time
from dataclasses import asdict, dataclass

perf = time.perf_counter


@dataclass
class Stat:
    median: float      # seconds per call
    min: float
    samples: int
    inner: int         # calls per sample

    def as_dict(self):
        return asdict(self)


def _calibrate(fn, sample_s):
    t = perf()
    fn()
    single = perf() - t
    return max(1, int(sample_s / max(single, 1e-9))), single


def measure(fn, budget_s=0.5, min_samples=5, max_samples=2000, sample_s=2e-4,
            warmup_s=0.01, first_s=None):
    """Median seconds per call of ``fn`` (already called once by the caller, to verify it;
    ``first_s``, the time that call took, saves a calibration call for slow functions)."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        if first_s is not None and first_s > sample_s:
            inner = 1                                  # slow: no calibration call needed
        else:
            inner, _ = _calibrate(fn, sample_s)        # also the first warm-up call
        # warm-up for ``warmup_s`` (caches, page faults, other thread pools going idle)
        t_end = perf() + warmup_s
        while perf() < t_end:
            fn()
        samples = []
        deadline = perf() + budget_s
        while len(samples) < max_samples and (len(samples) < min_samples or perf() < deadline):
            t = perf()
            for _ in range(inner):
                fn()
            samples.append((perf() - t) / inner)
    finally:
        if gc_was:
            gc.enable()
    return Stat(statistics.median(samples), min(samples), len(samples), inner)


def interleaved(fns, rounds=30, sample_s=2e-3):
    """{name: Stat}: the callables of ``fns`` timed round-robin, ``rounds`` samples each."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        inner = {}
        for name, fn in fns.items():
            for _ in range(3):
                fn()
            inner[name] = _calibrate(fn, sample_s)[0]
        samples = {name: [] for name in fns}
        for _ in range(rounds):
            for name, fn in fns.items():
                k = inner[name]
                t = perf()
                for _ in range(k):
                    fn()
                samples[name].append((perf() - t) / k)
    finally:
        if gc_was:
            gc.enable()
    return {name: Stat(statistics.median(s), min(s), len(s), inner[name])
            for name, s in samples.items()}


def fmt_time(s):
    if s is None:
        return "-"
    if s < 1e-6:
        return f"{s * 1e9:.0f}ns"
    if s < 1e-3:
        return f"{s * 1e6:.1f}us" if s < 1e-4 else f"{s * 1e6:.0f}us"
    if s < 1:
        return f"{s * 1e3:.2f}ms" if s < 1e-2 else f"{s * 1e3:.1f}ms"
    return f"{s:.2f}s"
