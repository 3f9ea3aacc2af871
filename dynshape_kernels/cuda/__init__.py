"""The CUDA target's static kernels (Numba CUDA): one kernel per (family, dtype), compiled
for fixed tiles (one thread block's work), reading the same parameter tables as the CPU
drivers. Nothing here is imported by ``import dynshape``: the CUDA target loads it when a
call first names it (``dynshape.cuda``)."""
