"""Copies between a strided tile of an operand and a contiguous tile buffer (the DISCARD
tails and the fused drivers' tile buffers). Unit-stride rows copy through views, which
LLVM vectorizes (a slice assignment is 1.6x slower)."""
from numba import njit


@njit(cache=True)
def gather_tile(x, xb, xsm, xsn, v0, v1, buf, pitch):
    """Copy the valid v0 x v1 region of a strided tile into ``buf`` (row pitch ``pitch``),
    walking the source along its smaller stride (a blocked transpose for transposed reads)."""
    if xsn == 1:
        for r in range(v0):
            d = buf[r * pitch:r * pitch + v1]        # (views and a loop: a slice assignment
            sv = x[xb + r * xsm:xb + r * xsm + v1]   # is 1.6x slower)
            for c in range(v1):
                d[c] = sv[c]
    elif abs(xsm) < abs(xsn):
        for c in range(v1):
            src = xb + c * xsn
            for r in range(v0):
                buf[r * pitch + c] = x[src + r * xsm]
    else:
        for r in range(v0):
            src = xb + r * xsm
            for c in range(v1):
                buf[r * pitch + c] = x[src + c * xsn]


@njit(cache=True)
def scatter_tile(o, ob, osm, osn, v0, v1, buf, pitch):
    """Write the valid region of ``buf`` to a strided output tile (the inverse of gather)."""
    if osn == 1:
        for r in range(v0):
            d = o[ob + r * osm:ob + r * osm + v1]
            sv = buf[r * pitch:r * pitch + v1]
            for c in range(v1):
                d[c] = sv[c]
    elif abs(osm) < abs(osn):
        for c in range(v1):
            dst = ob + c * osn
            for r in range(v0):
                o[dst + r * osm] = buf[r * pitch + c]
    else:
        for r in range(v0):
            dst = ob + r * osm
            for c in range(v1):
                o[dst + c * osn] = buf[r * pitch + c]
