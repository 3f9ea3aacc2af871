"""Axes an op needs whole: a row-wise op's normalized axes, a convolution's input channels.

Such an axis must lie in ONE chunk, so that every block holds whole rows. With
``rechunk=True`` (the default) an input split along it is rechunked to one chunk along that
axis (the other axes keep their chunks) with a :class:`RechunkWarning` saying so; with
``rechunk=False`` it raises :class:`ChunkingError` instead.
"""
import warnings

from dynshape.errors import DynshapeError


class ChunkingError(DynshapeError, ValueError):
    """An op needs an axis whole in every block, and the dask array splits it (with
    ``rechunk=False``), or the op cannot be split along a chunked axis at all."""


class RechunkWarning(UserWarning):
    """A dask array was rechunked so that an axis an op needs whole lies in one chunk."""


def whole_along(x, axes, what, rechunk=True):
    """``x`` with each of ``axes`` in one chunk (rechunked with a warning, or refused)."""
    split = [a for a in axes if len(x.chunks[a]) > 1]
    if not split:
        return x
    desc = "; ".join(f"axis {a} is split into {len(x.chunks[a])} chunks {_short(x.chunks[a])}"
                     for a in split)
    fix = "{" + ", ".join(f"{a}: -1" for a in split) + "}"
    if not rechunk:
        raise ChunkingError(f"{what} needs axis {', '.join(map(str, split))} whole in every "
                            f"block, but {desc}. Rechunk it first (x.rechunk({fix})) or pass "
                            f"rechunk=True to let dynshape.dask do it")
    warnings.warn(f"{what} needs axis {', '.join(map(str, split))} whole in every block but "
                  f"{desc}: rechunking with x.rechunk({fix}) (blocks grow to the whole axis; "
                  f"pass rechunk=False to get an error instead)", RechunkWarning, stacklevel=3)
    return x.rechunk({a: -1 for a in split})


def _short(chunks):
    chunks = tuple(int(c) for c in chunks)
    return str(chunks) if len(chunks) <= 6 else f"({chunks[0]}, {chunks[1]}, ..., {chunks[-1]})"
