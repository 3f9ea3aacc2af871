"""Warming: load (or, the first time on a machine, compile) the compiled drivers up front.

A driver is loaded from the active kernel package or Numba's on-disk cache in well under a
second; without either it is compiled, which takes seconds to tens of seconds per driver.
``warm`` does this for a set of families and dtypes so that no later call compiles, and
reports its progress (which driver, n of m, loaded or compiled, elapsed time) when asked.
"""
import os
import sys
import time

import numpy as np
from dynshape_kernels.catalog import CATALOG

from .errors import SettingError


def _families():
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
    known = _families()
    pairs = []
    for fam in families or known:
        if fam not in known:
            raise SettingError(f"unknown kernel family {fam!r}; known: {', '.join(known)}")
        for dt in (dtypes or known[fam]):
            try:
                np_dt = np.dtype(dt)
            except TypeError:
                raise SettingError(f"unknown dtype {dt!r}; accepted: "
                                   f"{', '.join(sorted(set(sum(known.values(), ()))))}") from None
            # copies move bytes: one driver per item size
            name = f"uint{8 * np_dt.itemsize}" if fam == "copy" else np_dt.name
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


def warm(families=None, dtypes=None, progress=None, *, pairs=None):
    """Load or compile the drivers of ``families`` (default: all, the fused-sequence driver
    included) for ``dtypes`` (default: all each supports), so that no later call compiles.
    ``pairs``: an explicit list of ``(family, dtype)`` instead (see :func:`plan`).

    ``progress``: None (silent), True (lines on stderr) or a writable text file: one line per
    driver (n of m, family and dtype, loaded or compiled, seconds, total elapsed), and a last
    line saying where later runs load them from. Returns a list of
    ``(family, dtype, seconds, compiled)``.
    """
    from dynshape_kernels import drivers

    from .testing.compilations import count_compilations
    if pairs is None:
        pairs = plan(families, dtypes)
    else:
        pairs = list(dict.fromkeys(p for fam, dt in pairs for p in plan([fam], [dt])))
    stream = sys.stderr if progress is True else progress
    t0 = time.perf_counter()
    done = []
    for i, (fam, dt) in enumerate(pairs, 1):
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
