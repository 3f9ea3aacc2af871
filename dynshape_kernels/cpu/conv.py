"""conv2d (NCHW, groups, strides, dilations, padding) from static micro-kernels: the driver.

Static kernels of family "conv" (op ``conv2d``), by slot; a tile is (output channels of one
group, output positions), see ``CONV_TILES``:

* slot 0, 1 -- implicit GEMM per group, ``C[m, p] = sum_k W[m, k] * X_col[k, p]`` with
  K = Cg*KH*KW, two ways (``conv_inplace.window_mode``, the same for every tile of a call):
  - window tiles (float32 and float64): the weights and the input window read where they
    lie, in x itself (unit horizontal stride) or in a copy of x split into phases by the
    strides, made once per call, by the window form of the in-place micro-kernels (6 rows
    x 1-4 vectors or 8 rows x 1-3, ``abi.tiles.CONV_WINDOW_TILES``, masked loads for the
    padding), see ``conv_inplace``; a plain product
    (no bias, residual, activation or step program) is stored straight into y.
  - packed tiles (half precision, widened to float32 as it is packed; compiled only for
    the half-precision drivers): the
    register-blocked micro-kernels of ``gemm.py`` (slot 0: MR x NR = 6 x 4 vectors, slot
    1: 6 x 3 vectors; MR, NR, KC from ``gemm.SLOTS_F32/F64``), A (the weights, every K
    block) packed by ``gemm.pack_a`` once per thread for its consecutive tiles of one group
    and channel block, B packed from the tile's input window by ``conv_window.pack_window``
    (no im2col copy of the input; padding is zero-filled, never read); M and position
    tails are computed on zero-padded micro-panels and discarded.
  K is walked inside the tile in balanced KC blocks (``gemm._kc_block``) whose last block
  is shorter (variable range): K is never tiled by the table, never overlapped.
* slot 2 -- the direct kernel of ``conv_direct`` (groups with few output channels or a very
  short K, e.g. depthwise), vectorized along the output width.

Every slot runs every geometry; the planner (``dynshape.runtime.conv``) picks one per table
by a cost model. ``conv_driver`` runs a whole parameter table (layout in ``conv_layout``) in
ONE call: ``prange`` over threads, entries dealt out in contiguous ranges balanced by their
work (tiles that read a phase-split copy, which each thread makes of its own tiles' rows,
direct tiles, several images) or cyclically (``conv_deal``), each thread with its own packed
buffers; every entry ends in the epilogue slot
(``conv_epilogue``: bias, residual, activation, then the step program of a fused sequence,
if any, over the whole tile). It is compiled once per dtype (``drivers.get("conv", dtype)``).
The packed and direct tile functions are inlined into ``_thread_entries`` at Numba's IR
level, which spares one round of optimizing and generating the whole call tree (see
``fused``'s note on compile time); the window tile is one called function for both of its
sources (x and its copy, by address). Calls made per tile, channel or segment go to
functions compiled without reference counting (``_nrt=False``) or are written out: both
threads increment and decrement the shared arrays' counts atomically on every such call,
and on 3->64 7x7/2 that contention was 13-20% of the time.

Accuracy: each output is a sum of K products accumulated in the input dtype (float32 FMAs
in float32, blocked by KC and by vector lanes; float16 / bfloat16 operands are widened to
float32 as they are packed, accumulated in float32 and rounded once to the format when
stored); the error is bounded by about
``K * eps * sum|x||w|`` and in practice far below it: tests hold float32 results to
``1e-4 * sum|x||w|`` (+ |bias| + |residual|) and float64 to ``1e-12`` of that scale.
"""
import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from ..abi.tiles import CONV_DIRECT_SLOT, CONV_TILES
from ..abi.vocabulary import CONV_OPS  # noqa: F401
from .callee import callee
from .conv_deal import (D_ROW0, D_ROW1, D_SIZE, D_START, D_STEP, D_STOP, clip, deal,
                        deals_ranges)
from .conv_direct import direct_sizes, direct_tile
from .conv_inplace import (COPIED, IN_PLACE, PACKED, WG_SIZE, phase_split, window_mode,
                           window_offsets, window_source, window_tile)
