"""conv2d, max_pool2d and avg_pool2d on NCHW dask arrays split along H and W: halos through
dask's overlap (``da.map_overlap``).

Output rows are given to input chunks by where their window STARTS: input chunk
``[c0, c1)`` computes the outputs ``o`` with ``c0 <= o * stride - pad_begin < c1`` (the
first chunk also those starting in the begin padding, the last one those reaching into the
end padding). Their windows reach at most ``dk - 1`` rows past ``c1`` (``dk``: the dilated
kernel), so each block gets a halo of ``dk - 1`` rows from its right/lower neighbours and
none from the left (an asymmetric depth, ``boundary="none"``). Each task slices the rows its
outputs read and calls dynshape with the padding that lies in its part: the global begin
pad in the first chunk, the global end pad in the last, zero inside, so strides, dilations,
pads, ``ceil_mode`` and ``count_include_pad`` hold at every block boundary. Chunks are first
made at least ``dk - 1`` long where needed (dask's ``ensure_minimum_chunksize``).

conv2d sums over all input channels: C must be one chunk (rechunked with a
:class:`~dynshape.dask.chunking.RechunkWarning`, or ``rechunk=False`` raises
:class:`~dynshape.dask.chunking.ChunkingError`). Pooling is per channel: N and C chunk freely.
The weights and bias are NumPy arrays (a dask array is computed once, here).
"""
import functools

import numpy as np
import dask.array as da
from dask.array.overlap import ensure_minimum_chunksize

import dynshape
from dynshape import ops
from dynshape.dask.blocks import as_dask, frozen
from dynshape.dask.chunking import whole_along
from dynshape.errors import ArgumentError, OpAttributeError, ShapeError

WINDOW_OPS = ("conv2d", "max_pool2d", "avg_pool2d")


def windowed(op, x, *params, rechunk=True, **attrs):
    """``op`` of the NCHW dask array ``x`` (params: conv2d's ``w`` and optional ``b``)."""
    x = as_dask(x, f"{op} input x")
    if not isinstance(x, da.Array) or x.ndim != 4:
        raise ShapeError(f"{op}: x must be an NCHW array of rank 4, got "
                         f"{getattr(x, 'shape', x)!r}")
    if "residual" in attrs and attrs["residual"] is not None:
        raise OpAttributeError(f"{op}: residual= is not supported on dask arrays; add it "
                               f"afterwards with dynshape.dask.run('add', y, residual)")
    params = [None if p is None else np.asarray(p.compute() if isinstance(p, da.Array) else p)
              for p in params]
    if op == "conv2d" and len(params) not in (1, 2):
        raise ArgumentError(f"conv2d takes the inputs (x, w, b=None), got {1 + len(params)}")
    if op != "conv2d" and params:
        raise ArgumentError(f"{op} takes one input array x, got {1 + len(params)}")
    N, C, H, W = x.shape
    # every check of dynshape itself, and the output shape, on a zero-batch stand-in
    meta = np.asarray(dynshape.run(op, np.empty((0, C, H, W), x.dtype), *params, **attrs))
    OH, OW = meta.shape[2:]
    if op == "conv2d":
        x = whole_along(x, (1,), "conv2d (a sum over all input channels)", rechunk)
    geo = _geometry(op, x.shape, params, attrs)
    if (OH, OW) != tuple(g[4] for g in geo):
        raise ShapeError(f"{op}: cannot split this window geometry along H/W (output "
                         f"{(OH, OW)} against {tuple(g[4] for g in geo)}); give x one chunk "
                         f"along H and W")
    depth = {ax: (0, g[0] - 1) for ax, g in zip((2, 3), geo)
             if len(x.chunks[ax]) > 1 and g[0] > 1}
    if depth:
        need = {ax: d[1] for ax, d in depth.items()}
        x = x.rechunk(tuple(ensure_minimum_chunksize(need[ax], c) if ax in need else c
                            for ax, c in enumerate(x.chunks)))
    bounds = tuple(_bounds(x.chunks[ax]) for ax in (2, 3))
    out_chunks = (x.chunks[0], (meta.shape[1],) if op == "conv2d" else x.chunks[1],
                  *(tuple(hi - lo for lo, hi in _assign(b, g)) for b, g in zip(bounds, geo)))
    local = {k: v for k, v in attrs.items() if k not in ("pads", "auto_pad", "ceil_mode")}
    if "ceil_mode" in attrs and attrs.get("auto_pad", "NOTSET") == "NOTSET":
        local["ceil_mode"] = attrs["ceil_mode"]
    func = functools.partial(_window_block, op, frozen(local), geo, bounds, tuple(params))
    meta = np.empty((0,) * 4, meta.dtype)
    if not depth:
        return x.map_blocks(func, chunks=out_chunks, dtype=meta.dtype, meta=meta,
                            token=f"dynshape-{op}")
    full = {ax: depth.get(ax, 0) for ax in range(4)}
    return da.map_overlap(func, x, depth=full, boundary="none", trim=False,
                          chunks=out_chunks, dtype=meta.dtype, meta=meta,
                          allow_rechunk=False, align_arrays=False)


