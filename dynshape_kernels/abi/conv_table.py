"""Layout of a conv2d parameter table as the conv driver reads it (two int64 arrays).

``entries`` (2-D, one row per output tile, i.e. per static-kernel call)::

    [T_KID]           kernel id (catalog id of family "conv"; id - base = slot)
    [T_N]             image index n
    [T_G]             group g
    [T_M0], [T_MV]    first output channel of the tile inside the group, channel count
    [T_OH0], [T_VH]   first output row, row count
    [T_OW0], [T_VW]   first output column, column count
    [T_IH0], [T_IW0]  input offset of the tile's window: the input row / column read by
                      output (oh0, ow0) at kernel tap (0, 0), i.e. ``oh0*sh - pad_top`` and
                      ``ow0*sw - pad_left`` (negative near the padding)

Counts are the tile's sizes for the largest shape of the table's bucket; the driver clips
them to the real shape (``min(count, size - start)``, an entry whose start is past the end
does nothing), so one table serves every shape of its bucket (VARIABLE_FULL tails). The
reduced dimension K = Cg*KH*KW is never in the table: every entry walks all of it.

``common`` (1-D, bound per call): sizes, attributes, and per operand an element offset and
element strides (any sign) into the operand's flat buffer::

    N C H W M OH OW KH KW G CG MG SH SW DH DW, the number of threads, the family's first
    kernel id, has bias, has residual, activation op code,
    x: offset + (n, c, h, w) strides; y and residual: offset + (n, m, oh, ow) strides;
    bias: offset + stride. The weights are C-contiguous (M, CG, KH, KW), offset 0.
"""
(CV_N, CV_C, CV_H, CV_W, CV_M, CV_OH, CV_OW, CV_KH, CV_KW, CV_G, CV_CG, CV_MG, CV_SH, CV_SW,
 CV_DH, CV_DW, CV_NTH, CV_IDBASE, CV_HASB, CV_HASR, CV_ACT,
 CV_XOFF, CV_XSN, CV_XSC, CV_XSH, CV_XSW,
 CV_YOFF, CV_YSN, CV_YSC, CV_YSH, CV_YSW,
 CV_ROFF, CV_RSN, CV_RSC, CV_RSH, CV_RSW,
 CV_BOFF, CV_BS, CV_SIZE) = range(39)

(T_KID, T_N, T_G, T_M0, T_MV, T_OH0, T_VH, T_OW0, T_VW, T_IH0, T_IW0, T_NCOL) = range(12)

#: names of the entry columns (for describe() and error messages)
ENTRY_COLUMNS = ("kid", "n", "g", "m0", "mv", "oh0", "vh", "ow0", "vw", "ih0", "iw0")
