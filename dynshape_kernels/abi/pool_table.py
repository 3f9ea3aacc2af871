"""Pool tables: plane entries (``common_area.E_*``) plus each tile's input offsets, and the
pool block appended to the common area.

Entry columns after the plane's: ``E_IH0``, ``E_IW0`` = the input row and column read by the
tile's first output at window tap (0, 0): ``row offset * stride - pad_top`` (negative where
the window starts in the padding).

The pool block follows the two operand blocks (output, input) of the common area:
kernel (KH, KW), strides, dilations, end pads (bottom, right), input size (H, W) and
count_include_pad.
"""
from .common_area import E_NCOL, common_size

E_IH0 = E_NCOL
E_IW0 = E_NCOL + 1
POOL_NCOL = E_NCOL + 2

POOL_OPERANDS = 2
POOL_BLOCK_START = common_size(POOL_OPERANDS)
P_KH, P_KW, P_SH, P_SW, P_DH, P_DW, P_PB, P_PR, P_H, P_W, P_CIP = range(11)
POOL_BLOCK = 11
