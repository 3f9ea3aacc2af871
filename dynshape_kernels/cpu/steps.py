"""Step programs: a cascade of elementwise kernels applied in place to a tile (seed 004, Fig. 13).

A *step program* is data, not code: an int64 array ``prog`` of shape (nsteps, 4), one row
per step, ``(kind, op code, side index, attr index)``:

=========== =====================================================================================
kind        meaning of the step (``v`` is the running tile value)
=========== =====================================================================================
K_UNARY     ``v = unary[code](v; pattrs[attr], pattrs[attr + 1])`` (codes: scalar_ops.UNARY_OPS)
K_SIDE_R    ``v = binary[code](v, side)`` -- the side input is the right operand
K_SIDE_L    ``v = binary[code](side, v)`` -- the side input is the left operand
K_CONST_R   ``v = binary[code](v, pattrs[attr])`` -- a constant right operand
K_CONST_L   ``v = binary[code](pattrs[attr], v)`` -- a constant left operand
=========== =====================================================================================

Binary codes are scalar_ops.BINARY_OPS. ``pattrs`` is a 1-D array of the tile's computed
dtype (float32 for a half-precision tile, whose constants are rounded to the format when a
step uses them) holding every step's attributes (unused slots are ignored). The side index selects one of the four
side inputs ``sides`` (a UniTuple of four 1-D arrays of the tile dtype; unused ones are
dummies) whose geometry is ``sgeo[side] = (offset, outer stride, row stride, column stride)``
in elements (any sign; 0 = broadcast along that axis).

:func:`apply_steps` is the one interpreter of step programs: the fused-sequence driver
(kernels/cpu/fused.py) runs it on every tile, and the GEMM / conv drivers call it as their
epilogue on the accumulator tile before it is stored. Per step it switches on the op code once
per tile row, then runs a branch-free vectorized loop over the row (the in-place loops of
``cpu.switches``, generated from the op vocabulary).

:func:`apply_steps_as` is the entry of drivers whose tile holds computed values (float32
accumulators of a half-precision GEMM or conv): it runs the program with the semantics of the
output's storage format, as the ops one by one would.
"""
import numpy as np
from numba import njit
from numba.extending import overload

from .callee import callee
from .half import is_half, load, store
from .readonly_view import readonly
from .step_link import run_steps
from .switches import (map_inplace, zip_left, zip_left_rows, zip_left_scalar, zip_right,
                       zip_right_rows, zip_right_scalar)

from ..abi.step_program import (G_COL, G_OFF, G_OUTER, G_ROW, K_CONST_L,  # noqa: F401
                                K_CONST_R, K_SIDE_L, K_SIDE_R, K_UNARY, MAX_SIDES, P_ATTR,
                                P_CODE, P_KIND, P_SIDE, PROG_COLS, empty_program)

# strided side inputs are gathered into a scratch row of at most this many elements
GATHER_CHUNK = 1024


@callee(cache=True, error_model="numpy")
def _side_row(code, kind, side, sb, cs, row, n, scratch):
    """row = code(row, side[sb + j*cs]) (K_SIDE_R) or code(side[...], row) (K_SIDE_L)."""
    if cs == 1:
        if kind == K_SIDE_R:
            zip_right(code, row, side[sb:sb + n], n)
        else:
            zip_left(code, side[sb:sb + n], row, n)
    elif cs == 0:
        if kind == K_SIDE_R:
            zip_right_scalar(code, row, side[sb], n)
        else:
            zip_left_scalar(code, side[sb], row, n)
    else:
        k = 0
        while k < n:
            c = min(n - k, scratch.size)
            for i in range(c):
                scratch[i] = side[sb + (k + i) * cs]
            part = row[k:k + c]
            # the gathered side typed read-only like the sides: one compiled zip per side
            gathered = readonly(scratch)
            if kind == K_SIDE_R:
                zip_right(code, part, gathered, c)
            else:
                zip_left(code, gathered, part, c)
            k += c