from .conv_epilogue import finish_channel, prepare_channel, store_channel, tile_steps
from ..abi.conv_table import (CV_BOFF, CV_BS, CV_CG, CV_DH, CV_DW, CV_H, CV_HASB, CV_HASR,
                          CV_IDBASE, CV_KH, CV_KW, CV_MG, CV_N, CV_NTH, CV_OH, CV_OW,
                          CV_ROFF, CV_RSC, CV_RSH, CV_RSN, CV_RSW, CV_SH, CV_SW, CV_W,
                          CV_XOFF, CV_XSC, CV_XSH, CV_XSN, CV_XSW, CV_YOFF, CV_YSC, CV_YSH,
                          CV_YSN, CV_YSW, CV_G, CV_ACT, T_G, T_IH0, T_IW0, T_KID, T_M0, T_MV,
                          T_N, T_OH0, T_OW0, T_VH, T_VW)
from .conv_window import pack_window
from .gemm_operands import _slot_cfg_stub, _uk0, _uk1
from .gemm_pack import _aligned_empty, _kc_block, pack_a
from .gemm_ukernel import load_at
from .half import compute_empty, is_half, load
from .scalar_ops import IDENTITY, cast_like
from ..abi.storage import carrier, compute
from ..catalog import CATALOG
from .steps import MAX_SIDES
from .step_link import STEPS
from .address_link import Link
from .borrowed import borrowed
from .serial_zeros import zeros
from .workspace import LINE, round_up

#: the threads' workspaces are one allocation made by the driver (``workspace``), each
#: thread's part a whole number of these bytes
WS_PAGE = 4096
#: dtypes of the conv driver (and of its per-thread function's link)
DTYPES = CATALOG.families["conv"].dtypes

#: (max output channels, max output positions, unused) per slot, for every dtype
N_SLOTS = len(CONV_TILES)
DIRECT_SLOT = CONV_DIRECT_SLOT


@callee(cache=True)
def _ukernel(slot, y):
    """(MR, NR, KC cap) of a GEMM slot's micro-kernel for y's dtype."""
    cfg = _slot_cfg_stub(y)[slot]
    return cfg[0], cfg[1], cfg[4]


@callee(cache=True)
def _uk(slot, kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, acc):
    if slot == 0:
        _uk0(kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, acc)
    else:
        _uk1(kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, acc)


def packed_product(slot, x, w, common, n, g, mg, mv, vh, vw, ih0, iw0, ws_a, a_state, ws_b,
                   ws_c, ldc):
    """Half precision only (float32 and float64 tiles read their window, ``conv_inplace``;
    a no-op for them, so that their drivers compile none of the packing): ``_packed``."""


@overload(packed_product, inline="always")
def _packed_product(slot, x, w, common, n, g, mg, mv, vh, vw, ih0, iw0, ws_a, a_state, ws_b,
                    ws_c, ldc):
    if not is_half(x.dtype):
        return (lambda slot, x, w, common, n, g, mg, mv, vh, vw, ih0, iw0, ws_a, a_state, ws_b,
                ws_c, ldc: None)
    return _packed


def _packed(slot, x, w, common, n, g, mg, mv, vh, vw, ih0, iw0, ws_a, a_state, ws_b, ws_c, ldc):
    """The product of one implicit-GEMM tile (output channels ``mg .. mg+mv`` of group g
    at the ``vh x vw`` positions of image n whose tap (0, 0) input is (ih0, iw0)), all of
    K, with packed operands, into ``ws_c``: ``ceil(mv/MR)*MR`` accumulator rows of pitch
    ``ldc >= ceil(vh*vw/NR)*NR``. ``ws_b`` holds the packed K block of B; ``ws_a`` the
    packed A (the weights), by ``a_state``: 0 -- each K block packed at 0 (it stays in
    cache); 1 -- every K block packed in its own place (block kb at ``kb * ceil(mv/MR)*MR *
    KC``) for the thread's next tile of the same group and channel block; 2 -- already there
    (kept by the previous tile)."""
    KH = common[CV_KH]
    KW = common[CV_KW]
    Cg = common[CV_CG]
    K = Cg * KH * KW
    MR, NR, KCmax = _ukernel(slot, ws_c)
    KC = _kc_block(K, KCmax, np.int64(1))
    nv = vh * vw
    mpan = (mv + MR - 1) // MR
    npan = (nv + NR - 1) // NR
    nkb = (K + KC - 1) // KC
    xb = common[CV_XOFF] + n * common[CV_XSN] + g * Cg * common[CV_XSC]
    if K == 0:
        for i in range(mv * ldc):
            ws_c[i] = 0
    for kb in range(nkb):
        k0 = kb * KC
        kc = min(KC, K - k0)
        abase = kb * mpan * MR * KC if a_state > 0 else 0
        if a_state < 2:
            pack_a(w, mg * K + k0, K, 1, mv, kc, MR, ws_a[abase:])
        pack_window(x, xb, common[CV_XSC], common[CV_XSH], common[CV_XSW], common[CV_H],
                    common[CV_W], ih0, iw0, common[CV_SH], common[CV_SW], common[CV_DH],
                    common[CV_DW], KH, KW, k0, kc, vh, vw, NR, ws_b)
        acc = 1 if kb > 0 else 0
        for jr in range(npan):
            for ir in range(mpan):
                _uk(slot, kc, ws_a, abase + ir * MR * kc, ws_b, jr * NR * kc, NR,
                    ws_c, ir * MR * ldc + jr * NR, ldc, acc)


