"""Layout of a parameter table's arrays as the drivers read them.

A table is handed to a driver as two int64 arrays:

``common`` (1-D): values shared by all entries, bound per call::

    [C_IDBASE]   first kernel id of the driver's family/dtype range
    [C_OPBASE]   op code of the family's first op (kernel id -> op code within the driver)
    [C_NOUTER]   product of the outer (batch) dimensions; the entries are replicated over them
    [C_NDOUTER]  number of outer dimensions (<= MAX_OUTER)
    [C_OSHAPE:]  outer shape, MAX_OUTER values, padded with 1
    [C_M], [C_N] sizes of the inner plane (rows, columns)
    [C_OPS:]     per operand (output first, then inputs), OP_BLOCK values:
                 element offset of element [0, ..., 0] in the operand's flat buffer,
                 MAX_OUTER outer strides, row stride, column stride (all in elements, any sign)

``entries`` (2-D, one row per kernel call on the inner plane)::

    [E_KID]      kernel id (catalog id)
    [E_MODE0/1]  tail mode for the row / column dimension (see tail_mode)
    [E_OFF0/1]   offset; from the start, or back from the end when the anchor is ANCHOR_END
    [E_ANCH0/1]  anchor of each offset

A tile's valid length in a dimension is ``clamp(size - offset, 0, T)`` (T from the kernel's
tile shape); an offset outside ``[0, size)`` makes the entry do nothing. The drivers compute
this themselves, so a table can never make them touch memory outside the operands.
"""

MAX_OUTER = 6
MAX_RANK = MAX_OUTER + 2

C_IDBASE = 0
C_OPBASE = 1
C_NOUTER = 2
C_NDOUTER = 3
C_OSHAPE = 3
C_M = C_OSHAPE + MAX_OUTER
C_N = C_M + 1
C_OPS = C_N + 1

OP_OFF = 0
OP_OSTR = 1
OP_SM = OP_OSTR + MAX_OUTER
OP_SN = OP_SM + 1
OP_BLOCK = OP_SN + 1

E_KID = 0
E_MODE0 = 1
E_MODE1 = 2
E_OFF0 = 3
E_ANCH0 = 4
E_OFF1 = 5
E_ANCH1 = 6
E_NCOL = 7


def common_size(n_operands):
    return C_OPS + OP_BLOCK * n_operands