def _geometry(op, shape, params, attrs):
    """Per spatial axis ``(dk, stride, pad_begin, pad_end, out)`` with pads resolved."""
    if op == "conv2d":
        kh, kw = params[0].shape[2:]
        s = _pair(attrs.get("strides", (1, 1)))
        d = _pair(attrs.get("dilations", (1, 1)))
        pads = tuple(attrs.get("pads", (0, 0, 0, 0)))
        pads = pads * 2 if len(pads) == 2 else pads
        auto = attrs.get("auto_pad", "NOTSET")
        out = []
        for i, (n, k) in enumerate(zip(shape[2:], (kh, kw))):
            dk = (k - 1) * d[i] + 1
            pb, pe = pads[i], pads[i + 2]
            if auto == "VALID":
                pb = pe = 0
            elif auto in ("SAME_UPPER", "SAME_LOWER"):
                o = -(-n // s[i])
                total = max((o - 1) * s[i] + dk - n, 0)
                small = total // 2
                pb, pe = (small, total - small) if auto == "SAME_UPPER" else (total - small, small)
            out.append((dk, s[i], pb, pe, (n + pb + pe - dk) // s[i] + 1))
        return tuple(out)
    spec = ops.get(op)
    g = spec.geometry((0, shape[1]) + tuple(shape[2:]), spec.check_attrs(attrs))
    return tuple(((g.kernel[i] - 1) * g.dilations[i] + 1, g.strides[i], g.pads[i],
                  g.pads[i + 2], g.out_hw[i]) for i in range(2))


def _pair(v):
    return (int(v), int(v)) if np.isscalar(v) else tuple(int(t) for t in v)


def _bounds(chunks):
    edges = np.concatenate([[0], np.cumsum(chunks)]).astype(int)
    return tuple(zip(edges[:-1].tolist(), edges[1:].tolist()))


def _assign(bounds, g):
    """The output range ``[o_lo, o_hi)`` of each input chunk (module docstring)."""
    dk, s, pb, _, n_out = g
    res = []
    for j, (c0, c1) in enumerate(bounds):
        lo = 0 if j == 0 else min(n_out, -(-(c0 + pb) // s))
        hi = n_out if j == len(bounds) - 1 else min(n_out, -(-(c1 + pb) // s))
        res.append((lo, max(lo, hi)))
    return res


def _window_block(op, attrs, geo, bounds, params, block, block_id=None):
    """One task: the outputs whose windows start in this block (its halo included)."""
    sl, begin, end, counts = [slice(None), slice(None)], [], [], []
    for i, ax in enumerate((2, 3)):
        dk, s, pb, pe, _ = geo[i]
        j = block_id[ax]
        c0 = bounds[i][j][0]
        lo, hi = _assign(bounds[i], geo[i])[j]
        counts.append(hi - lo)
        start, stop = lo * s - pb - c0, (hi - 1) * s - pb + dk - c0
        begin.append(max(0, -start))
        end.append(min(pe, max(0, stop - block.shape[ax])))     # ceil_mode may reach past pe
        sl.append(slice(max(0, start), min(stop, block.shape[ax])))
    n_ch = params[0].shape[0] if op == "conv2d" else block.shape[1]
    if 0 in counts:
        return np.empty((block.shape[0], n_ch, *counts), block.dtype)
    r = dynshape.run(op, block[tuple(sl)], *[p for p in params if p is not None],
                     pads=(begin[0], begin[1], end[0], end[1]), **dict(attrs))
    if r.shape[2:] != tuple(counts):            # an invariant of the assignment above
        raise AssertionError(f"{op}: block {block_id} gave {r.shape[2:]} outputs, "
                             f"expected {tuple(counts)}")
    return r