@njit(inline="always")
def gemm_epilogue(b, res, y, common, n, mg, mv, oh0, vh, ow0, vw, ws_c, ldc, code, a0, a1,
                  prog, pattrs, sides, cgeo, lgeo):
    """The epilogue of an implicit-GEMM tile whose products are in ``ws_c`` (rows of pitch
    ``ldc``, position ``r*vw + j``): bias, residual and activation per channel, then the
    step program of a fused sequence over the tile, and the stores into y."""
    has_b = common[CV_HASB] != 0
    has_r = common[CV_HASR] != 0
    zero = ws_c.dtype.type(0)
    steps = prog.shape[0] > 0
    for i in range(mv):
        m = mg + i
        bval = load(load_at(b, common[CV_BOFF] + m * common[CV_BS])) if has_b else zero
        yo = (common[CV_YOFF] + n * common[CV_YSN] + m * common[CV_YSC]
              + oh0 * common[CV_YSH] + ow0 * common[CV_YSW])
        ro = (common[CV_ROFF] + n * common[CV_RSN] + m * common[CV_RSC]
              + oh0 * common[CV_RSH] + ow0 * common[CV_RSW])
        if steps:
            prepare_channel(ws_c, i * ldc, vh, vw, vw, has_b, bval, has_r, res, ro,
                            common[CV_RSH], common[CV_RSW], code, a0, a1)
        else:
            finish_channel(ws_c, i * ldc, vh, vw, vw, y, yo, common[CV_YSH], common[CV_YSW],
                           has_b, bval, has_r, res, ro, common[CV_RSH], common[CV_RSW], code,
                           a0, a1)
    if steps:       # the fused sequence's program over the whole tile, then the stores
        tile_steps(y, ws_c, 0, ldc, mv, vh, vw, vw, prog, pattrs, sides, cgeo, lgeo, n, mg, oh0,
                   ow0)
        for i in range(mv):
            yo = (common[CV_YOFF] + n * common[CV_YSN] + (mg + i) * common[CV_YSC]
                  + oh0 * common[CV_YSH] + ow0 * common[CV_YSW])
            store_channel(ws_c, i * ldc, vh, vw, vw, y, yo, common[CV_YSH], common[CV_YSW])


def product_buffer(y, ws_c, direct):
    """Where window tiles put their products: y itself when ``direct``, else the
    accumulator rows ``ws_c`` (always, when y is a half-precision carrier: its tiles are
    packed and never direct)."""


@overload(product_buffer)
def _product_buffer(y, ws_c, direct):
    if y.dtype != ws_c.dtype:
        return lambda y, ws_c, direct: ws_c
    return lambda y, ws_c, direct: y if direct else ws_c


