"""conv2d GEMM tiles that read their input window and their weights where they lie.

The packed path of ``conv.py`` copies every K block of a tile's input window into NR-column
micro-panels (``conv_window.pack_window``) and the weights into MR-row panels: on 64 -> 64
3x3 over 57x61 (2 threads) the window copy alone was 32% of the time. With unit column
stride and unit horizontal conv stride, row k = (c, kh, kw) of a tile's B matrix over one
output row segment ``j0 .. j0+ncols`` is itself a contiguous input segment::

    B[k, j] = x[c, ih0 + r*sh + kh*dh, iw0 + j0 + kw*dw + j]

so the in-place micro-kernel's window form (``gemm_inplace``) loads it with masked vector
loads: ``koff[k]`` is the row's offset from the segment's first element, and ``kmask[k]``
has bit j set when that element lies inside the input (padding columns and rows are
neither read nor faulted on; they count as zero). A whole segment that reads no padding at
any tap (every row's and column's lanes set) runs the window form without lane masks: no
mask words per K row, plain loads and stores. The weights ``w[m, k]`` are k-contiguous rows,
broadcast in place as the A operand.

Sources (``window_mode``): x itself (``IN_PLACE``); or, for other strides, a copy of x split
into phases by the conv strides (``COPIED``: phase (a, b) of plane (n, c) holds rows
``a, a+sh, ...`` and columns ``b, b+sw, ...``), in which every tap reads unit-stride rows and
one output row further is one phase row further -- made once per call, in parallel, of the
phases some tap reads only (a 1x1/2 conv copies a quarter of x): never more than the packed
path copies, which packs the same window elements again for every tile and channel block.

The register tile is 6 channels x up to 4 vectors, or for float32 8 channels x up to 3
vectors when that pads fewer channels (``abi.tiles.conv_window_tile``: 64 channels are 8
blocks of 8, not 11 of 6). A tile runs in segments of up to that many vectors (4: 64
float32 or 32 float64 positions; 3: 48 float32): across rows when one output row further is
exactly ``vw`` elements further in the source and in the destination (a tile as wide as the
output of a "same"-padded conv: 7x7 outputs fill 49 of 64 lanes instead of 7 of 16 per
row), else within each row. Per segment every K block (``KC`` rows) runs over the tile's
channel blocks, so the block's input rows stay in cache across them. Products land in the
tile's accumulator rows for the shared epilogue, or straight in y when nothing follows the
product (``conv.py``'s ``plain``).

Half-precision inputs are never read in place (packing widens them to float32): the tile is
a no-op for them and the driver packs instead.
"""
import numpy as np
from numba import njit
from numba.extending import overload

from ..abi.tiles import CONV_WINDOW_TILES, conv_window_tile
from ..abi.conv_table import (CV_C, CV_N, CV_CG, CV_DH, CV_DW, CV_H, CV_KH, CV_KW, CV_SH,
                              CV_SW, CV_W, CV_XOFF, CV_XSC, CV_XSH, CV_XSN, CV_XSW)
from .callee import callee
from .conv_window import col_range
from .deinterleave import can_split2, split2
from .gemm_inplace import make_inplace_ukernel
from .gemm_ukernel import load_at, store_at
from .half import is_half, load

#: the window kernels' register tiles (output channels per call x vectors), see
#: ``abi.tiles.CONV_WINDOW_TILES``: 6 rows x 1-4 vectors and 8 rows x 1-3 vectors
assert CONV_WINDOW_TILES == ((6, 4), (8, 3))
_ukw61, _ukw62, _ukw63, _ukw64 = (make_inplace_ukernel(6, nv, window=True) for nv in (1, 2, 3, 4))
_ukw81, _ukw82, _ukw83 = (make_inplace_ukernel(8, nv, window=True) for nv in (1, 2, 3))
# ... and for whole segments whose every tap reads inside the input: no lane masks (the
# stem's 8 x 3 kernel alone, K = 147, one thread: 145-149 -> 167-176 GFLOP/s)
_ukw64f = make_inplace_ukernel(6, 4, window=True, full=True)
_ukw83f = make_inplace_ukernel(8, 3, window=True, full=True)
_window_tile_of = njit(inline="always")(conv_window_tile)


