"""Direct conv2d static kernel for groups with few output channels (depthwise and friends).

Implicit GEMM wastes most of a register tile when a group has one or two output channels
(depthwise: M = 1, K = KH*KW). This kernel works on a per-thread packed buffer instead: for
each input channel of the tile's group it copies the tile's input window, zero-padded, into
``buf`` (``R x Wp``: ``R = (vh-1)*sh + (KH-1)*dh + 1`` rows, ``Wp = (vw-1)*sw + (KW-1)*dw + 1``
columns; only elements inside x are read), then adds every kernel tap to the accumulators
of the tile's output channels with branch-free loops vectorized along the output width.
With unit strides the accumulator rows have the buffer's pitch, so one tap is ONE long loop
over all the tile's rows (the few columns past ``vw`` of each row are computed and dropped);
three horizontally adjacent taps are fused into one pass, and a 3x3 kernel's nine taps into
one (depthwise 3x3, 128 channels of 113x115, 1 thread: 836-921 -> 766-847 us). The epilogue
(bias, residual, activation per channel, then a fused sequence's step program over the
tile) runs before the store; the accumulators start at the bias.
"""
import numpy as np
from numba import njit

from .callee import callee
from .conv_epilogue import finish_channel, prepare_channel, store_channel, tile_steps
from ..abi.conv_table import (CV_BOFF, CV_BS, CV_CG, CV_DH, CV_DW, CV_H, CV_HASB, CV_HASR, CV_KH,
                          CV_KW, CV_MG, CV_ROFF, CV_RSC, CV_RSH, CV_RSN, CV_RSW, CV_SH, CV_SW,
                          CV_W, CV_XOFF, CV_XSC, CV_XSH, CV_XSN, CV_XSW, CV_YOFF, CV_YSC,
                          CV_YSH, CV_YSN, CV_YSW)
from .conv_window import col_range
from .gemm_ukernel import load_at, store_at
from .half import load, store
from .scalar_ops import IDENTITY


