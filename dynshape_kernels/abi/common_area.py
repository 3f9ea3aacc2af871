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
C_OSHAPE = 4
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


# ---- store block (families "unary", "copy", "binary" and "rowwise" on the CPU) --------------
# Appended after the operand blocks, at ``S0 = common_size(n_operands)`` (rowwise: after its
# reduction block, at ``S0 = common_size(4) + reduce_block_size(4)``); a common area without
# it (shorter) means normal stores::
#
#     [S0 + S_STREAM]     1: write the output with streaming stores where its rows allow
#                         (``cpu.streaming``; the executor sets it for outputs larger than
#                         the last-level cache), 0: normal stores
S_STREAM = 0
STORE_BLOCK = 1


# ---- run block (families "unary", "copy" and "binary" on the CPU) ----------------------------
# Appended after the store block, at ``W0 = common_size(n_operands) + STORE_BLOCK``; a common
# area without it (shorter) means "not known"::
#
#     [W0 + W_ROWS]       1: the table's entries are rows in order: entry i is the tile at
#                         row offset i from the start, every entry with entry 0's kernel, tail
#                         modes and columns (``ParamTable.rows_in_order``, computed from the
#                         entries), so a one-row entry and the ones after it continue each
#                         other row by row up to the plane's last row and the drivers run them
#                         together without reading each (a simplified table over short rows:
#                         80000 x 16 is 80000 entries); 0: the drivers compare each entry
W_ROWS = 0
RUN_BLOCK = 1


# ---- reduction block (families "reduce" and "rowwise") ---------------------------------------
# Appended after the operand blocks: ``R0 = common_size(n_operands)`` is where it starts.
# The entries tile the kept dimensions (the output plane, as above); the reduced dimensions
# (reduce) or normalized dimensions (rowwise) that every kernel call walks entirely live here::
#
#     [R0 + R_COUNT]      number of elements reduced per output element (product of R_SHAPE)
#     [R0 + R_ND]         number of reduced dimensions, 1..MAX_RED (a lone size-1 stride-0
#                         dimension stands for "nothing reduced"; size 0 for an empty reduction)
#     [R0 + R_STRATEGY]   STRAT_LANES: each output element reduces its own elements, the
#                         innermost reduced dimension walked by vector lanes;
#                         STRAT_COLUMNS: a tile row reduces vectors of its contiguous kept
#                         columns (reductions over a leading or middle axis)
#     [R0 + R_OUTKIND]    reduce: which output buffer the op writes (OUT_SAME, OUT_I64, OUT_F64)
#     [R0 + R_SHAPE:]     MAX_RED sizes of the reduced dimensions, outermost first
#     [R0 + R_STR + k*MAX_RED:]  MAX_RED strides (elements, any sign) of reduced operand k;
#                         reduce: k=0 is the input; rowwise: k = operand index (out, x, w, b)
MAX_RED = 6

R_COUNT = 0
R_ND = 1
R_STRATEGY = 2
R_OUTKIND = 3
R_SHAPE = 4
R_STR = R_SHAPE + MAX_RED

STRAT_LANES = 0
STRAT_COLUMNS = 1

OUT_SAME = 0
OUT_I64 = 1
OUT_F64 = 2


def reduce_block_size(n_reduced_operands):
    return R_STR + MAX_RED * n_reduced_operands
