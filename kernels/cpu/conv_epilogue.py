"""The epilogue slot of the conv2d drivers: bias, residual add and activation, then the store.

``y = act(acc + bias + residual)`` for one output channel of a tile whose accumulators are
``vh`` rows of ``vw`` values at pitch ``pitch`` in a per-thread buffer. Bias and residual are
added row by row (plain vectorized loops, no temporary arrays), the activation (any unary op
code of ``scalar_ops.UNARY_OPS``; IDENTITY for none) runs ONCE over the channel's whole
accumulator span with the vectorized in-place loops of ``steps.map_inplace`` (values between
rows, if any, are scratch), and the rows are copied to the output through its strides.
"""
from numba import njit

from .steps import map_inplace
from .gemm_ukernel import load_at, store_at
from .scalar_ops import IDENTITY


@njit(cache=True)
def finish_channel(acc, a, vh, vw, pitch, y, yo, ysh, ysw, has_b, bval, has_r, res, ro,
                   rsh, rsw, code, a0, a1):
    """Store ``act(acc[a + r*pitch + j] + bval + res[ro + r*rsh + j*rsw])`` to
    ``y[yo + r*ysh + j*ysw]`` for r < vh, j < vw; ``acc`` is scratch (modified).

    ``bval`` is added when ``has_b``; the residual is read when ``has_r`` (it may be ``y``
    itself with the same offsets: every residual element is read before any is written).
    ``a0``/``a1`` are the activation's attributes in y's dtype."""
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
                        store_at(acc, d + j, load_at(acc, d + j) + load_at(res, s + j))
                else:
                    for j in range(vw):
                        store_at(acc, d + j, load_at(acc, d + j) + load_at(res, s + j * rsw))
    if code != IDENTITY:
        n = (vh - 1) * pitch + vw
        seg = acc[a:a + n]
        map_inplace(code, seg, n, a0, a1)
    for r in range(vh):
        d = a + r * pitch
        o = yo + r * ysh
        if ysw == 1:
            for j in range(vw):
                store_at(y, o + j, load_at(acc, d + j))
        else:
            for j in range(vw):
                store_at(y, o + j * ysw, load_at(acc, d + j))
