"""conv2d tiles that read their input window where it lies (conv_inplace.py): x in place
(unit column and horizontal strides) or a phase-split copy of it (other strides, when each
copied element feeds enough products), the weights in place, masked loads for the padding,
segments within rows or across them, products stored straight into y when nothing follows.

Checked against a float64 reference on random geometries and input layouts, with the
output framed by NaN (nothing outside it written) and the input framed by NaN (nothing
outside it read); the lane masks against brute force; the mode and flat-row decisions of
the driver and the planner; and inputs and outputs that start or end at an unmapped page."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import assume, example, given, settings, strategies as st
from numba import njit

import dynshape
from dynshape.planning import conv as planner
from dynshape_kernels.abi import conv_table as CT
from dynshape_kernels.cpu import conv_inplace as CI
from oracles import out_size, ref_conv

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _input(rng, shape, dt, layout):
    """x of ``shape`` in a layout: C order; a window of a NaN-filled buffer (unit column
    stride: read in place); every other column (column stride 2: copied); columns reversed
    (stride -1: copied). Reading outside x reaches NaN, which must never show."""
    N, C, H, W = shape
    data = rng.standard_normal(shape).astype(dt)
    if layout == "c":
        return data
    big = np.full((N + 1, C + 2, H + 4, 2 * W + 9), np.nan, dt)
    if layout == "framed":
        v = big[1:, 1:C + 1, 2:H + 2, 4:W + 4]
    elif layout == "every_other":
        v = big[1:, 1:C + 1, 2:H + 2, 4:2 * W + 4:2]
    else:
        v = big[1:, 1:C + 1, 2:H + 2, W + 3:3:-1]
    v[...] = data
    return v


@st.composite
def window_cases(draw):
    dt = draw(st.sampled_from([np.float32, np.float64]))
    N, G = draw(st.integers(1, 2)), draw(st.sampled_from([1, 1, 2]))
    Cg = draw(st.integers(1, 6))
    KH, KW = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    Mg = draw(st.one_of(st.integers(1, 20), st.integers(40, 70)))
    H = draw(st.integers(1, 24))
    W = draw(st.sampled_from([1, 5, 13, 16, 17, 31, 33, 63, 64, 65, 70, 129]))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    assume(out_size(H, pads[0], pads[2], KH, sh, dh) >= 1)
    assume(out_size(W, pads[1], pads[3], KW, sw, dw) >= 1)
    layout = draw(st.sampled_from(["c", "framed", "every_other", "reversed"]))
    bias = draw(st.booleans())
    return dt, N, G, Cg, Mg, KH, KW, (sh, sw), (dh, dw), H, W, pads, layout, bias


@settings(max_examples=60, deadline=None)
@example(case=(np.float32, 1, 1, 64, 64, 3, 3, (1, 1), (1, 1), 57, 61, (1, 1, 1, 1), "c",
               False), seed=0)
@example(case=(np.float32, 1, 1, 3, 64, 7, 7, (2, 2), (1, 1), 45, 47, (3, 3, 3, 3), "c",
               False), seed=1)
@example(case=(np.float64, 2, 1, 8, 40, 3, 3, (1, 1), (1, 1), 7, 7, (1, 1, 1, 1), "framed",
               True), seed=2)
@example(case=(np.float32, 1, 2, 5, 30, 3, 2, (3, 1), (2, 1), 17, 9, (1, 0, 2, 1),
               "every_other", False), seed=3)
@example(case=(np.float32, 1, 1, 4, 9, 1, 1, (2, 2), (1, 1), 5, 129, (0, 0, 0, 0), "framed",
               False), seed=4)       # the even column phase alone, split a vector at a time
@example(case=(np.float64, 2, 1, 3, 9, 1, 1, (2, 2), (1, 1), 6, 70, (0, 1, 0, 0), "c",
               True), seed=5)        # the odd column phase alone
@example(case=(np.float32, 1, 1, 5, 15, 3, 3, (1, 1), (1, 1), 9, 33, (1, 0, 1, 2), "framed",
               True), seed=6)        # the 8-row register tile, a 7-row tail, rows in segments
@given(case=window_cases(), seed=st.integers(0, 2**31))
def test_window_tiles_match_the_reference(case, seed):
    """Both window modes (in place; a phase-split copy, of the phases the taps read, for any
    stride and layout), segments within rows and across them (W == OW, ceil(W/sw) == OW),
    every lane tail, one and several K blocks, channel tails, groups, with and without a
    bias (the product stored straight into y, or through the epilogue); y written only
    inside its NaN frame."""
    dt, N, G, Cg, Mg, KH, KW, strides, dil, H, W, pads, layout, bias = case
    rng = np.random.default_rng(seed)
    x = _input(rng, (N, G * Cg, H, W), dt, layout)
    w = rng.standard_normal((G * Mg, Cg, KH, KW)).astype(dt)
    b = rng.standard_normal(G * Mg).astype(dt) if bias else None
    OH = out_size(H, pads[0], pads[2], KH, strides[0], dil[0])
    OW = out_size(W, pads[1], pads[3], KW, strides[1], dil[1])
    frame = np.full((N, G * Mg + 2, OH + 2, OW + 3), np.nan, dt)
    out = frame[:, 1:-1, 1:-1, 1:-2]
    args = (x, w) if b is None else (x, w, b)
    dynshape.run("conv2d", *args, out=out, strides=strides, pads=pads, dilations=dil, group=G)
    kw = dict(strides=strides, pads=pads, dilations=dil, group=G)
    ref = ref_conv(x, w, b, **kw)
    scale = ref_conv(np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)),
                     None if b is None else np.abs(b.astype(np.float64)), **kw)
    tol = 4 * np.sqrt(Cg * KH * KW + 1) * np.finfo(dt).eps * scale + 1e-30
    assert (np.abs(out - ref) <= tol).all(), float(np.max(np.abs(out - ref) - tol))
    inner = np.zeros(frame.shape, bool)
    inner[:, 1:-1, 1:-1, 1:-2] = True
    assert np.isnan(frame[~inner]).all(), "written outside the output"


@pytest.mark.parametrize("mv, lanes, tile", [
    (64, 16, 1), (128, 16, 1), (16, 16, 1), (15, 16, 1), (32, 16, 1),   # 8 rows pad fewer
    (24, 16, 0), (48, 16, 0), (20, 16, 0), (6, 16, 0), (1, 16, 0),      # no fewer: 6 rows
    (64, 8, 0), (16, 8, 0)])                                            # float64: 6 rows
def test_window_register_tile_pads_the_fewest_channels(mv, lanes, tile):
    """The kernels and the planner take the same register tile: 8 x 3 vectors for float32
    tiles whose channels it pads less than 6 x 4 does, else 6 x 4 (scalars and arrays)."""
    from dynshape_kernels.abi.tiles import CONV_WINDOW_TILES, conv_window_tile
    assert conv_window_tile(mv, lanes) == tile
    assert njit(conv_window_tile)(mv, lanes) == tile
    assert conv_window_tile(np.array([mv, mv]), lanes).tolist() == [tile, tile]
    rows = CONV_WINDOW_TILES[tile][0]
    other = CONV_WINDOW_TILES[1 - tile][0]
    if lanes == 16:
        assert -(-mv // rows) * rows <= -(-mv // other) * other


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("sa, sb, sc", [(1, 1, 1), (1, 1952, 1708), (4609, 6144, 33), (1, 1, 4096)])
def test_thread_workspaces_are_whole_pages_of_aligned_buffers(dt, sa, sb, sc):
    """One allocation holds every thread's workspace: each thread's part is whole pages, and
    its three buffers, 64-byte aligned, fit in it without overlapping."""
    from dynshape_kernels.cpu import conv as C
    proto = np.empty(0, dt)
    span = C.workspace_span.py_func(sa, sb, sc, proto)
    line = 64 // proto.itemsize
    assert span * proto.itemsize % C.WS_PAGE == 0
    ends = np.cumsum([-(-n // line) * line for n in (sa, sb, sc)])
    assert ends[-1] <= span and ends[-1] + C.WS_PAGE // proto.itemsize > span


def test_lane_bits():
    lane_bits = CI.lane_bits.py_func
    assert lane_bits(0, 0) == 0 and lane_bits(3, 3) == 0 and lane_bits(5, 2) == 0
    assert lane_bits(0, 64) == -1 and lane_bits(0, 63) == (1 << 63) - 1
    assert lane_bits(2, 5) == 0b11100 and lane_bits(-4, 2) == 0b11 and lane_bits(60, 70) == -(1 << 60)


@settings(max_examples=200, deadline=None)
@given(vw=st.integers(1, 70), q0=st.integers(0, 200), ncols=st.integers(1, 64),
       ihb=st.integers(-6, 10), sh=st.integers(1, 3), H=st.integers(1, 12),
       iwb=st.integers(-6, 10), sw=st.integers(1, 3), W=st.integers(1, 80))
def test_tap_mask_is_the_set_of_lanes_inside_the_input(vw, q0, ncols, ihb, sh, H, iwb, sw, W):
    """Bit q of a tap's mask over positions q0 .. q0+ncols (row-major in a tile vw wide), its
    kernel row's mask and its kernel column's, is set exactly when the input element that position reads at that tap is inside x."""
    col_range = CI.col_range.py_func
    lo, hi = col_range(iwb, sw, W, vw)
    got = (CI.row_mask.py_func(q0, ncols, vw, ihb, sh, H)
           & CI.col_mask.py_func(q0, ncols, vw, lo, hi))
    want = 0
    for lane in range(ncols):
        r, j = divmod(q0 + lane, vw)
        if 0 <= ihb + r * sh < H and 0 <= iwb + j * sw < W:
            want |= 1 << lane
    assert int(got) & ((1 << 64) - 1) == want


@njit
def _mode(x, common):
    return CI.window_mode(x, common)


@pytest.mark.parametrize("dt, xsw, sh, sw, mode", [
    (np.float32, 1, 1, 1, CI.IN_PLACE),
    (np.float64, 1, 2, 1, CI.IN_PLACE),     # vertical stride: rows in place
    (np.float32, 2, 1, 1, CI.COPIED),       # a strided input is copied
    (np.float32, 1, 2, 2, CI.COPIED),
    (np.float64, -1, 1, 1, CI.COPIED),
    (np.float16, 1, 1, 1, CI.PACKED),       # half precision: widened by packing
])
def test_window_mode(dt, xsw, sh, sw, mode):
    common = np.zeros(CT.CV_SIZE, np.int64)
    common[[CT.CV_XSW, CT.CV_SH, CT.CV_SW]] = (xsw, sh, sw)
    x = np.zeros(4, np.uint16 if dt == np.float16 else dt)     # float16's carrier: uint16
    assert _mode(x, common) == mode
    assert planner.reads_window_in_place({}, np.dtype(dt).name) == (mode != CI.PACKED)


@pytest.mark.parametrize("r, f, taps, d, used", [
    (0, 1, 3, 1, 0b1), (0, 2, 1, 1, 0b1), (1, 2, 1, 1, 0b10), (1, 2, 3, 1, 0b11),
    (0, 2, 3, 2, 0b1), (2, 4, 2, 2, 0b101), (1, 3, 2, 1, 0b110), (0, 70, 1, 1, -1)])
def test_phase_used(r, f, taps, d, used):
    """The phases a copy holds: those some tap reads (1x1/2: one of four; 3x3/2: all)."""
    assert CI.phase_used.py_func(r, f, taps, d) == used


def test_flat_rows_and_the_tiles_they_favour():
    """Segments run across rows when one output row further is exactly one tile row of
    source elements further; the planner then prices positions padded per tile, not per
    row, and takes whole-width tiles for small outputs."""
    assert planner.flat_rows(dict(sh=1, sw=1, W=28, OW=28))
    assert not planner.flat_rows(dict(sh=1, sw=1, W=28, OW=30))       # pads wider than k-1
    assert planner.flat_rows(dict(sh=2, sw=2, W=56, OW=28))           # ceil(56/2) == 28
    assert not planner.flat_rows(dict(sh=2, sw=1, W=56, OW=56))       # rows skip in place
    def cost(mv, flat):
        return planner._tile_cost(0, "float32", 576, np.array([mv]), np.array([7]),
                                  np.array([7]), True, np.array([flat]))[0]
    # 49 positions in 64 lanes, not 7 x 16: one 4-vector segment (6-row register tile, 48
    # channels), or a 3-vector and a 1-vector one (8-row register tile, 64 channels)
    assert cost(48, True) < cost(48, False) / 2
    assert cost(64, True) < cost(64, False) * 0.6
    t = dynshape.explain("conv2d", (1, 64, 14, 14), (128, 64, 3, 3), pads=1)
    assert {int(r[CT.T_VW]) for r in t.entries} == {14}


_GUARD = textwrap.dedent("""
    import ctypes, mmap
    import numpy as np
    import dynshape
    from oracles import ref_conv
    PAGE = mmap.PAGESIZE
    libc = ctypes.CDLL(None, use_errno=True)
    keep = []

    def on_page(shape, dt, at_end):
        # an array that ends a readable page (the next one unmapped) or starts one (the
        # previous one unmapped)
        m = mmap.mmap(-1, 3 * PAGE)
        base = np.frombuffer(m, np.uint8).ctypes.data
        for p in (0, 2):
            assert libc.mprotect(ctypes.c_void_p(base + p * PAGE), PAGE, 0) == 0
        n = int(np.prod(shape)) * np.dtype(dt).itemsize
        assert n <= PAGE
        off = 2 * PAGE - n if at_end else PAGE
        keep.append(m)
        return np.frombuffer(m, dt, count=int(np.prod(shape)), offset=off).reshape(shape)

    rng = np.random.default_rng(0)
    cases = [  # x shape, M, kernel, strides, pads: in place (flat, per row), copied (flat)
        (np.float32, (1, 2, 7, 61), 8, (3, 3), (1, 1), (1, 1, 1, 1)),
        (np.float32, (1, 3, 9, 20), 8, (3, 3), (1, 1), (2, 2, 2, 2)),
        (np.float64, (1, 2, 7, 13), 6, (3, 2), (1, 1), (0, 1, 1, 0)),
        (np.float32, (1, 2, 11, 30), 64, (3, 3), (2, 2), (1, 1, 1, 1)),
        # stride 2 over rows that split a vector at a time: the last load ends at x's end
        (np.float32, (1, 2, 9, 32), 8, (3, 3), (2, 2), (1, 1, 1, 1)),
        (np.float64, (1, 1, 8, 17), 6, (3, 3), (2, 2), (1, 1, 1, 1)),
    ]
    for dt, xshape, M, (KH, KW), strides, pads in cases:
        for at_end in (True, False):
            x = on_page(xshape, dt, at_end)
            x[...] = rng.standard_normal(xshape)
            w = rng.standard_normal((M, xshape[1], KH, KW)).astype(dt)
            ref = ref_conv(x, w, strides=strides, pads=pads)
            out = on_page(ref.shape, dt, at_end) if ref.nbytes <= PAGE else None
            y = dynshape.run("conv2d", x, w, out=out, strides=strides, pads=pads)
            np.testing.assert_allclose(y, ref, rtol=0, atol=1e-3)
    print("ok")
""")


def test_windows_read_nothing_outside_the_input():
    """x starts or ends a readable page with the neighbouring page unmapped, the output too
    where it fits a page: a load of a padding lane that is not masked (left or right of x,
    above or below it), or a store past the output's last element, would kill the process
    (run in a child process for a clean report)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
        + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    r = subprocess.run([sys.executable, "-c", _GUARD], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stderr[-2000:])
