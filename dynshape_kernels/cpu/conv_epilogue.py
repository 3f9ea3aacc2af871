"""The epilogue slot of the conv2d drivers: bias, residual add, activation, step program, store.

``y = steps(act(acc + bias + residual))`` for the output channels of a tile whose
accumulators are, per channel, ``vh`` rows of ``vw`` values at pitch ``pitch`` in a per-thread
buffer (channel i at ``a + i*cstride``). Bias and residual are added row by row (plain
vectorized loops, no temporary arrays), the activation (any unary op code of
``scalar_ops.UNARY_OPS``; IDENTITY for none) runs ONCE over each channel's whole accumulator
span with the vectorized in-place loops of ``steps.map_inplace`` (values between rows, if
any, are scratch), then the step program of a fused sequence (``steps.apply_steps``; none
when empty) runs on the whole tile, and the rows are copied to the output through its
strides. Without a program, each channel is finished and stored in turn (``finish_channel``).
The per-channel functions are compiled without reference counting (``_nrt=False``: they
allocate nothing): called per channel and tile by both threads, the atomic counts of the
shared arrays cost 13% of 3->64 7x7/2.

Side inputs of the step program: ``cgeo[s] = (offset, n stride, channel stride, row stride,
column stride)`` in elements (any sign, 0 = broadcast), so side s contributes
``sides[s][off + n*sn + m*sc + oh*sh + ow*sw]`` at output (n, m, oh, ow) -- any strided view
broadcast to (N, M, OH, OW) (full-shape, per-channel (1, M, 1, 1), per-position (OH, OW), ...)
is read in place. ``tile_steps`` turns it into the (offset, outer, row, column) geometry of
``apply_steps`` in the per-thread scratch ``lgeo`` (4 x 4): when every channel's rows are
contiguous in the accumulators (pitch == vw) and in every side (row stride == vw * column
stride), the tile is ONE apply_steps call of ``mv`` rows (channels) of ``vh*vw`` values;
otherwise one call per channel of ``vh`` rows of ``vw``. A program of unary and constant steps
only (no side read by position) runs over the whole span of the tile's accumulators instead,
the scratch between rows and channels included (``steps.scratch_span``).
"""
import numpy as np

from .callee import callee
from .steps import MAX_SIDES, apply_steps_as, scratch_span
from .switches import map_inplace
from .gemm_ukernel import load_at, store_at
from .half import load, store
from .scalar_ops import IDENTITY


@callee(cache=True, _nrt=False)
def prepare_channel(acc, a, vh, vw, pitch, has_b, bval, has_r, res, ro, rsh, rsw, code, a0,
                    a1):
    """``acc[a + r*pitch + j] = act(acc[...] + bval + res[ro + r*rsh + j*rsw])`` for r < vh,
    j < vw. ``bval`` is added when ``has_b``; the residual is read when ``has_r``. ``a0``/``a1``
    are the activation's attributes in y's dtype."""
    if has_b or has_r:
        for r in range(vh):
            d = a + r * pitch
            if has_b:
                for j in range(vw):
                    store_at(acc, d + j, load_at(acc, d + j) + bval)
            if has_r:
                s = ro + r * rsh
                if rsw == 1:
                    for j in range(vw):
                        store_at(acc, d + j, load_at(acc, d + j) + load(load_at(res, s + j)))
                else:
                    for j in range(vw):
                        store_at(acc, d + j,
                                 load_at(acc, d + j) + load(load_at(res, s + j * rsw)))
    if code != IDENTITY:
        n_ = (vh - 1) * pitch + vw
        seg = acc[a:a + n_]
        map_inplace(code, seg, n_, a0, a1)


@callee(cache=True, _nrt=False)
def store_channel(acc, a, vh, vw, pitch, y, yo, ysh, ysw):
    """``y[yo + r*ysh + j*ysw] = acc[a + r*pitch + j]`` for r < vh, j < vw."""
    for r in range(vh):
        d = a + r * pitch
        o = yo + r * ysh
        if ysw == 1:
            for j in range(vw):
                store_at(y, o + j, store(y, load_at(acc, d + j)))
        else:
            for j in range(vw):
                store_at(y, o + j * ysw, store(y, load_at(acc, d + j)))


@callee(cache=True, _nrt=False)
def finish_channel(acc, a, vh, vw, pitch, y, yo, ysh, ysw, has_b, bval, has_r, res, ro,
                   rsh, rsw, code, a0, a1):
    """Store ``act(acc[a + r*pitch + j] + bval + res[ro + r*rsh + j*rsw])`` to
    ``y[yo + r*ysh + j*ysw]`` for r < vh, j < vw; ``acc`` is scratch (modified).

    The residual may be ``y`` itself with the same offsets: every residual element of the
    channel is read before any is written."""
    prepare_channel(acc, a, vh, vw, pitch, has_b, bval, has_r, res, ro, rsh, rsw, code, a0, a1)
    store_channel(acc, a, vh, vw, pitch, y, yo, ysh, ysw)


@callee(cache=True)
def tile_steps(y, acc, a, cstride, mv, vh, vw, pitch, prog, pattrs, sides, cgeo, lgeo, n, m,
               oh0, ow0):
    """Run the step program on the ``mv`` channels of a tile (channel i's rows of ``vw`` at
    ``pitch`` from ``acc[a + i*cstride]``) whose first element is output (n, m, oh0, ow0),
    with the semantics of y's storage format (``steps.apply_steps_as``)."""
    # every channel's rows (and the values between them, scratch) as one run, when the
    # program reads no side input by position: one call per step and tile instead of one
    # per row (direct tiles: depthwise 3x3 on 128 x 113x115 -> relu, abs, exp 1.2-1.4 ->
    # 1.0-1.1 ms) or per channel (GEMM tiles)
    if pitch == vw or vh == 1:
        span = scratch_span(prog, cstride, mv, vh * vw)
    elif cstride == vh * pitch:
        span = scratch_span(prog, pitch, mv * vh, vw)
    else:
        span = np.int64(0)
    if span > 0:
        # (the argument types of the call below: one compiled apply_steps_as)
        apply_steps_as(y, prog, pattrs, acc, a, span, np.int64(1), span, 0, 0, 0, sides, lgeo)
        return
    flat = pitch == vw or vh == 1
    for s in range(MAX_SIDES):
        if vh > 1 and cgeo[s, 3] != vw * cgeo[s, 4]:
            flat = False
    if flat:
        for s in range(MAX_SIDES):
            lgeo[s, 0] = (cgeo[s, 0] + n * cgeo[s, 1] + m * cgeo[s, 2] + oh0 * cgeo[s, 3]
                          + ow0 * cgeo[s, 4])
            lgeo[s, 1] = 0
            lgeo[s, 2] = cgeo[s, 2]
            lgeo[s, 3] = cgeo[s, 4]
        apply_steps_as(y, prog, pattrs, acc, a, cstride, mv, vh * vw, 0, 0, 0, sides, lgeo)
        return
    for i in range(mv):
        for s in range(MAX_SIDES):
            lgeo[s, 0] = cgeo[s, 0] + n * cgeo[s, 1] + (m + i) * cgeo[s, 2]
            lgeo[s, 1] = 0
            lgeo[s, 2] = cgeo[s, 3]
            lgeo[s, 3] = cgeo[s, 4]
        apply_steps_as(y, prog, pattrs, acc, a + i * cstride, pitch, vh, vw, oh0, ow0, 0,
                       sides, lgeo)