@callee(cache=True)
def direct_sizes(vh, vw, mv, KH, KW, sh, sw, dh, dw):
    """(R, Wp, accumulator pitch, buffer size, accumulator size) of a direct tile."""
    R = (vh - 1) * sh + (KH - 1) * dh + 1
    Wp = (vw - 1) * sw + (KW - 1) * dw + 1
    pitch = Wp if (sh == 1 and sw == 1) else vw
    # the buffer holds the window as packed rows, or split into the sh x sw phases of
    # ceil(R/sh) x ceil(Wp/sw) (``_pack_phases``), whichever is larger
    phased = sh * sw * ((R + sh - 1) // sh) * ((Wp + sw - 1) // sw)
    return R, Wp, pitch, max(R * Wp, phased), mv * vh * pitch


@callee(cache=True, _nrt=False)
def _pack_phases(x, xc, xsh, xsw, H, W, ih0, iw0, R, Wp, sh, sw, Rq, Wq, buf):
    """The window's ``R x Wp`` elements ``x[ih0 + i, iw0 + j]`` split by the strides:
    ``buf[((a*sw + b)*Rq + qr)*Wq + qc] = x[ih0 + qr*sh + a, iw0 + qc*sw + b]``, 0 outside x
    (padding is not read). Every kernel tap then reads unit-stride rows of one phase."""
    zero = buf.dtype.type(0)
    for bb in range(sw):        # (the column phase outside: its range computed once)
        nq = (Wp - bb + sw - 1) // sw
        lo, hi = col_range(iw0 + bb, sw, W, nq)
        step = sw * xsw
        a = 0                   # window row i's phase and its row in the phase
        qr = 0
        for i in range(R):
            d = ((a * sw + bb) * Rq + qr) * Wq
            ih = ih0 + i
            if ih < 0 or ih >= H:
                for q in range(nq):
                    store_at(buf, d + q, zero)
            else:
                for q in range(lo):
                    store_at(buf, d + q, zero)
                s = xc + ih * xsh + (iw0 + bb) * xsw
                if step == 1:   # (unit steps: a copy LLVM vectorizes)
                    for q in range(lo, hi):
                        store_at(buf, d + q, load(load_at(x, s + q)))
                else:
                    for q in range(lo, hi):
                        store_at(buf, d + q, load(load_at(x, s + q * step)))
                for q in range(hi, nq):
                    store_at(buf, d + q, zero)
            a += 1
            if a == sh:
                a = 0
                qr += 1


@callee(cache=True, _nrt=False)
def _pack_rows(x, xc, xsh, xsw, H, W, ih0, iw0, R, Wp, buf):
    """buf[r, j] = x[ih0 + r, iw0 + j] inside x, 0 outside (padding is not read)."""
    zero = buf.dtype.type(0)
    lo, hi = col_range(iw0, 1, W, Wp)
    for r in range(R):
        d = r * Wp
        ih = ih0 + r
        if ih < 0 or ih >= H:
            for j in range(Wp):
                store_at(buf, d + j, zero)
            continue
        for j in range(lo):
            store_at(buf, d + j, zero)
        s = xc + ih * xsh + iw0 * xsw
        if xsw == 1:
            for j in range(lo, hi):
                store_at(buf, d + j, load(load_at(x, s + j)))
        else:
            for j in range(lo, hi):
                store_at(buf, d + j, load(load_at(x, s + j * xsw)))
        for j in range(hi, Wp):
            store_at(buf, d + j, zero)


@callee(cache=True, _nrt=False, fastmath={"contract"})
def _flat1(acc, a0_, n, buf, o, w0):
    for q in range(n):
        store_at(acc, a0_ + q, load_at(acc, a0_ + q) + w0 * load_at(buf, o + q))


@callee(cache=True, _nrt=False, fastmath={"contract"})
def _flat3(acc, a0_, n, buf, o, d, w0, w1, w2):
    for q in range(n):
        store_at(acc, a0_ + q, load_at(acc, a0_ + q) + (w0 * load_at(buf, o + q)
                                                         + w1 * load_at(buf, o + d + q)
                                                         + w2 * load_at(buf, o + 2 * d + q)))


@callee(cache=True, _nrt=False, fastmath={"contract"})
def _flat3x3(acc, a0_, n, buf, o, d, e, w0, w1, w2, w3, w4, w5, w6, w7, w8):
    """acc += the 9 taps of a 3x3 kernel in one pass (``d``: the buffer step between the
    taps of a row, ``e``: between kernel rows; weights row-major)."""
    for q in range(n):
        p = o + q
        store_at(acc, a0_ + q, load_at(acc, a0_ + q)
                 + ((w0 * load_at(buf, p) + w1 * load_at(buf, p + d)
                     + w2 * load_at(buf, p + 2 * d))
                    + (w3 * load_at(buf, p + e) + w4 * load_at(buf, p + e + d)
                       + w5 * load_at(buf, p + e + 2 * d))
                    + (w6 * load_at(buf, p + 2 * e) + w7 * load_at(buf, p + 2 * e + d)
                       + w8 * load_at(buf, p + 2 * e + 2 * d))))


@callee(cache=True, _nrt=False, fastmath={"contract"})
def _flat3x3_out(y, yo, ysh, vh, vw, buf, Wp, d, e, bval, w0, w1, w2, w3, w4, w5, w6, w7, w8):
    """``y[yo + r*ysh + j] = bval +`` the 9 taps of a 3x3 kernel at ``buf[r*Wp + j]`` (the
    sum of ``_flat3x3``) for r < vh, j < vw: one input channel's whole product, stored
    straight into y (no accumulator pass, no epilogue pass)."""
    for r in range(vh):
        o = yo + r * ysh
        p0 = r * Wp
        for j in range(vw):
            p = p0 + j
            store_at(y, o + j, store(y, bval
                     + ((w0 * load_at(buf, p) + w1 * load_at(buf, p + d)
                         + w2 * load_at(buf, p + 2 * d))
                        + (w3 * load_at(buf, p + e) + w4 * load_at(buf, p + e + d)
                           + w5 * load_at(buf, p + e + 2 * d))
                        + (w6 * load_at(buf, p + 2 * e) + w7 * load_at(buf, p + 2 * e + d)
                           + w8 * load_at(buf, p + 2 * e + 2 * d)))))


@callee(cache=True, _nrt=False, fastmath={"contract"})
def _taps3x3_out(y, yo, ysh, vh, vw, buf, Wq, t0, t1, t2, t3, t4, t5, t6, t7, t8, bval, w0, w1,
                 w2, w3, w4, w5, w6, w7, w8):
    """``y[yo + r*ysh + j] = bval + sum_k w_k * buf[t_k + r*Wq + j]`` for r < vh, j < vw:
    the 9 taps of a 3x3 kernel over a phase-split window (``_pack_phases``; ``t_k``: tap k's
    phase row start), one input channel's whole product stored straight into y (no
    accumulator pass, no epilogue pass), unit-stride loads for every stride."""
    for r in range(vh):
        o = yo + r * ysh
        p = r * Wq
        for j in range(vw):
            q = p + j
            store_at(y, o + j, store(y, bval
                     + ((w0 * load_at(buf, t0 + q) + w1 * load_at(buf, t1 + q)
                         + w2 * load_at(buf, t2 + q))
                        + (w3 * load_at(buf, t3 + q) + w4 * load_at(buf, t4 + q)
                           + w5 * load_at(buf, t5 + q))
                        + (w6 * load_at(buf, t6 + q) + w7 * load_at(buf, t7 + q)
                           + w8 * load_at(buf, t8 + q)))))


@njit(inline="always")
def _phase_starts(d, s, far, near):
    """Offsets of kernel taps k = 0, 1, 2 along one axis in a phase-split window (dilation
    d, stride s): ``((k*d) % s) * far + ((k*d) // s) * near`` (no division at stride 1). Tap
    (kh, kw) reads output (0, 0) at the sum of its row's and its column's."""
    if s == 1:
        return 0, d * near, 2 * d * near
    return 0, (d % s) * far + (d // s) * near, ((2 * d) % s) * far + ((2 * d) // s) * near


@callee(cache=True, _nrt=False, fastmath={"contract"})
def _strided1(acc, a0_, vw, buf, o, sw, w0):
    for j in range(vw):
        store_at(acc, a0_ + j, load_at(acc, a0_ + j) + w0 * load_at(buf, o + j * sw))


@callee(cache=True, _nrt=False)
def _add_taps(acc, a0_, buf, w, wr, vh, vw, Wp, pitch, KH, KW, sh, sw, dh, dw):
    """acc (one output channel, rows of ``pitch``) += all taps of one input channel."""
    flat = sh == 1 and sw == 1
    n = (vh - 1) * pitch + vw
    if flat and KH == 3 and KW == 3:      # the common depthwise kernel: one pass, not three
        _flat3x3(acc, a0_, n, buf, 0, dw, dh * Wp, load(load_at(w, wr)),
                 load(load_at(w, wr + 1)), load(load_at(w, wr + 2)), load(load_at(w, wr + 3)),
                 load(load_at(w, wr + 4)), load(load_at(w, wr + 5)), load(load_at(w, wr + 6)),
                 load(load_at(w, wr + 7)), load(load_at(w, wr + 8)))
        return
    for kh in range(KH):
        wk = wr + kh * KW
        if flat:
            o = kh * dh * Wp
            kw = 0
            while kw + 3 <= KW:
                _flat3(acc, a0_, n, buf, o + kw * dw, dw, load(load_at(w, wk + kw)),
                       load(load_at(w, wk + kw + 1)), load(load_at(w, wk + kw + 2)))
                kw += 3
            for k in range(kw, KW):
                _flat1(acc, a0_, n, buf, o + k * dw, load(load_at(w, wk + k)))
        else:
            for r in range(vh):
                o = (r * sh + kh * dh) * Wp
                for k in range(KW):
                    _strided1(acc, a0_ + r * pitch, vw, buf, o + k * dw, sw,
                              load(load_at(w, wk + k)))


@njit(inline="always")
def _geometry(common, vh, vw, mv):
    """(KH, KW, Cg, sh, sw, dh, dw, R, Wp, accumulator pitch) of a direct tile."""
    KH = common[CV_KH]
    KW = common[CV_KW]
    sh = common[CV_SH]
    sw = common[CV_SW]
    dh = common[CV_DH]
    dw = common[CV_DW]
    R, Wp, pitch, _, _ = direct_sizes(vh, vw, mv, KH, KW, sh, sw, dh, dw)
    return KH, KW, common[CV_CG], sh, sw, dh, dw, R, Wp, pitch


@njit(inline="always")
def direct_tile(x, w, b, res, y, common, n, g, m0, mv, oh0, vh, ow0, vw, ih0, iw0,
                buf, acc, code, a0, a1, prog, pattrs, sides, cgeo, lgeo):
    """Output channels ``m0 .. m0+mv`` of group ``g`` (index inside the group), rows
    ``oh0 .. oh0+vh``, columns ``ow0 .. ow0+vw`` of image ``n``. ``buf`` and ``acc`` hold
    at least the sizes of ``direct_sizes``. Arguments as in ``conv.conv_driver``; ``lgeo``
    is the per-thread scratch of the epilogue's step program."""
    KH, KW, Cg, sh, sw, dh, dw, R, Wp, pitch = _geometry(common, vh, vw, mv)
    zero = acc.dtype.type(0)
    mfirst = g * common[CV_MG] + m0
    has_b = common[CV_HASB] != 0
    has_r = common[CV_HASR] != 0
    steps = prog.shape[0] > 0
    xb = common[CV_XOFF] + n * common[CV_XSN] + g * Cg * common[CV_XSC]
    if (Cg == 1 and KH == 3 and KW == 3 and not steps and not has_r and code == IDENTITY
            and common[CV_YSW] == 1):
        # one input channel, a 3x3 kernel, nothing after the bias: the window split by the
        # strides once, then each output channel's rows written once, straight into y
        Rq = (R + sh - 1) // sh
        Wq = (Wp + sw - 1) // sw
        r0, r1, r2 = _phase_starts(dh, sh, sw * Rq * Wq, Wq)
        c0, c1, c2 = _phase_starts(dw, sw, Rq * Wq, 1)
        bs = common[CV_BOFF]
        if sh == 1 and sw == 1:     # (one phase: the rows as they are)
            _pack_rows(x, xb, common[CV_XSH], common[CV_XSW], common[CV_H], common[CV_W],
                       ih0, iw0, R, Wp, buf)
        else:
            _pack_phases(x, xb, common[CV_XSH], common[CV_XSW], common[CV_H], common[CV_W],
                         ih0, iw0, R, Wp, sh, sw, Rq, Wq, buf)
        for i in range(mv):
            m = mfirst + i
            bval = load(load_at(b, bs + m * common[CV_BS])) if has_b else zero
            wr = m * 9
            yo = (common[CV_YOFF] + n * common[CV_YSN] + m * common[CV_YSC]
                  + oh0 * common[CV_YSH] + ow0)
            w0 = load(load_at(w, wr))
            w1 = load(load_at(w, wr + 1))
            w2 = load(load_at(w, wr + 2))
            w3 = load(load_at(w, wr + 3))
            w4 = load(load_at(w, wr + 4))
            w5 = load(load_at(w, wr + 5))
            w6 = load(load_at(w, wr + 6))
            w7 = load(load_at(w, wr + 7))
            w8 = load(load_at(w, wr + 8))
            if sh == 1 and sw == 1:     # (two tap steps, not nine offsets: 4% faster)
                _flat3x3_out(y, yo, common[CV_YSH], vh, vw, buf, Wp, dw, dh * Wp, bval, w0,
                             w1, w2, w3, w4, w5, w6, w7, w8)
            else:
                _taps3x3_out(y, yo, common[CV_YSH], vh, vw, buf, Wq, r0 + c0, r0 + c1,
                             r0 + c2, r1 + c0, r1 + c1, r1 + c2, r2 + c0, r2 + c1, r2 + c2,
                             bval, w0, w1, w2, w3, w4, w5, w6, w7, w8)
    else:
        _direct_general(x, w, b, res, y, common, n, g, m0, mv, oh0, vh, ow0, vw, ih0, iw0,
                        buf, acc, code, a0, a1, prog, pattrs, sides, cgeo, lgeo)


@njit(inline="always")
def _direct_general(x, w, b, res, y, common, n, g, m0, mv, oh0, vh, ow0, vw, ih0, iw0,
                    buf, acc, code, a0, a1, prog, pattrs, sides, cgeo, lgeo):
    """``direct_tile`` through the accumulators: every input channel's taps added, then the
    epilogue (bias, residual, activation, step program) and the stores."""
    KH, KW, Cg, sh, sw, dh, dw, R, Wp, pitch = _geometry(common, vh, vw, mv)
    zero = acc.dtype.type(0)
    mfirst = g * common[CV_MG] + m0
    has_b = common[CV_HASB] != 0
    has_r = common[CV_HASR] != 0
    for i in range(mv):          # accumulators start at the bias
        bval = load(load_at(b, common[CV_BOFF] + (mfirst + i) * common[CV_BS])) if has_b \
            else zero
        a = i * vh * pitch
        for q in range(vh * pitch):
            store_at(acc, a + q, bval)
    xb = common[CV_XOFF] + n * common[CV_XSN] + g * Cg * common[CV_XSC]
    for c in range(Cg):
        _pack_rows(x, xb + c * common[CV_XSC], common[CV_XSH], common[CV_XSW], common[CV_H],
                   common[CV_W], ih0, iw0, R, Wp, buf)
        for i in range(mv):
            _add_taps(acc, i * vh * pitch, buf, w, ((mfirst + i) * Cg + c) * KH * KW,
                      vh, vw, Wp, pitch, KH, KW, sh, sw, dh, dw)
    steps = prog.shape[0] > 0
    # the bias is in the accumulators already; a bool, not a literal False, so that the
    # epilogue calls share the compiled functions of conv.py's calls
    added = np.bool_(False)
    for i in range(mv):
        m = mfirst + i
        yo = (common[CV_YOFF] + n * common[CV_YSN] + m * common[CV_YSC]
              + oh0 * common[CV_YSH] + ow0 * common[CV_YSW])
        ro = (common[CV_ROFF] + n * common[CV_RSN] + m * common[CV_RSC]
              + oh0 * common[CV_RSH] + ow0 * common[CV_RSW])
        if steps:
            prepare_channel(acc, i * vh * pitch, vh, vw, pitch, added, zero, has_r, res, ro,
                            common[CV_RSH], common[CV_RSW], code, a0, a1)
        else:
            finish_channel(acc, i * vh * pitch, vh, vw, pitch, y, yo, common[CV_YSH],
                           common[CV_YSW], added, zero, has_r, res, ro, common[CV_RSH],
                           common[CV_RSW], code, a0, a1)
    if steps:       # the fused sequence's program over the whole tile, then the stores
        tile_steps(y, acc, 0, vh * pitch, mv, vh, vw, pitch, prog, pattrs, sides, cgeo, lgeo, n,
                   mfirst, oh0, ow0)
        for i in range(mv):
            yo = (common[CV_YOFF] + n * common[CV_YSN] + (mfirst + i) * common[CV_YSC]
                  + oh0 * common[CV_YSH] + ow0 * common[CV_YSW])
            store_channel(acc, i * vh * pitch, vh, vw, pitch, y, yo, common[CV_YSH],
                          common[CV_YSW])
