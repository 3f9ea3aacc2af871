"""The one makespan: how long the slowest thread of a driver call works, given the model cost
of every work item and how the driver deals the items out to its threads.

Work items are ``entries x outer index`` (outer-major: item ``k * E + e`` is entry ``e`` of
outer index ``k``). Drivers deal them out in one of two ways:

* ``"cyclic"``: item t goes to thread ``t % threads`` (reduce, row-wise, pool, conv drivers);
* ``"chunks"``: contiguous equal chunks, one per thread (the matmul driver);
* ``"bound"``: only the bound below (the plane drivers, whose prange schedule the model does
  not follow item by item).

Above ``EXACT_ITEMS`` items the exact deal is replaced by its bound ``max(total / threads,
largest item)``, which it approaches for many items.
"""
import numpy as np

EXACT_ITEMS = 1 << 16


def makespan(costs, threads, n_outer=1, dealing="chunks"):
    """Model time of the slowest thread (same unit as ``costs``, one value per entry)."""
    costs = np.asarray(costs, dtype=np.float64).reshape(-1)
    threads = max(int(threads), 1)
    total = costs.size * max(int(n_outer), 1)
    if total == 0:
        return 0.0
    if total > EXACT_ITEMS or threads == 1 or dealing == "bound":
        return max(float(costs.sum()) * max(int(n_outer), 1) / threads, float(costs.max()))
    items = np.tile(costs, max(int(n_outer), 1))
    nth = min(threads, items.size)
    if dealing == "cyclic":
        pad = -items.size % nth
        return float(np.concatenate([items, np.zeros(pad)]).reshape(-1, nth).sum(axis=0).max())
    if dealing == "chunks":
        bounds = [i * items.size // nth for i in range(nth + 1)]
        csum = np.concatenate([[0.0], np.cumsum(items)])
        return float(max(csum[bounds[i + 1]] - csum[bounds[i]] for i in range(nth)))
    raise ValueError(f"unknown dealing {dealing!r}; accepted: 'cyclic', 'chunks', 'bound'")