@njit(inline="always")
def apply_steps_range(prog, first, last, pattrs, buf, boff, ld, nrows, ncols, row0, col0, outer,
                      sides, sgeo):
    """:func:`apply_steps` restricted to the steps ``prog[first:last]`` (no array slicing,
    so drivers that run a program in parts share one compiled interpreter).

    Inlined into its caller, it calls the interpreter by address (``step_link``: compiled
    once per dtype, not inside each driver; the call casts every integer to int64)."""
    run_steps((prog, first, last, pattrs, buf, boff, ld, nrows, ncols, row0, col0, outer, sides,
               sgeo))


@callee(cache=True, error_model="numpy")
def _apply_steps_range(prog, first, last, pattrs, buf, boff, ld, nrows, ncols, row0, col0,
                       outer, sides, sgeo):
    if first >= last or nrows <= 0 or ncols <= 0:
        return
    strided = False
    for s in range(first, last):
        k = prog[s, P_KIND]
        cs = sgeo[prog[s, P_SIDE], G_COL]
        if (k == K_SIDE_R or k == K_SIDE_L) and cs != 0 and cs != 1:
            strided = True
    scratch = np.empty(min(ncols, GATHER_CHUNK), dtype=buf.dtype) if strided else buf[:0]
    # rows that follow each other in buf (ld == ncols) are one run: steps that treat every
    # element alike (unary, constant, a side laid out like the tile) make one switch call
    # for the whole tile instead of one per row (a call costs ~40-80 ns, a 1000-element
    # row's vector work ~20 ns)
    joined = ld == ncols
    runs = np.int64(1) if joined else nrows
    n = nrows * ncols if joined else ncols
    for s in range(first, last):
        kind = prog[s, P_KIND]
        code = prog[s, P_CODE]
        if kind == K_UNARY:
            a0 = pattrs[prog[s, P_ATTR]]
            a1 = pattrs[prog[s, P_ATTR] + 1]
            for i in range(runs):
                o = boff + i * ld
                map_inplace(code, buf[o:o + n], n, a0, a1)
        elif kind == K_CONST_R or kind == K_CONST_L:
            c = store(buf, pattrs[prog[s, P_ATTR]])     # a half tile's constant: its bits
            for i in range(runs):
                o = boff + i * ld
                if kind == K_CONST_R:
                    zip_right_scalar(code, buf[o:o + n], c, n)
                else:
                    zip_left_scalar(code, c, buf[o:o + n], n)
        else:
            si = prog[s, P_SIDE]
            side = sides[si]
            rs = sgeo[si, G_ROW]
            cs = sgeo[si, G_COL]
            sb0 = sgeo[si, G_OFF] + outer * sgeo[si, G_OUTER] + row0 * rs + col0 * cs
            if joined and cs == 1 and rs == ncols:
                _side_row(code, kind, side, sb0, cs, buf[boff:boff + n], n, scratch)
                continue
            if cs == 1:                 # one call for the tile's rows
                if kind == K_SIDE_R:
                    zip_right_rows(code, buf, boff, ld, side, sb0, rs, nrows, ncols)
                else:
                    zip_left_rows(code, side, sb0, rs, buf, boff, ld, nrows, ncols)
                continue
            for i in range(nrows):
                o = boff + i * ld
                _side_row(code, kind, side, sb0 + i * rs, cs, buf[o:o + ncols], ncols, scratch)


