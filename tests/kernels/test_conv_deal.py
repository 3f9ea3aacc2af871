"""How the conv driver deals entries and the input's phase-split copy to its threads
(``conv_deal``): contiguous ranges balanced by work or cyclically, as the planner prices
them; the copy's rows split so that each thread copies the rows its own first tile starts
at; a copy made in any pieces equal to the copy made at once; and a two-thread strided conv
right."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numba import njit

import dynshape
from dynshape.planning import conv as planner
from dynshape.planning.makespan import balanced_threads, makespan
from dynshape_kernels.abi import conv_table as CT
from dynshape_kernels.cpu import conv_deal as CD
from dynshape_kernels.cpu import conv_inplace as CI
from oracles import ref_conv


@st.composite
def tables(draw):
    """A common area's sizes and entries, some past the shape (a bucket's table)."""
    N, G, Mg = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 70))
    OH, OW, H = draw(st.integers(1, 40)), draw(st.integers(1, 40)), draw(st.integers(1, 90))
    common = np.zeros(CT.CV_SIZE, np.int64)
    common[[CT.CV_N, CT.CV_G, CT.CV_MG, CT.CV_OH, CT.CV_OW, CT.CV_H]] = (N, G, Mg, OH, OW, H)
    ne = draw(st.integers(0, 40))
    e = np.zeros((ne, CT.T_NCOL), np.int64)
    for t in range(ne):
        e[t, CT.T_N] = draw(st.integers(0, N))           # N: past the batch
        e[t, CT.T_G] = draw(st.integers(0, G - 1))
        e[t, CT.T_M0] = draw(st.integers(0, Mg + 4))
        e[t, CT.T_MV] = draw(st.integers(1, 40))
        e[t, CT.T_OH0] = draw(st.integers(0, OH + 4))
        e[t, CT.T_VH] = draw(st.integers(1, 8))
        e[t, CT.T_OW0] = draw(st.integers(0, OW + 4))
        e[t, CT.T_VW] = draw(st.integers(1, 64))
        e[t, CT.T_IH0] = draw(st.integers(-3, H + 3))
    return common, e


def _weight(common, e):
    """Clipped channels x rows x columns, 0 past the shape (written again here)."""
    def clip(start, count, size):
        return 0 if start < 0 or start >= size else min(count, size - start)
    if not (0 <= e[CT.T_N] < common[CT.CV_N] and 0 <= e[CT.T_G] < common[CT.CV_G]):
        return 0
    return (clip(e[CT.T_M0], e[CT.T_MV], common[CT.CV_MG])
            * clip(e[CT.T_OH0], e[CT.T_VH], common[CT.CV_OH])
            * clip(e[CT.T_OW0], e[CT.T_VW], common[CT.CV_OW]))


@settings(max_examples=150, deadline=None)
@given(tables(), st.integers(1, 5), st.booleans())
def test_deal_partitions_entries_and_rows_as_the_planner_prices_them(table, nth, ranges):
    common, e = table
    ne = e.shape[0]
    nth = max(1, min(nth, ne))                  # as the driver: no more threads than entries
    bounds = np.full((nth, CD.D_SIZE), -7, np.int64)
    CD.deal(common, e, ranges, nth, bounds)
    weights = np.array([_weight(common, e[t]) for t in range(ne)], np.int64)
    assert [CD.entry_weight(common, e, t) for t in range(ne)] == weights.tolist()
    # every entry dealt to one thread, where the planner's makespan puts it
    dealt = np.full(ne, -1)
    for th in range(nth):
        ts = list(range(*bounds[th, [CD.D_START, CD.D_STOP, CD.D_STEP]]))
        assert (dealt[ts] == -1).all()
        dealt[ts] = th
    assert (dealt >= 0).all()
    costs = weights * 1.5 + 1
    loads = np.bincount(dealt, weights=costs, minlength=nth)
    if ranges:
        # contiguous ranges in order
        assert (np.diff(dealt) >= 0).all()
        assert makespan(costs, nth, 1, "balanced", weights) == pytest.approx(loads.max())
        if weights.sum() > 0:
            assert dealt.tolist() == balanced_threads(weights, nth).tolist()
            work = np.bincount(dealt, weights=weights, minlength=nth)
            # balanced: no thread holds more than its share and one entry
            assert work.max() <= weights.sum() / nth + weights.max()
    else:
        assert dealt.tolist() == [t % nth for t in range(ne)]
        assert makespan(costs, nth, 1, "cyclic") == pytest.approx(loads.max())
    # rows of the copy: split in order, covering 0 .. N*H; with ranges, a thread's rows
    # start no later than the row its first live tile starts at
    N, H = common[CT.CV_N], common[CT.CV_H]
    assert bounds[0, CD.D_ROW0] == 0 and bounds[nth - 1, CD.D_ROW1] == N * H
    assert (bounds[1:, CD.D_ROW0] == bounds[:-1, CD.D_ROW1]).all()
    assert (bounds[:, CD.D_ROW1] >= bounds[:, CD.D_ROW0]).all()
    for th in range(1, nth if ranges else 0):
        live = [t for t in range(ne) if dealt[t] == th and weights[t] > 0]
        if live:
            t = live[0]
            assert bounds[th, CD.D_ROW0] <= e[t, CT.T_N] * H + min(max(e[t, CT.T_IH0], 0), H)


@pytest.mark.parametrize("slot", [0, 1, planner.DIRECT_SLOT])
@pytest.mark.parametrize("window", [False, True])
@pytest.mark.parametrize("sw, xsw", [(1, 1), (2, 1), (3, 1), (1, 2)])
@pytest.mark.parametrize("n_images", [1, 2, 5])
def test_the_planner_prices_the_deal_the_driver_makes(slot, window, sw, xsw, n_images):
    """The planner's rule (geometry only) and the driver's (the call's window mode) agree
    wherever the planner can know the mode: x with unit column stride."""
    direct = slot == planner.DIRECT_SLOT
    copied = not direct and window and (sw != 1 or xsw != 1)
    kernel = _deals_ranges(copied, not direct, n_images)
    if xsw == 1:
        assert planner.deals_ranges(slot, window, sw, n_images) == kernel
    assert kernel == (direct or copied or n_images > 1)


@njit
def _deals_ranges(copied, gemm_tiles, n_images):
    return CD.deals_ranges(copied, gemm_tiles, n_images)


def test_balanced_makespan_needs_weights():
    with pytest.raises(ValueError, match="weights"):
        makespan(np.ones(4), 2, 1, "balanced")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 30), st.integers(1, 70),
       st.integers(1, 3), st.integers(1, 3), st.integers(1, 7), st.integers(1, 7),
       st.integers(1, 2), st.integers(1, 2), st.integers(-3, 0), st.integers(-3, 0),
       st.sampled_from([1, 2]), st.lists(st.floats(0, 1), max_size=4), st.data())
def test_a_copy_made_in_pieces_is_the_copy_made_at_once(N, C, H, W, sh, sw, KH, KW, dh, dw,
                                                        ih0, iw0, xsw, cuts, data):
    """Whatever rows each thread copies, the threads' pieces together make the copy of one
    call over all rows: every used phase row written once, the same elements."""
    dt = data.draw(st.sampled_from([np.float32, np.float64]))
    rng = np.random.default_rng(0)
    buf = rng.standard_normal(N * C * H * W * xsw).astype(dt)
    common = np.zeros(CT.CV_SIZE, np.int64)
    for k, v in ((CT.CV_N, N), (CT.CV_C, C), (CT.CV_H, H), (CT.CV_W, W), (CT.CV_SH, sh),
                 (CT.CV_SW, sw), (CT.CV_KH, KH), (CT.CV_KW, KW), (CT.CV_DH, dh),
                 (CT.CV_DW, dw), (CT.CV_XSN, C * H * W * xsw), (CT.CV_XSC, H * W * xsw),
                 (CT.CV_XSH, W * xsw), (CT.CV_XSW, xsw)):
        common[k] = v
    wgeo = np.zeros(CI.WG_SIZE, np.int64)
    size = CI.window_source(CI.COPIED, common, ih0, iw0, wgeo)
    whole = np.full(size, np.nan, dt)
    CI.phase_split(buf, common, wgeo, whole, np.int64(0), np.int64(N * H))
    rows = sorted({0, N * H, *(int(c * N * H) for c in cuts)})
    pieces = np.full(size, np.nan, dt)
    for lo, hi in zip(rows[:-1], rows[1:]):
        CI.phase_split(buf, common, wgeo, pieces, np.int64(lo), np.int64(hi))
    np.testing.assert_array_equal(pieces, whole)
    # and that copy holds the input's used phases: phase (a, b) of plane (n, c) is
    # x[n, c, a::sh, b::sw]
    x = buf[::xsw].reshape(N, C, H, W)
    rows = CI.phase_used(wgeo[CI.WG_RH], sh, KH, dh)
    cols = CI.phase_used(wgeo[CI.WG_RW], sw, KW, dw)
    for a in range(sh):
        for b in range(sw):
            if not (CI.is_used(rows, a) and CI.is_used(cols, b)):
                continue
            ph = x[:, :, a::sh, b::sw]
            for n in range(N):
                for c in range(C):
                    o = (n * wgeo[CI.WG_SN] + c * wgeo[CI.WG_SC] + a * wgeo[CI.WG_PH]
                         + b * wgeo[CI.WG_PW])
                    for qh in range(ph.shape[2]):
                        got = whole[o + qh * wgeo[CI.WG_SH]:][:ph.shape[3]]
                        np.testing.assert_array_equal(got, ph[n, c, qh])


def test_two_threads_split_a_strided_conv_and_its_copy():
    """A conv the planner runs on two threads with a phase-split copy (7x7/2, pad 3): every
    output element right, nothing outside the output written."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 61, 67)).astype(np.float32)
    w = rng.standard_normal((40, 3, 7, 7)).astype(np.float32)
    attrs = dict(strides=(2, 2), pads=(3, 3, 3, 3))
    table = dynshape.explain("conv2d", x, w, **attrs)
    if table.nthreads < 2:
        pytest.skip("one thread here: the table runs serially")
    ref = ref_conv(x, w, None, **attrs)
    frame = np.full((2, 42, ref.shape[2] + 2, ref.shape[3] + 2), np.nan, np.float32)
    out = frame[:, 1:-1, 1:-1, 1:-1]
    dynshape.run("conv2d", x, w, out=out, **attrs)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-3)
    inner = np.zeros(frame.shape, bool)
    inner[:, 1:-1, 1:-1, 1:-1] = True
    assert np.isnan(frame[~inner]).all()
