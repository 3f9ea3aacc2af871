"""Input windows of conv2d tiles packed as GEMM B panels (implicit im2col, per tile).

A conv2d output tile covers output rows ``oh0 .. oh0+vh`` and columns ``ow0 .. ow0+vw`` of
one image ``n`` and one group ``g``. As a GEMM operand its B matrix is ``X_col[k, p]`` with
``k = (c, kh, kw)`` over the group's ``Cg`` input channels and the kernel taps, and
``p = r * vw + j`` over the tile's positions (row-major inside the tile). Element (k, p)
reads the input at row ``ih0 + r*sh + kh*dh``, column ``iw0 + j*sw + kw*dw`` where
``(ih0, iw0)`` is the tile's input offset from the parameter table (negative near padding).

:func:`pack_window` writes the K block ``k0 .. k0+kc`` of that matrix straight from ``x``
into a per-thread buffer in the micro-kernels' B layout (NR-column micro-panels, element
(k, p) at ``(p // NR) * NR * kc + k * NR + p % NR``). Positions whose input lies in the
padding are written as zero and never read from memory; no copy of the whole input (no
im2col matrix) is ever made. Columns past ``vh*vw`` in the last micro-panel are zero.
"""

from .callee import callee
from .gemm_ukernel import load_at, store_at
from .half import load


@callee(cache=True)
def col_range(iwb, sw, W, vw):
    """Tile columns ``j`` in ``[lo, hi)`` whose input column ``iwb + j*sw`` lies in
    ``[0, W)`` (``sw >= 1``); an empty range has ``lo == hi``."""
    lo = 0 if iwb >= 0 else (-iwb + sw - 1) // sw
    t = W - 1 - iwb
    hi = t // sw + 1 if t >= 0 else 0
    if hi > vw:
        hi = vw
    if lo > hi:
        lo = hi
    return lo, hi


@callee(cache=True)
def _zero_seg(dst, p_lo, p_hi, NR, PS, d0):
    """Zero positions ``p_lo .. p_hi`` of packed row ``k`` (``d0 = k*NR``)."""
    zero = dst.dtype.type(0)
    p = p_lo
    while p < p_hi:
        pan = p // NR
        q = p - pan * NR
        n = min(p_hi - p, NR - q)
        d = pan * PS + d0 + q
        for t in range(n):
            store_at(dst, d + t, zero)
        p += n


@callee(cache=True)
def _copy_seg(x, s0, xs, dst, p0, lo, hi, NR, PS, d0):
    """Positions ``p0+lo .. p0+hi`` of packed row ``k`` from ``x[s0 + j*xs]``."""
    j = lo
    while j < hi:
        p = p0 + j
        pan = p // NR
        q = p - pan * NR
        n = min(hi - j, NR - q)
        d = pan * PS + d0 + q
        s = s0 + j * xs
        if xs == 1:
            for t in range(n):
                store_at(dst, d + t, load(load_at(x, s + t)))
        else:
            for t in range(n):
                store_at(dst, d + t, load(load_at(x, s + t * xs)))
        j += n


@callee(cache=True)
def pack_window(x, xb, xsc, xsh, xsw, H, W, ih0, iw0, sh, sw, dh, dw, KH, KW,
                k0, kc, vh, vw, NR, dst):
    """Pack rows ``k0 .. k0+kc`` of the tile's B matrix into ``dst`` (see module doc).

    ``x[xb + c*xsc + ih*xsh + iw*xsw]`` is input element (c, ih, iw) of the tile's image and
    group (element strides, any sign); ``H, W`` its spatial size. Only elements with
    ``0 <= ih < H`` and ``0 <= iw < W`` are read.
    """
    nv = vh * vw
    npan = (nv + NR - 1) // NR
    PS = NR * kc
    khw = KH * KW
    c = k0 // khw
    rem = k0 - c * khw
    kh = rem // KW
    kw = rem - kh * KW
    xs = sw * xsw
    for k in range(kc):
        d0 = k * NR
        ihb = ih0 + kh * dh
        iwb = iw0 + kw * dw
        lo, hi = col_range(iwb, sw, W, vw)
        xc = xb + c * xsc + iwb * xsw
        for r in range(vh):
            ih = ihb + r * sh
            p0 = r * vw
            if ih < 0 or ih >= H or lo == hi:
                _zero_seg(dst, p0, p0 + vw, NR, PS, d0)
            else:
                if lo > 0:
                    _zero_seg(dst, p0, p0 + lo, NR, PS, d0)
                _copy_seg(x, xc + ih * xsh, xs, dst, p0, lo, hi, NR, PS, d0)
                if hi < vw:
                    _zero_seg(dst, p0 + hi, p0 + vw, NR, PS, d0)
        _zero_seg(dst, nv, npan * NR, NR, PS, d0)
        kw += 1
        if kw == KW:
            kw = 0
            kh += 1
            if kh == KH:
                kh = 0
                c += 1