#: ``window_mode``: pack (the packed path), read x in place, read a phase-split copy
PACKED, IN_PLACE, COPIED = 0, 1, 2
#: ``wgeo``, the source of the window (x itself or its phase-split copy): element offset,
#: image, channel and row strides, the row and column phase strides, the row and column
#: split factors (1 in place; the conv strides in a copy), the tiles' first input row and
#: column modulo those factors (the same for every tile)
(WG_OFF, WG_SN, WG_SC, WG_SH, WG_PH, WG_PW, WG_FH, WG_FW, WG_RH, WG_RW, WG_SIZE) = range(11)


def window_mode(x, common):
    """How GEMM tiles reach their input window: ``IN_PLACE`` with unit column stride and
    unit horizontal conv stride, else ``COPIED`` (a phase-split copy, ``phase_split``);
    ``PACKED`` for half precision (packing widens it to float32)."""


@overload(window_mode)
def _window_mode(x, common):
    if is_half(x.dtype):
        return lambda x, common: PACKED

    def impl(x, common):
        if common[CV_XSW] == 1 and common[CV_SW] == 1:
            return IN_PLACE
        return COPIED
    return impl


@callee(cache=True)
def window_source(mode, common, ih0, iw0, wgeo):
    """Fill ``wgeo`` for ``mode`` (not ``PACKED``; ``(ih0, iw0)``: any tile's first input
    row and column) and return the element count of the phase-split copy (0 in place). The
    copy splits every input plane (n, c) by the conv strides into ``sh*sw`` phases of
    ``Hq x Wq``: phase (a, b) holds the input rows ``a, a+sh, ...`` and columns
    ``b, b+sw, ...``, so that every kernel tap reads unit-stride rows of one phase, and one
    output row further is one phase row further."""
    if mode == IN_PLACE:
        wgeo[WG_OFF] = common[CV_XOFF]
        wgeo[WG_SN] = common[CV_XSN]
        wgeo[WG_SC] = common[CV_XSC]
        wgeo[WG_SH] = common[CV_XSH]
        wgeo[WG_PH] = 0
        wgeo[WG_PW] = 0
        wgeo[WG_FH] = 1
        wgeo[WG_FW] = 1
        wgeo[WG_RH] = 0
        wgeo[WG_RW] = 0
        return 0
    sh = common[CV_SH]
    sw = common[CV_SW]
    Hq = (common[CV_H] + sh - 1) // sh
    Wq = (common[CV_W] + sw - 1) // sw
    wgeo[WG_OFF] = 0
    wgeo[WG_SH] = Wq
    wgeo[WG_PW] = Hq * Wq
    wgeo[WG_PH] = sw * Hq * Wq
    wgeo[WG_SC] = sh * sw * Hq * Wq
    wgeo[WG_SN] = common[CV_C] * wgeo[WG_SC]
    wgeo[WG_FH] = sh
    wgeo[WG_FW] = sw
    wgeo[WG_RH] = ih0 % sh
    wgeo[WG_RW] = iw0 % sw
    return common[CV_N] * wgeo[WG_SN]


@callee(cache=True)
def phase_used(r, f, taps, d):
    """Whether phase ``a`` (bit a of the result) of a split by ``f`` is read by some of the
    ``taps`` kernel taps (dilation d) when the tiles start at phase r."""
    if f > 62:                          # (strides past 62: every phase counts as read)
        return np.int64(-1)
    used = np.int64(0)
    for k in range(min(taps, f)):       # taps k and k + f read the same phase
        used |= np.int64(1) << ((r + k * d) % f)
    return used


@njit(inline="always")
def is_used(used, a):
    """Bit a of a ``phase_used`` result (any a >= 0)."""
    return used == -1 or (used >> a) & 1 == 1


