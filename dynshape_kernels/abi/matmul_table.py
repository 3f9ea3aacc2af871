"""Entries of a matmul table: one row per output tile, ``TABLE_COLS`` int64 columns.

A tile covers rows ``m0 .. m0 + tm`` and columns ``n0 .. n0 + tn`` of batch ``batch`` for
the largest problem of the table's bucket; the driver clips it to the real M, N and batch
count. K is never in the table: every tile walks all of it in its slot's KC blocks.
"""
M_SLOT, M_M0, M_N0, M_TM, M_TN, M_BATCH = range(6)
TABLE_COLS = 6
ENTRY_COLUMNS = ("slot", "m0", "n0", "tm", "tn", "batch")