def conv_driver(x, w, b, res, y, common, entries, fattrs, prog, pattrs, sides, cgeo):
    """Run every entry of a conv2d parameter table (one call per operator).

    For each entry (layout in ``conv_layout``), with its counts clipped to the real shape,
    and every channel m of the tile, position (oh, ow) of it::

        y[n, m, oh, ow] = act(sum_{c, kh, kw} w[m, c, kh, kw]
                              * x[n, g*CG + c, ih0 + (oh-oh0)*SH + kh*DH,
                                               iw0 + (ow-ow0)*SW + kw*DW]
                              + bias[m] + residual[n, m, oh, ow])

    where input elements outside ``0 <= ih < H, 0 <= iw < W`` count as zero (padding) and
    are never read. Buffers are 1-D arrays of one float dtype addressed through ``common``;
    y must not overlap x, w or the bias; the residual is y itself (same offsets and
    strides) or disjoint from it. ``fattrs`` = the activation's two attributes.
    Entries must not write an output element twice (the runtime's tables do not).

    Epilogue program (fused sequences led by a conv2d): after the activation, the step
    program ``prog`` (``steps.apply_steps``, attributes ``pattrs``) runs on every output
    channel of every tile before it is stored; side input s (``sides[s]``, a 1-D array of
    y's dtype; unused ones are dummies) is read at ``cgeo[s] = (offset, n stride, channel
    stride, row stride, column stride)``, see ``conv_epilogue``. Sides must not overlap y and
    every index they are read at must be in bounds (the runtime checks shapes). An empty
    ``prog`` (shape (0, 4)) is the plain conv2d.
    """
    x, w, b, res, y, common, entries, fattrs, prog, pattrs, sides, cgeo = borrowed(
        (x, w, b, res, y, common, entries, fattrs, prog, pattrs, sides, cgeo))
    ne = entries.shape[0]
    nth = max(1, min(common[CV_NTH], ne))
    K = common[CV_CG] * common[CV_KH] * common[CV_KW]
    base = common[CV_IDBASE]
    code = common[CV_ACT]
    a0 = cast_like(y, fattrs[0])
    a1 = cast_like(y, fattrs[1])
    proto = compute_empty(y, 0)     # the workspaces' dtype (float32 for half precision)
    # the input window's source for GEMM tiles (conv_inplace): x itself, or its phase-split
    # copy (made below, in parallel), or nothing (packed per tile)
    mode = window_mode(x, common)
    # per-thread workspace for the largest tile of the table (not of the slot)
    # sizes typed int64 from the start: a literal 1 would make type inference compile the
    # callees once more for Literal[int] arguments (seconds of first-use compile each)
    sa = np.int64(1)
    sb = np.int64(1)
    sc = np.int64(1)
    ldc = np.int64(1)
    rows = np.int64(1)
    gemm_tiles = False
    for t in range(ne):
        slot = entries[t, T_KID] - base
        if slot == DIRECT_SLOT:
            _, _, _, zb, zc = direct_sizes(entries[t, T_VH], entries[t, T_VW],
                                           entries[t, T_MV], common[CV_KH], common[CV_KW],
                                           common[CV_SH], common[CV_SW], common[CV_DH],
                                           common[CV_DW])
            sb = max(sb, zb)
            sc = max(sc, zc)
        else:
            MR, NR, KCmax = _ukernel(slot, proto)
            KC = _kc_block(K, KCmax, np.int64(1))
            mp = (entries[t, T_MV] + MR - 1) // MR * MR
            npos = (entries[t, T_VH] * entries[t, T_VW] + NR - 1) // NR * NR
            if mode == PACKED:      # window tiles pack nothing
                sa = max(sa, mp * KC * ((K + KC - 1) // KC))     # A of every K block
                sb = max(sb, npos * KC)
            ldc = max(ldc, npos)
            rows = max(rows, mp)
            gemm_tiles = True
    sc = max(sc, rows * ldc)
    ws = _aligned_empty(nth * workspace_span(sa, sb, sc, proto), proto)
    if not gemm_tiles:      # direct tiles only (depthwise): no window, so no input copy
        mode = PACKED
    wgeo = zeros(np.int64(WG_SIZE), np.int64)   # (np.zeros: a parallel loop, see serial_zeros)
    size = 0
    if mode != PACKED and ne > 0:
        size = window_source(mode, common, entries[0, T_IH0], entries[0, T_IW0], wgeo)
    xs = np.empty(size, proto.dtype)
    copied = mode == COPIED
    # each thread's entries and rows of the copy (conv_deal): contiguous ranges for tiles
    # that read a phase-split copy, for direct tiles and for several images; else cyclic
    bounds = np.empty((nth, D_SIZE), np.int64)
    deal(common, entries, deals_ranges(copied, gemm_tiles, common[CV_N]), nth, bounds)
    if nth == 1:    # small problems (the planner's choice): no thread-pool launch
        if copied:
            phase_split(x, common, wgeo, xs, bounds[0, D_ROW0], bounds[0, D_ROW1])
        thread_entries((np.int64(0), x, w, b, res, y, common, entries, bounds, sa, sb, sc,
                        ldc, code, a0, a1, prog, pattrs, sides, cgeo, mode, xs, wgeo, ws))
    else:
        # ONE parallel loop, launched for the phase-split copy (one call per thread: a call
        # per row would contend for reference counts), then for the entries: each prange
        # adds its body's function and two wrappers to the first compile (conv float32,
        # fresh caches: a second prange cost 1.5 s of 18.6)
        for stage in range(0 if copied else 1, 2):
            for th in prange(nth):
                if stage == 0:
                    phase_split(x, common, wgeo, xs, bounds[th, D_ROW0], bounds[th, D_ROW1])
                else:
                    thread_entries((th, x, w, b, res, y, common, entries, bounds, sa, sb, sc,
                                    ldc, code, a0, a1, prog, pattrs, sides, cgeo, mode, xs,
                                    wgeo, ws))


@callee(cache=True)
def workspace_span(sa, sb, sc, proto):
    """Elements of one thread's part of the workspace: its ``sa``, ``sb`` and ``sc`` element
    buffers each 64-byte aligned, the part rounded up to whole pages (``WS_PAGE``)."""
    line = LINE // proto.itemsize
    n = round_up(sa, line) + round_up(sb, line) + round_up(sc, line)
    return round_up(n, WS_PAGE // proto.itemsize)


@callee(cache=True, error_model="numpy")
def _thread_entries(th, x, w, b, res, y, common, entries, bounds, sa, sb, sc, ldc, code, a0,
                    a1, prog, pattrs, sides, cgeo, mode, xs, wgeo, ws):
    """The entries ``bounds[th]`` deals this thread (``conv_deal``), with its part of the
    workspace ``ws`` (``workspace_span`` elements each); GEMM tiles reach their window by
    ``mode`` (``window_mode``): x in place or its copy ``xs`` through ``wgeo``, or
    packed."""
    nth = bounds.shape[0]
    line = LINE // ws.itemsize
    o = th * (ws.shape[0] // nth)
    ob = o + round_up(sa, line)
    oc = ob + round_up(sb, line)
    ws_a = ws[o:o + sa]
    ws_b = ws[ob:ob + sb]
    ws_c = ws[oc:oc + sc]
    lgeo = np.zeros((MAX_SIDES, 4), np.int64)
    khw = common[CV_KH] * common[CV_KW]
    K = common[CV_CG] * khw
    windowed = mode != PACKED
    # the window's source by address: one compiled window tile for x and for its copy (x
    # and xs stay referenced by this frame for the whole call)
    src = x.ctypes.data if mode == IN_PLACE else xs.ctypes.data
    # nothing between the product and y: no bias, residual, activation or step program,
    # unit column stride (the window kernels' stores are contiguous per row)
    plain = (common[CV_HASB] == 0 and common[CV_HASR] == 0 and code == IDENTITY
             and prog.shape[0] == 0 and common[CV_YSW] == 1)
    koff = np.empty(K if windowed else 0, np.int64)
    kmask = np.empty(K + common[CV_KH] + 3 * common[CV_KW] if windowed else 0, np.int64)
    if windowed:
        window_offsets(wgeo, common, koff)
    base = common[CV_IDBASE]
    N = common[CV_N]
    Mg = common[CV_MG]
    G = common[CV_G]
    OH = common[CV_OH]
    OW = common[CV_OW]
    # the slot, group and channel block whose weights ws_a keeps (packed once for consecutive
    # tiles of this thread that share them: all its tiles when there is one channel block)
    a_kept = False
    a_slot = np.int64(-1)
    a_g = np.int64(-1)
    a_m0 = np.int64(-1)
    a_mv = np.int64(-1)
    last = bounds[th, D_STOP]
    step = bounds[th, D_STEP]
    for t in range(bounds[th, D_START], last, step):
        n = entries[t, T_N]
        g = entries[t, T_G]
        m0 = entries[t, T_M0]
        oh0 = entries[t, T_OH0]
        ow0 = entries[t, T_OW0]
        mv = clip(m0, entries[t, T_MV], Mg)
        vh = clip(oh0, entries[t, T_VH], OH)
        vw = clip(ow0, entries[t, T_VW], OW)
        if n < 0 or n >= N or g < 0 or g >= G or mv == 0 or vh == 0 or vw == 0:
            continue
        slot = entries[t, T_KID] - base
        if slot == DIRECT_SLOT:
            direct_tile(x, w, b, res, y, common, n, g, m0, mv, oh0, vh, ow0, vw,
                        entries[t, T_IH0], entries[t, T_IW0], ws_b, ws_c, code, a0, a1,
                        prog, pattrs, sides, cgeo, lgeo)
        else:
            mg = g * Mg + m0            # the tile's first output channel
            direct = False
            if windowed:
                _, _, KCmax = _ukernel(slot, ws_c)
                KC = _kc_block(K, KCmax, np.int64(1))
                # a plain product goes straight into y (no epilogue pass)
                direct = plain and K > 0
                cb = product_buffer(y, ws_c, direct)
                if direct:
                    c0 = (common[CV_YOFF] + n * common[CV_YSN] + mg * common[CV_YSC]
                          + oh0 * common[CV_YSH] + ow0)
                    cl = common[CV_YSC]
                    crow = common[CV_YSH]
                else:
                    c0 = 0
                    cl = ldc
                    crow = vw
                if K == 0:      # no input channels: the epilogue adds the bias to zeros
                    for i in range(mv * ldc):
                        ws_c[i] = 0
                else:
                    window_tile(src, wgeo, w, common, n, g, mg, mv, vh, vw, entries[t, T_IH0],
                                entries[t, T_IW0], KC, koff, kmask, cb, c0, cl, crow)
                keep = False
            else:
                same = a_kept and slot == a_slot and g == a_g and m0 == a_m0 and mv == a_mv
                nx = t + step
                keep = same or (nx < last and entries[nx, T_KID] - base == slot
                                and entries[nx, T_G] == g and entries[nx, T_M0] == m0
                                and clip(m0, entries[nx, T_MV], Mg) == mv)
                a_state = np.int64(2 if same else (1 if keep else 0))
                packed_product(slot, x, w, common, n, g, mg, mv, vh, vw, entries[t, T_IH0],
                               entries[t, T_IW0], ws_a, a_state, ws_b, ws_c, ldc)
            if not direct:
                gemm_epilogue(b, res, y, common, n, mg, mv, oh0, vh, ow0, vw, ws_c, ldc, code,
                              a0, a1, prog, pattrs, sides, cgeo, lgeo)
            a_kept = keep
            a_slot = slot
            a_g = g
            a_m0 = m0
            a_mv = mv


def thread_signature(dtype):
    """The argument types of ``_thread_entries`` for the driver of ``dtype``."""
    ro = types.Array(getattr(types, carrier(dtype)), 1, "C", readonly=True)
    rw = types.Array(getattr(types, carrier(dtype)), 1, "C")
    c = getattr(types, compute(dtype))
    i64 = types.int64
    tab = types.Array(types.int64, 2, "C", readonly=True)
    return (i64, ro, ro, ro, ro, rw, types.Array(types.int64, 1, "C", readonly=True), tab,
            types.Array(types.int64, 2, "C"), i64, i64, i64, i64, i64, c, c, tab,
            types.Array(c, 1, "C", readonly=True),
            types.UniTuple(ro, MAX_SIDES), tab, i64, types.Array(c, 1, "C"),
            types.Array(types.int64, 1, "C"), types.Array(c, 1, "C"))


#: ``_thread_entries`` reached by address (``address_link``): the driver's prange body holds
#: a call, so its four levels (parfor body, two wrappers, driver) do not optimize and
#: generate the tiles' code again
THREADS = Link("conv.thread_entries", lambda: _thread_entries, thread_signature, DTYPES)
#: functions the driver reaches by address: drivers.get fills their slots first
#: the per-thread function, filled before the driver loads; the step interpreter runs only a
#: fused sequence's epilogue, so a plain conv2d loads (or compiles) without it
LINKS = (THREADS,)
ON_DEMAND = (STEPS,)
thread_entries = THREADS.call


def signature(dtype):
    ro = types.Array(getattr(types, carrier(dtype)), 1, "C", readonly=True)
    rw = types.Array(getattr(types, carrier(dtype)), 1, "C")
    tab = types.Array(types.int64, 2, "C", readonly=True)
    return (ro, ro, ro, ro, rw, types.Array(types.int64, 1, "C", readonly=True), tab,
            types.Array(types.float64, 1, "C", readonly=True),
            tab, types.Array(getattr(types, compute(dtype)), 1, "C", readonly=True),
            types.UniTuple(ro, MAX_SIDES), tab)