@callee(cache=True, error_model="numpy")
def apply_steps(prog, pattrs, buf, boff, ld, nrows, ncols, row0, col0, outer, sides, sgeo):
    """Apply the step program ``prog`` in place to a tile of ``buf``.

    Tile element (i, j), 0 <= i < nrows, 0 <= j < ncols, lives at ``buf[boff + i*ld + j]``;
    its position in the 2-D output plane is (row0 + i, col0 + j) of outer (batch) index
    ``outer``, so side input s contributes
    ``sides[s][sgeo[s, 0] + outer*sgeo[s, 1] + (row0 + i)*sgeo[s, 2] + (col0 + j)*sgeo[s, 3]]``.

    Contract: ``prog`` int64 (nsteps, 4) rows (kind, op code, side index, attr index) as in
    the module docstring; ``pattrs`` 1-D of the tile dtype; ``sides`` a UniTuple of 4 1-D
    arrays of the tile dtype; ``sgeo`` int64 (4, 4). Every index a step computes must lie
    inside its side array (the caller validates shapes); nothing is allocated unless a side
    has a column stride other than 0 or 1 (then one scratch row of at most GATHER_CHUNK
    elements).
    Integer tiles must not be given float-only unary ops or ``div`` (the caller refuses them).
    Compiled with NumPy's error model (x/0 gives inf or nan, as in NumPy), which the loops it
    calls inherit. Steps run one after the other over the whole tile, so keep tiles small
    enough for L1/L2; each step is one op-code switch call (then vectorized loops) for the
    whole tile when its rows follow each other (``ld == ncols``) or its side has unit column
    stride, else one call per row.
    """
    apply_steps_range(prog, 0, prog.shape[0], pattrs, buf, boff, ld, nrows, ncols, row0, col0,
                      outer, sides, sgeo)


@callee(cache=True)
def scratch_span(prog, ld, nrows, ncols):
    """The length of ONE run over ``nrows`` rows of ``ncols`` at pitch ``ld`` (``ld`` >=
    ``ncols``) for a caller whose values between the rows are scratch (an epilogue's
    accumulators), when the run is worth it: the rows do not follow each other already, the
    program's steps all treat every element alike (unary and constant steps: no side input
    is read by position) and the run computes at most half as many values again as the rows
    hold; else 0. Running the steps on it costs one switch call per step instead of one per
    row and step (a call costs ~40-80 ns, a few hundred elements' vector work)."""
    if nrows <= 1 or ld == ncols:
        return np.int64(0)
    for s in range(prog.shape[0]):
        k = prog[s, P_KIND]
        if k != K_UNARY and k != K_CONST_R and k != K_CONST_L:
            return np.int64(0)
    if 2 * (ld - ncols) * (nrows - 1) > nrows * ncols:
        return np.int64(0)
    return (nrows - 1) * ld + ncols


def apply_steps_as(out, prog, pattrs, buf, boff, ld, nrows, ncols, row0, col0, outer, sides,
                   sgeo):
    """:func:`apply_steps` on a tile of *computed* values ``buf`` (as :func:`apply_steps`)
    with the semantics of ``out``'s storage format. For float32, float64 and integers this is
    :func:`apply_steps` itself. For a half-precision ``out`` (a carrier) the tile is rounded
    to the format, the program runs on the format (every step widens, computes in float32 and
    rounds: the fused driver's half tiles, bit for bit the ops one by one) in a scratch tile
    of ``nrows * ncols`` carriers, and the results are written back widened (exact), so the
    caller's store rounds nothing further. ``sides`` then hold the format too, ``pattrs`` is
    float32."""


@overload(apply_steps_as)
def _apply_steps_as(out, prog, pattrs, buf, boff, ld, nrows, ncols, row0, col0, outer, sides,
                    sgeo):
    if not is_half(out.dtype):
        def direct(out, prog, pattrs, buf, boff, ld, nrows, ncols, row0, col0, outer, sides,
                   sgeo):
            apply_steps(prog, pattrs, buf, boff, ld, nrows, ncols, row0, col0, outer, sides,
                        sgeo)
        return direct

    def rounded(out, prog, pattrs, buf, boff, ld, nrows, ncols, row0, col0, outer, sides,
                sgeo):
        if nrows <= 0 or ncols <= 0:
            return
        h = np.empty(nrows * ncols, out.dtype)
        for i in range(nrows):
            o = boff + i * ld
            for j in range(ncols):
                h[i * ncols + j] = store(out, buf[o + j])
        apply_steps(prog, pattrs, h, 0, ncols, nrows, ncols, row0, col0, outer, sides, sgeo)
        for i in range(nrows):
            o = boff + i * ld
            for j in range(ncols):
                buf[o + j] = load(h[i * ncols + j])
    return rounded
