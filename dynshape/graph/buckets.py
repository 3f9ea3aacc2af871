"""Scale buckets (seed 003): a plan per scale, the smallest scale that holds the input,
request batches priced by their largest request, a fallback above the largest scale.

dynshape's kernels run any shape, so a model never pads an input to a scale to be able to
run it; scales decide which prepared plans (tables warmed, memory sized) a serving loop
keeps, and ``Model.explain`` reports the scale an input falls in.
"""
from dynshape.errors import ArgumentError


def scale_set(maximum, ratios=None, count=None):
    """Scales from a maximum times ratios (80M x (1, .8, .6) -> {48M, 64M, 80M}) or an even
    series (maximum 100, count 10 -> {10, 20, ..., 100}), sorted."""
    if (ratios is None) == (count is None):
        raise ArgumentError("scale_set takes ratios= or count=, not both or neither")
    if ratios is not None:
        return sorted({int(round(maximum * r)) for r in ratios})
    if count < 1:
        raise ArgumentError(f"count must be >= 1, got {count}")
    return [maximum * (k + 1) // count for k in range(count)]


def select(scales, size):
    """The smallest scale >= size, or None (fallback: run op by op at the size itself)."""
    fit = [s for s in sorted(scales) if s >= size]
    return fit[0] if fit else None


def select_batch(scales, sizes):
    """The scale for a batch of requests padded to the largest: len(sizes) x max(sizes)."""
    return select(scales, len(sizes) * max(sizes)) if sizes else None
