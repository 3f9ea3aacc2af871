"""The one makespan: how long the slowest thread of a driver call works, given the model cost
of every work item and how the driver deals the items out to its threads.

Work items are ``entries x outer index`` (outer-major: item ``k * E + e`` is entry ``e`` of
outer index ``k``). Drivers deal them out in one of these ways:

* ``"cyclic"``: item t goes to thread ``t % threads`` (reduce, row-wise, pool drivers);
* ``"chunks"``: contiguous equal chunks, one per thread (the matmul driver);
* ``"balanced"``: contiguous ranges balanced by integer ``weights`` (one per item): item i
  goes to thread ``min(threads - 1, (2 W_i + w_i) threads // (2 T))``, ``W_i`` the weights
  before it and ``T`` their total (the conv driver, ``dynshape_kernels.cpu.conv_deal``);
* ``"bound"``: only the bound below (the plane drivers, whose prange schedule the model does
  not follow item by item).

Above ``EXACT_ITEMS`` items the exact deal is replaced by its bound ``max(total / threads,
largest item)``, which it approaches for many items.
"""
import numpy as np

EXACT_ITEMS = 1 << 16


def makespan(costs, threads, n_outer=1, dealing="chunks", weights=None):
    """Model time of the slowest thread (same unit as ``costs``, one value per entry;
    ``weights``: one integer per entry, for the ``"balanced"`` dealing)."""
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
    if dealing == "balanced":
        if weights is None:
            raise ValueError("the 'balanced' dealing needs weights (one per entry)")
        return float(np.bincount(balanced_threads(np.tile(weights, max(int(n_outer), 1)), nth),
                                 weights=items, minlength=nth).max())
    raise ValueError(f"unknown dealing {dealing!r}; accepted: 'cyclic', 'chunks', 'balanced', "
                     "'bound'")


def balanced_threads(weights, threads):
    """The thread of every item under the ``"balanced"`` dealing (see the module doc)."""
    w = np.asarray(weights, dtype=np.int64).reshape(-1)
    total = int(w.sum())
    if total == 0:
        return np.zeros(w.size, np.int64)
    before = np.concatenate([[0], np.cumsum(w)[:-1]]).astype(np.int64)
    return np.minimum(threads - 1, (2 * before + w) * threads // (2 * total))
