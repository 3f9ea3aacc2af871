"""conv2d tables of a device target: one thread block per tile of (output channels x output
positions) of one image and group, from the target's conv tile set
(``abi.cuda_tiles.CUDA_CONV_TILES``); every block walks all of K = Cg * KH * KW.

Per tile shape, the positions are laid out as whole output rows when they fit, else as
row segments; the cost of a table is its blocks' multiply-adds in waves
(``gpu_cost.GpuCostModel.makespan``). Entries have the CPU conv table's layout
(``abi.conv_table``), laid out for the largest shape of the bucket; the kernel clips them.
"""
import numpy as np
from dynshape_kernels.abi.conv_table import (T_IH0, T_IW0, T_KID, T_M0, T_MV, T_N, T_G, T_NCOL,
                                             T_OH0, T_OW0, T_VH, T_VW)
from dynshape_kernels.catalog import catalog_for

from dynshape.planning import cost_model
from dynshape.tables.bucket import bucket

FMA_PER_NS = 32.0       # multiply-adds per ns of one resident block (direct convolution)


def _starts(size, t):
    s = np.arange(0, size, t, dtype=np.int64)
    return s, np.minimum(t, size - s)


def _tiling(geo, N, OH, OW, mt, pos, slot, kid):
    tw = min(OW, pos)
    th = max(1, min(OH, pos // tw))
    m0, mv = _starts(geo["Mg"], mt)
    h0, vh = _starts(OH, th)
    w0, vw = _starts(OW, tw)
    grid = np.stack(np.meshgrid(np.arange(N * geo["G"]), np.arange(h0.size),
                                np.arange(w0.size), np.arange(m0.size), indexing="ij"),
                    -1).reshape(-1, 4)
    e = np.empty((grid.shape[0], T_NCOL), dtype=np.int64)
    e[:, T_KID] = kid
    e[:, T_N] = grid[:, 0] // geo["G"]
    e[:, T_G] = grid[:, 0] % geo["G"]
    e[:, T_M0], e[:, T_MV] = m0[grid[:, 3]], mv[grid[:, 3]]
    e[:, T_OH0], e[:, T_VH] = h0[grid[:, 1]], vh[grid[:, 1]]
    e[:, T_OW0], e[:, T_VW] = w0[grid[:, 2]], vw[grid[:, 2]]
    pt, pl = geo["pads"][0], geo["pads"][1]
    e[:, T_IH0] = e[:, T_OH0] * geo["sh"] - pt
    e[:, T_IW0] = e[:, T_OW0] * geo["sw"] - pl
    return e


def build_device_table(geo, dtype, target, variant="optimized"):
    """The ConvTable of ``geo`` on ``target`` (least model cost over the tile set;
    "simplified": the first tile shape)."""
    from dynshape.tables.conv_table import ConvTable
    cat = catalog_for(target)
    tiles = cat.families["conv"].tiles
    bk = (bucket(geo["N"], 1), bucket(geo["OH"], 1), bucket(geo["OW"], 1))
    N, OH, OW = (hi for _, hi in bk)
    K = geo["Cg"] * geo["KH"] * geo["KW"]
    model = cost_model.for_target(target)
    best = None
    for slot, (mt, pos, _) in enumerate(tiles if variant != "simplified" else tiles[:1]):
        e = _tiling(geo, N, OH, OW, mt, pos, slot, cat.kernel_id("conv", "conv2d", dtype, slot))
        costs = model.block_ns + e[:, T_MV] * e[:, T_VH] * e[:, T_VW] * K / FMA_PER_NS
        span = model.makespan(costs.astype(np.float64), 1)
        if best is None or span < best[0]:
            best = (span, slot, e)
    span, slot, e = best
    return ConvTable.of(dtype, target, bk, e, geo, slot, 1, span, variant)
