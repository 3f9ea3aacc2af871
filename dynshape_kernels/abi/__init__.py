"""The contract between the runtime and the drivers, as plain data (no Numba import).

Everything a parameter table means to a driver lives here: the common-area and entry
columns of the plane families (:mod:`common_area`), the tail modes (:mod:`tail_mode`), the
extra entry columns and control blocks of pool, conv and matmul tables, the step programs of
fused sequences and epilogues, the op codes of every family (:mod:`vocabulary`) and the tile
slots each family is compiled for (:mod:`tiles`). The runtime reads these modules to build
tables; the kernels read the same modules to interpret them. Values are part of the table
format: append, never renumber.
"""
