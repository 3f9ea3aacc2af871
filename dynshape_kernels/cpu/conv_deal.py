"""How the conv driver deals its table's entries, and its input's phase-split copy, out to
its threads.

**Ranges** (direct tiles, GEMM tiles that read a phase-split copy, and calls of several
images: ``deals_ranges``): entries go in contiguous ranges balanced by their work. An
entry's weight is its tile's output channels x rows x columns, clipped to the call's shape
(0 for a tile past it); with ``W_i`` the weights before entry i and ``T`` their total,
entry i goes to thread
``min(nth - 1, (2 W_i + w_i) nth // (2 T))``, the thread whose share of the total holds the
entry's midpoint. A table lists its tiles by image, group, tile row, tile column and channel
block (``planning.conv``), so one thread's tiles are neighbours that read neighbouring input
rows (and, for direct tiles, one group's channels after another). The copy
(``conv_inplace.phase_split``) is split the same way: thread th copies, for every channel,
the input rows from the row its own first tile starts at up to where the next thread's
begin. Each thread then reads what it copied itself from its own core's caches, but for the
few rows its last tiles share with the next thread's first.

**Cyclic** (one image whose GEMM tiles read x in place, or pack it): entry t goes to
thread ``t % nth``. With as many channel blocks as threads each thread takes every tile row
of one block: an even split of coarse tables, and one block's weights per thread.

``planning.makespan`` prices both deals as the driver makes them (``"balanced"``,
``"cyclic"``). Measured (float32, 2 threads, bench_conv, GFLOP/s, two alternating rounds):

* 3->64 7x7/2 pad 3 on 225x227 (a phase-split copy): cyclic 247.0 / 246.2, ranges
  261.9 / 272.8. Cyclic, both threads read the whole copy, half of it written by the other
  core (a line that core holds modified is fetched from it); one thread takes
  1658-1698 us either way. Ranges with the copy still split by whole planes' rows: about
  half of that gain.
* depthwise 3x3 pad 1, 128 channels, 113x115 (direct tiles): cyclic 48.7 / 49.9, ranges
  55.7 / 62.6: each thread reads the input of half of the groups (3.3 of 6.6 MB), not all.
* 64->64 3x3 pad 1 on 57x61 (x read in place): cyclic 276.5 / 270.6; ranges 256.9 / 259.5
  (the even split needs 16-channel tiles there, whose overheads the model underprices; the
  input fits either core's cache). One image of 64 x 224 x 224: cyclic 12.7-14.0 ms, ranges
  13.5-14.2.
* several images, x read in place (us, two alternating rounds): 256->64 1x1 on 4 x 56x56
  cyclic 1996 / 2044, ranges 1702 / 1701 (each thread reads its two images, not all four);
  64->64 3x3 on 8 x 56x56 6482 / 6448 against 6538 / 6672, 128->128 3x3 on 8 x 28x28
  6583 / 6558 against 6677 / 6464 (within the noise). bfloat16 (packed tiles, whose
  weights a thread packs once per run of tiles of one channel block): 1x1 on 4 x 56x56
  2048 / 1988 against 1850 / 1830, the 3x3 cases within the noise.
"""
import numpy as np
from numba import njit

from ..abi.conv_table import (CV_G, CV_H, CV_MG, CV_N, CV_OH, CV_OW, T_G, T_IH0, T_M0, T_MV,
                              T_N, T_OH0, T_OW0, T_VH, T_VW)
from .callee import callee


@callee(cache=True)
def clip(start, count, size):
    """Valid count of a tile dimension for the real size (0 when the start is past it)."""
    if start < 0 or start >= size:
        return 0
    return min(count, size - start)


@callee(cache=True)
def entry_weight(common, entries, t):
    """Output channels x rows x columns of entry t's tile within the call's shape; 0 for an
    entry the driver skips (past the shape)."""
    n = entries[t, T_N]
    g = entries[t, T_G]
    if n < 0 or n >= common[CV_N] or g < 0 or g >= common[CV_G]:
        return np.int64(0)
    mv = clip(entries[t, T_M0], entries[t, T_MV], common[CV_MG])
    vh = clip(entries[t, T_OH0], entries[t, T_VH], common[CV_OH])
    vw = clip(entries[t, T_OW0], entries[t, T_VW], common[CV_OW])
    if mv <= 0 or vh <= 0 or vw <= 0:
        return np.int64(0)
    return np.int64(mv * vh * vw)


@njit(inline="always")
def deals_ranges(copied, gemm_tiles, n_images):
    """Whether a call deals ranges (else cyclic): its tiles read a phase-split copy, or are
    direct tiles, or it has several images (``planning.conv.deals_ranges`` prices the same
    rule)."""
    return copied or not gemm_tiles or n_images > 1


#: columns of a thread's row of the deal (``deal``)
D_START, D_STOP, D_STEP, D_ROW0, D_ROW1, D_SIZE = range(6)


@callee(cache=True)
def deal(common, entries, ranges, nth, bounds):
    """Fill ``bounds`` (int64, shape (nth, D_SIZE)): thread th runs entries ``D_START,
    D_START + D_STEP, ... < D_STOP`` of its row and copies the input rows (key ``n*H + ih``,
    every channel) ``D_ROW0 .. D_ROW1``. ``ranges``: contiguous ranges balanced by work, the
    copy's rows split with them (see the module doc); else cyclic (entry t to thread
    ``t % nth``), the rows in equal parts. Either way every entry goes to one thread and
    the rows ``0 .. N*H`` are split in order."""
    ne = entries.shape[0]
    H = common[CV_H]
    rows = common[CV_N] * H
    if not ranges:
        for th in range(nth):
            bounds[th, D_START] = th
            bounds[th, D_STOP] = ne
            bounds[th, D_STEP] = nth
            bounds[th, D_ROW0] = th * rows // nth
            bounds[th, D_ROW1] = (th + 1) * rows // nth
        return
    weight = np.empty(ne, np.int64)        # each entry's weight, computed once
    total = np.int64(0)
    for t in range(ne):
        weight[t] = entry_weight(common, entries, t)
        total += weight[t]
    for th in range(nth):
        bounds[th, D_START] = ne
        bounds[th, D_STOP] = ne
        bounds[th, D_STEP] = 1
    cur = 0
    bounds[0, D_START] = 0
    before = np.int64(0)
    for t in range(ne):
        w = weight[t]
        th = 0 if total == 0 else min(nth - 1, (2 * before + w) * nth // (2 * total))
        while cur < th:
            bounds[cur, D_STOP] = t
            cur += 1
            bounds[cur, D_START] = t
        before += w
    # each thread's rows from the row its first live tile starts at (clamped, and no later
    # than the next thread's)
    bounds[0, D_ROW0] = 0
    bounds[nth - 1, D_ROW1] = rows
    for th in range(nth - 1, 0, -1):
        row = bounds[th, D_ROW1]
        for t in range(bounds[th, D_START], bounds[th, D_STOP]):
            if weight[t] > 0:
                ih = min(max(entries[t, T_IH0], np.int64(0)), H)
                row = min(row, entries[t, T_N] * H + ih)
                break
        bounds[th, D_ROW0] = row
        bounds[th - 1, D_ROW1] = row
