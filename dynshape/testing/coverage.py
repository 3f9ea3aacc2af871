"""Coverage checkers: how many table entries write each output element (exactly once, or
again with the identical value for OVERLAP tiles), for plane, matmul and conv tables."""
import numpy as np
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.common_area import E_MODE0, E_MODE1
from dynshape_kernels.abi.tail_mode import OVERLAP


def coverage(table, m, n, catalog=CATALOG, which=None):
    """Count array (m, n): how many entries write each element of an (m, n) inner plane.

    ``which``: optional boolean mask selecting entries. Raises AssertionError if a resolved
    tile leaves the plane or has a negative length.
    """
    counts = np.zeros((m, n), dtype=np.int64)
    res = table.resolved(m, n, catalog)
    if which is not None:
        res = res[which]
    for kid, o0, v0, o1, v1 in res:
        assert v0 >= 0 and v1 >= 0, "negative valid length"
        if v0 == 0 or v1 == 0:
            continue
        assert 0 <= o0 and o0 + v0 <= m, f"rows {o0}..{o0 + v0} outside 0..{m}"
        assert 0 <= o1 and o1 + v1 <= n, f"columns {o1}..{o1 + v1} outside 0..{n}"
        counts[o0:o0 + v0, o1:o1 + v1] += 1
    return counts


def check_coverage(table, shape, catalog=CATALOG):
    """Assert the invariant on the plane ``shape=(m, n)``: every element is written, entries
    without OVERLAP tails never write an element twice, and OVERLAP entries are full tiles
    (their rewrites recompute the identical value). Returns the count array."""
    m, n = shape
    e = table.entries
    ov = (e[:, E_MODE0] == OVERLAP) | (e[:, E_MODE1] == OVERLAP)
    plain = coverage(table, m, n, catalog, ~ov)
    twice = np.argwhere(plain > 1)
    assert twice.size == 0, (f"{len(twice)} elements written twice by non-overlap entries, "
                             f"first {twice[:3].tolist()}")
    res = table.resolved(m, n, catalog)[ov]
    for kid, o0, v0, o1, v1 in res:
        assert (v0, v1) == catalog[int(kid)].tile, \
            f"OVERLAP entry of kernel {kid} is not a full tile: {v0}x{v1}"
    counts = plain + coverage(table, m, n, catalog, ov)
    missing = np.argwhere(counts == 0)
    assert missing.size == 0, f"{len(missing)} elements never written, first {missing[:3].tolist()}"
    return counts


def matmul_coverage(table, M, N, batch):
    """Count array (batch, M, N): how many tiles of a matmul table write each output element
    of an M x N x batch problem, with the driver's clipping of tiles at M, N and the batch
    count (the K dimension is not in the table: it is walked whole inside every tile)."""
    cover = np.zeros((batch, M, N), np.int32)
    for _, m0, n0, tm, tn, b in table.entries:
        if b < batch and m0 < M and n0 < N:
            cover[b, m0:min(m0 + tm, M), n0:min(n0 + tn, N)] += 1
    return cover


def check_matmul_coverage(table, M, N, batch):
    """Assert that the table covers an M x N x batch output exactly once and that the
    problem lies in the table's bucket."""
    for size, (lo, hi), what in zip((M, N, batch), (table.bucket[0], table.bucket[1],
                                                     table.bucket[3]), "MN" + "b"):
        assert lo < size <= hi or size == hi == 0, f"{what}={size} outside the bucket {lo, hi}"
    cover = matmul_coverage(table, M, N, batch)
    assert (cover == 1).all(), f"{int((cover == 0).sum())} elements uncovered, " \
                               f"{int((cover > 1).sum())} covered more than once"


def conv_coverage(table, N, OH, OW):
    """Count array (N, M, OH, OW): how many entries of a conv2d table write each output element
    of a problem with N images and an OH x OW output, with the driver's clipping of tiles."""
    g = table.geo
    cover = np.zeros((N, g["M"], OH, OW), np.int32)
    for row in table.resolved(N, OH, OW):
        _, n, grp, m0, mv, oh0, vh, ow0, vw = (int(v) for v in row[:9])
        if mv and vh and vw:
            c0 = grp * g["Mg"] + m0
            cover[n, c0:c0 + mv, oh0:oh0 + vh, ow0:ow0 + vw] += 1
    return cover


def check_conv_table(table, N, H, W, OH, OW):
    """Assert a conv2d table's invariants for an (N, ., H, W) -> (N, ., OH, OW) problem of its
    bucket: every output element is written exactly once; K is never split (no entry column
    holds a K range: every entry walks all of C/group*KH*KW); each entry's input offset is its
    output offset mapped through stride and padding; and for every tile and kernel tap the
    input rows and columns the driver reads (the window clipped by its own column-range rule)
    lie inside x, i.e. padding is never read from memory. Returns the count array."""
    from dynshape_kernels.abi.conv_table import ENTRY_COLUMNS, T_NCOL
    from dynshape_kernels.cpu.conv_window import col_range
    col_range = getattr(col_range, "py_func", col_range)
    g = table.geo
    assert table.entries.shape[1] == T_NCOL and not any("k" == c[0] for c in ENTRY_COLUMNS[1:])
    cover = conv_coverage(table, N, OH, OW)
    assert (cover == 1).all(), (f"{int((cover == 0).sum())} output elements never written, "
                                f"{int((cover > 1).sum())} written more than once")
    pt, pl = g["pads"][0], g["pads"][1]
    for row in table.resolved(N, OH, OW):
        _, n, grp, m0, mv, oh0, vh, ow0, vw, ih0, iw0 = (int(v) for v in row)
        assert ih0 == oh0 * g["sh"] - pt and iw0 == ow0 * g["sw"] - pl, \
            f"input offset ({ih0}, {iw0}) of the tile at ({oh0}, {ow0}) is inconsistent"
        if not (mv and vh and vw):
            continue
        for kw in range(g["KW"]):
            iwb = iw0 + kw * g["dw"]
            lo, hi = col_range(iwb, g["sw"], W, vw)
            for j in range(vw):
                inside = 0 <= iwb + j * g["sw"] < W
                assert inside == (lo <= j < hi), f"column {j} of tap {kw}: read {lo <= j < hi}"
    return cover