@callee(cache=True)
def phase_split(x, common, wgeo, xs, lo, hi):
    """Input rows ``lo .. hi`` (row key ``n*H + ih``), of every channel, of x (any strides)
    into their phases of the copy ``xs`` (``window_source``), the phases some tap reads only
    (the others, and phase columns past the input's end, are left unwritten: no tap or mask
    reads them). Stride 2 over rows of unit stride runs a vector at a time (``split2``). The
    driver's threads copy the rows of their own tiles (``conv_deal``)."""
    C = common[CV_C]
    H = common[CV_H]
    W = common[CV_W]
    xsw = common[CV_XSW]
    fh = wgeo[WG_FH]
    fw = wgeo[WG_FW]
    step = fw * xsw
    rows_used = phase_used(wgeo[WG_RH], fh, common[CV_KH], common[CV_DH])
    cols_used = phase_used(wgeo[WG_RW], fw, common[CV_KW], common[CV_DW])
    lanes = 64 // x.itemsize            # items per phase of a split2
    if lo >= hi:
        return
    for n in range(lo // H, (hi - 1) // H + 1):
        ih0 = max(lo - n * H, 0)
        ih1 = min(hi - n * H, H)
        for c in range(C):
            a = ih0 % fh                # the row's phase and its row in the phase
            qh = ih0 // fh
            for ih in range(ih0, ih1):
                if is_used(rows_used, a):
                    src = (common[CV_XOFF] + n * common[CV_XSN] + c * common[CV_XSC]
                           + ih * common[CV_XSH])
                    dst = (n * wgeo[WG_SN] + c * wgeo[WG_SC] + a * wgeo[WG_PH]
                           + qh * wgeo[WG_SH])
                    q0 = 0
                    if fw == 2 and xsw == 1 and can_split2(x, xs):
                        # both column phases a vector at a time (even, odd): 2L items of the
                        # row per load, while the odd phase (W // 2 items) has L more
                        use0 = is_used(cols_used, 0)
                        use1 = is_used(cols_used, 1)
                        while q0 + lanes <= W // 2:
                            split2(x, src + 2 * q0, xs, dst + q0, dst + wgeo[WG_PW] + q0, use0,
                                   use1)
                            q0 += lanes
                    for ph in range(fw):
                        if not is_used(cols_used, ph):
                            continue
                        s0 = src + ph * xsw
                        d0 = dst + ph * wgeo[WG_PW]
                        for q in range(q0, (W - ph + fw - 1) // fw):
                            store_at(xs, d0 + q, load(load_at(x, s0 + q * step)))
                a += 1
                if a == fh:
                    a = 0
                    qh += 1


@callee(cache=True)
def lane_bits(lo, hi):
    """An int64 with bits ``lo .. hi-1`` set (clipped to ``0 .. 64``)."""
    lo = max(lo, 0)
    hi = min(hi, 64)
    if lo >= hi:
        return np.int64(0)
    top = np.int64(-1) if hi >= 64 else (np.int64(1) << hi) - 1
    return top & ~((np.int64(1) << lo) - 1)


@njit(inline="always")
def row_mask(q0, ncols, vw, ihb, sh, H):
    """The lanes of the segment of output positions ``q0 .. q0+ncols`` of a tile ``vw``
    columns wide (position q = r*vw + j) whose row reads inside the input at one kernel row:
    bit ``q - q0`` set when input row ``ihb + r*sh`` lies in ``[0, H)``."""
    m = np.int64(0)
    for r in range(q0 // vw, (q0 + ncols - 1) // vw + 1):
        ih = ihb + r * sh
        if 0 <= ih < H:
            m |= lane_bits(r * vw - q0, min((r + 1) * vw - q0, ncols))
    return m


@njit(inline="always")
def col_mask(q0, ncols, vw, lo, hi):
    """The lanes of that segment whose column j lies in ``[lo, hi)`` (one kernel column's
    valid columns, ``conv_window.col_range``). A tap's mask is its row's ``row_mask`` and
    its column's ``col_mask``: KH + KW evaluations per segment, not KH * KW."""
    m = np.int64(0)
    if lo >= hi:
        return m
    for r in range(q0 // vw, (q0 + ncols - 1) // vw + 1):
        m |= lane_bits(r * vw + lo - q0, min(r * vw + hi - q0, ncols))
    return m


@callee(cache=True, _nrt=False)
def window_offsets(wgeo, common, koff):
    """``koff[k]``, k = (c, kh, kw): the offset of row k of every window tile's B matrix
    from its segment's first source element (the tap's phase, row and column in the
    source; ``WG_RH``, ``WG_RW``: the tiles' first input row and column modulo the split
    factors, the same for every tile): once per thread and call, not per tile."""
    fh = wgeo[WG_FH]
    fw = wgeo[WG_FW]
    rs = wgeo[WG_SH]
    rh = wgeo[WG_RH]
    rw = wgeo[WG_RW]
    k = 0
    for c in range(common[CV_CG]):
        for kh in range(common[CV_KH]):
            a = rh + kh * common[CV_DH]
            for kw in range(common[CV_KW]):
                b = rw + kw * common[CV_DW]
                koff[k] = (c * wgeo[WG_SC] + (a % fh) * wgeo[WG_PH] + (a // fh) * rs
                           + (b % fw) * wgeo[WG_PW] + b // fw)
                k += 1


def window_tile(src, wgeo, w, common, n, g, mg, mv, vh, vw, ih0, iw0, KC, koff, kmask, cb, c0,
                ldc, crow):
    """The product of one conv tile (output channels ``mg .. mg+mv`` of group ``g``, rows
    and columns ``vh x vw`` of image n whose tap (0, 0) input is (ih0, iw0)) into
    ``cb[c0 + i*ldc + r*crow + j]`` (the tile's accumulator rows, ``crow = vw``, or the
    output itself), the weights and ``src`` (x itself or its phase-split copy, addressed by
    ``wgeo``) read in place, K in blocks of ``KC``. ``koff`` holds the K row offsets
    (``window_offsets``), ``kmask`` K + KH + 3*KW int64s. Only when ``window_mode`` is not
    ``PACKED``; nothing of cb but the tile's elements is read or written."""


@overload(window_tile, jit_options={"_nrt": False})
def _window_tile(src, wgeo, w, common, n, g, mg, mv, vh, vw, ih0, iw0, KC, koff, kmask, cb, c0,
                 ldc, crow):
    if is_half(w.dtype) or cb.dtype != w.dtype:
        return (lambda src, wgeo, w, common, n, g, mg, mv, vh, vw, ih0, iw0, KC, koff, kmask,
                cb, c0, ldc, crow: None)
    L = 512 // cb.dtype.bitwidth        # lanes of a vector

    def impl(src, wgeo, w, common, n, g, mg, mv, vh, vw, ih0, iw0, KC, koff, kmask, cb, c0, ldc,
             crow):
        # (the loops are written out here, not called: a call per tile or segment with array
        # arguments costs reference counts that both threads contend for)
        Cg = common[CV_CG]
        KH = common[CV_KH]
        KW = common[CV_KW]
        khw = KH * KW
        K = Cg * khw
        sh = common[CV_SH]
        sw = common[CV_SW]
        dh = common[CV_DH]
        dw = common[CV_DW]
        H = common[CV_H]
        W = common[CV_W]
        fh = wgeo[WG_FH]
        fw = wgeo[WG_FW]
        rs = wgeo[WG_SH]
        rstep = (sh // fh) * rs         # source elements per output row
        # each kernel column's valid tile columns (the same in every row): kmask[K + KH +
        # KW + kw] and kmask[K + KH + 2*KW + kw]
        cm = K + KH
        for kw in range(KW):
            lo, hi = col_range(iw0 + kw * dw, sw, W, vw)
            kmask[cm + KW + kw] = lo
            kmask[cm + 2 * KW + kw] = hi
        xb = wgeo[WG_OFF] + n * wgeo[WG_SN] + g * Cg * wgeo[WG_SC] + (ih0 // fh) * rs + iw0 // fw
        # the register tile (abi.tiles.CONV_WINDOW_TILES) and the segment length, CH positions
        eight = _window_tile_of(mv, L) == 1
        MR = 8 if eight else 6
        CH = (3 if eight else 4) * L
        mpan = (mv + MR - 1) // MR
        nkb = (K + KC - 1) // KC
        # segments of up to CH positions: across rows when one output row further is vw
        # elements further in the source and in cb (then lane q of a segment is position
        # q0 + q), else within each row
        flat = rstep == vw and crow == vw
        nrow_seg = (vw + CH - 1) // CH
        nseg = (vh * vw + CH - 1) // CH if flat else vh * nrow_seg
        whole = lane_bits(0, CH)        # every lane of a segment set
        for s in range(nseg):
            if flat:
                q0 = s * CH
                ncols = min(CH, vh * vw - q0)
            else:
                r = s // nrow_seg
                j0 = (s - r * nrow_seg) * CH
                q0 = r * vw + j0
                ncols = min(CH, vw - j0)
            r0 = q0 // vw
            bo = xb + r0 * rstep + (q0 - r0 * vw)
            cq = c0 + r0 * crow + (q0 - r0 * vw)
            # the kernel rows' lane masks at kmask[K:], the columns' at kmask[K + KH:]; row
            # k = (c, kh, kw) of B reads the lanes of both
            for kh in range(KH):
                kmask[K + kh] = row_mask(q0, ncols, vw, ih0 + kh * dh, sh, H)
            for kw in range(KW):
                kmask[cm + kw] = col_mask(q0, ncols, vw, kmask[cm + KW + kw],
                                          kmask[cm + 2 * KW + kw])
            # a whole segment with every row's and column's lanes set reads no padding
            inside = ncols == CH
            for kh in range(KH):
                inside = inside and kmask[K + kh] == whole
            for kw in range(KW):
                inside = inside and kmask[cm + kw] == whole
            k = 0
            for c in range(Cg):
                for kh in range(KH):
                    rmask = kmask[K + kh]
                    for kw in range(KW):
                        kmask[k] = rmask & kmask[cm + kw]
                        k += 1
            for kb in range(nkb):
                k0 = kb * KC
                kc = min(KC, K - k0)
                acc = 1 if kb > 0 else 0
                for ir in range(mpan):
                    rows = min(MR, mv - ir * MR)
                    ao = (mg + ir * MR) * K + k0
                    co = cq + ir * MR * ldc
                    if inside and eight:
                        _ukw83f(kc, w, ao, K, 1, rows, src, bo, koff, kmask, k0, ncols, cb, co,
                                ldc, acc)
                    elif inside:
                        _ukw64f(kc, w, ao, K, 1, rows, src, bo, koff, kmask, k0, ncols, cb, co,
                                ldc, acc)
                    elif eight:
                        if ncols > 2 * L:
                            _ukw83(kc, w, ao, K, 1, rows, src, bo, koff, kmask, k0, ncols,
                                   cb, co, ldc, acc)
                        elif ncols > L:
                            _ukw82(kc, w, ao, K, 1, rows, src, bo, koff, kmask, k0, ncols,
                                   cb, co, ldc, acc)
                        else:
                            _ukw81(kc, w, ao, K, 1, rows, src, bo, koff, kmask, k0, ncols,
                                   cb, co, ldc, acc)
                    elif ncols > 3 * L:
                        _ukw64(kc, w, ao, K, 1, rows, src, bo, koff, kmask, k0, ncols, cb,
                               co, ldc, acc)
                    elif ncols > 2 * L:
                        _ukw63(kc, w, ao, K, 1, rows, src, bo, koff, kmask, k0, ncols, cb,
                               co, ldc, acc)
                    elif ncols > L:
                        _ukw62(kc, w, ao, K, 1, rows, src, bo, koff, kmask, k0, ncols, cb,
                               co, ldc, acc)
                    else:
                        _ukw61(kc, w, ao, K, 1, rows, src, bo, koff, kmask, k0, ncols, cb,
                               co, ldc, acc)
    return impl
