"""User-coordinate geometry of the families whose entries are output tiles with an input
window or a walked K: pooling (a plane table with input offsets), matmul/gemm (output tiles
per batch, K walked in the slot's blocks) and conv2d (output tiles per image, group and
channel block; one tile's input window and halo). See :mod:`dynshape.pictures.geometry`.
"""
import math

import numpy as np

from dynshape.pictures.geometry import Geometry, Piece, _counts, _dims, _geom, _plane_rows


def pool_family(table, call):
    from dynshape.runtime.pool import pool_plane
    launch = call.launch
    p = pool_plane(launch)
    shape = tuple(launch.out.shape)
    rows = _plane_rows(table, p)
    g = launch.extra["geometry"]
    x = launch.inputs[0]
    geo = _geom(table, call, shape, tuple(range(4)), p, rows,
                [f"output {_dims(shape)} of input {_dims(x.shape)}: the OHxOW plane is "
                 f"tiled, N and C are outer dims; each tile reads its input window in place "
                 f"(kernel {g.kernel}, strides {g.strides}, dilations {g.dilations}, pads "
                 f"{g.pads})"])
    geo.batch_names = ("N", "C")
    if geo.pieces:
        pc = geo.pieces[len(geo.pieces) // 2]
        geo.window = _window((pc.row, pc.col, pc.rows, pc.cols),
                             (pc.row * g.strides[0] - g.pads[0],
                              pc.col * g.strides[1] - g.pads[1]),
                             g.kernel, g.strides, g.dilations, x.shape[2:])
    return geo


def _window(tile, origin, kernel, strides, dilations, input_hw):
    """Input rows/columns one output tile reads (``window``) and its stride footprint
    (``core``); the halo is the window outside the core (read by neighbouring tiles too)."""
    (r, c, vh, vw), (ih, iw) = tile, origin
    span = [(v - 1) * s + (k - 1) * d + 1
            for v, s, k, d in zip((vh, vw), strides, kernel, dilations)]
    return {"tile": tile, "input": tuple(int(v) for v in input_hw),
            "window": (ih, iw, span[0], span[1]),
            "core": (ih, iw, min(vh * strides[0], span[0]), min(vw * strides[1], span[1]))}


def matmul_family(table, call):
    from dynshape_kernels.abi.tiles import matmul_slots as _slots_for
    launch = call.launch
    M, N, K = launch.extra["mnk"]
    batch = tuple(launch.extra["batch"])
    nb = math.prod(batch)
    e = table.entries
    cfg = _slots_for(table.dtype)
    run = (e[:, 1] < M) & (e[:, 2] < N) & (e[:, 5] < nb)
    cats, pieces = [], []
    for i in np.flatnonzero(run):
        slot, m0, n0, tm, tn, b = (int(v) for v in e[i])
        vm, vn = min(tm, M - m0), min(tn, N - n0)
        cat = ("full", (tm, tn), None) if (vm, vn) == (tm, tn) else \
            ("tail", (tm, tn), "clipped (variable)")
        cats.append(cat)
        if b == 0:
            pieces.append(Piece(int(i), cat, m0, n0, vm, vn))
    if table.target == "cpu":
        kcs = sorted({cfg[int(s)][4] for s in e[run, 0]})
    else:                       # device kernels stage K in fixed blocks (planning.gpu_matmul)
        from dynshape.planning.gpu_matmul import BK
        kcs = [BK]
    blocks = ", ".join(f"{-(-K // kc)} blocks of {kc}" + (f" (last {K - (K // kc) * kc})"
                                                          if K % kc else "") for kc in kcs)
    shape = batch + (M, N)
    notes = [f"output {_dims(shape)} = A {_dims(call.shapes[0])} @ B {_dims(call.shapes[1])}: "
             f"the {M}x{N} output of each batch is tiled; K={K} is walked inside each tile in "
             f"{blocks}, never tiled"]
    n = int(run.sum())
    sub = f"K={K} walked inside each output tile in {blocks}"
    return Geometry(call.op, call.dtype, shape, (M, N), batch,
                    tuple(f"b{i}" for i in range(len(batch))), pieces, _counts(cats), n,
                    len(table), n, notes, subtitle=sub)


def conv_family(table, call):
    from dynshape_kernels.abi.conv_table import (T_G, T_IH0, T_IW0, T_M0, T_MV, T_N, T_OH0,
                                                  T_OW0, T_VH, T_VW)
    g = call.launch.extra["geo"]
    N, M, OH, OW = g["N"], g["M"], g["OH"], g["OW"]
    res = table.resolved(N, OH, OW)
    e = table.entries
    run = (res[:, T_MV] > 0) & (res[:, T_VH] > 0) & (res[:, T_VW] > 0)
    m_first = res[run, T_M0].min() if run.any() else 0
    cats, pieces = [], []
    for i in np.flatnonzero(run):
        tile = (int(e[i, T_VH]), int(e[i, T_VW]))
        valid = (int(res[i, T_VH]), int(res[i, T_VW]))
        cat = ("full", tile, None) if valid == tile and res[i, T_MV] == e[i, T_MV] else \
            ("tail", tile, "clipped (variable)")
        cats.append(cat)
        if res[i, T_N] == 0 and res[i, T_G] == 0 and res[i, T_M0] == m_first:
            pieces.append(Piece(int(i), cat, int(res[i, T_OH0]), int(res[i, T_OW0]), *valid))
    shape = (N, M, OH, OW)
    kept = (g["KH"], g["KW"])
    notes = [f"output {_dims(shape)} of input {_dims(call.shapes[0])} and weights "
             f"{_dims(call.shapes[1])}: each entry is one OHxOW tile of one image, group and "
             f"block of output channels (drawn: image 0, group 0, first channel block); "
             f"K = {g['Cg']}x{g['KH']}x{g['KW']} = {g['Cg'] * g['KH'] * g['KW']} is walked "
             f"inside each tile"]
    geo = Geometry(call.op, call.dtype, shape, (OH, OW), (N, M), ("N", "M"), pieces,
                   _counts(cats), len(cats), len(table), len(cats), notes,
                   subtitle=f"K = {g['Cg']}x{g['KH']}x{g['KW']} walked inside each tile; "
                            f"outlined: one tile and (right) its input window")
    if pieces:
        pc = pieces[len(pieces) // 2]
        geo.window = _window((pc.row, pc.col, pc.rows, pc.cols),
                             (int(e[pc.entry, T_IH0]), int(e[pc.entry, T_IW0])), kept,
                             (g["sh"], g["sw"]), (g["dh"], g["dw"]), (g["H"], g["W"]))
    return geo
