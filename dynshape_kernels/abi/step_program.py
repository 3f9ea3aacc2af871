"""Step programs: a cascade of elementwise kernels applied in place to a tile (seed 004,
Fig. 13), as data.

``prog`` is int64 (nsteps, PROG_COLS), one row per step: ``(kind, op code, side index,
attr index)``. Kinds (``v`` is the running tile value):

=========== =====================================================================================
K_UNARY     ``v = unary[code](v; pattrs[attr], pattrs[attr + 1])`` (codes: vocabulary.UNARY_OPS)
K_SIDE_R    ``v = binary[code](v, side)`` -- the side input is the right operand
K_SIDE_L    ``v = binary[code](side, v)`` -- the side input is the left operand
K_CONST_R   ``v = binary[code](v, pattrs[attr])`` -- a constant right operand
K_CONST_L   ``v = binary[code](pattrs[attr], v)`` -- a constant left operand
=========== =====================================================================================

Binary codes are vocabulary.BINARY_OPS. ``pattrs`` is a 1-D array of the tile dtype with
every step's attributes. The side index selects one of MAX_SIDES side inputs, whose geometry
is ``sgeo[side] = (offset, outer stride, row stride, column stride)`` in elements (any sign;
0 = broadcast along that axis).
"""
import numpy as np

K_UNARY = 0
K_SIDE_R = 1
K_SIDE_L = 2
K_CONST_R = 3
K_CONST_L = 4

MAX_SIDES = 4
PROG_COLS = 4
# column of ``prog`` / of ``sgeo``
P_KIND, P_CODE, P_SIDE, P_ATTR = range(4)
G_OFF, G_OUTER, G_ROW, G_COL = range(4)
SGEO_COLS = 4


def empty_program():
    """A program of no steps (for drivers called without an epilogue)."""
    return np.zeros((0, PROG_COLS), np.int64)
