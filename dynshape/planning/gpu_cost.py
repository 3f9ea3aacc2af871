"""Cost model of the CUDA kernels: a block per (entry, outer index), scheduled in waves.

A table's blocks run ``sms * blocks_per_sm`` at a time (occupancy: 256-thread blocks, 2048
resident threads per SM). A block costs a fixed part (scheduling, table decode) plus its
threads' iterations: each of the block's threads handles ``ceil(valid elements / threads)``
elements, and a strided (uncoalesced) access costs a memory transaction per element instead of
one per warp. The makespan is the list-scheduling bound over the waves: total work spread on
the resident slots, plus the longest block. Figures are for a mid-range data-centre GPU; the
planner only compares tables, so their ratios matter, not their absolute values.
"""
from dataclasses import dataclass

import numpy as np
from dynshape_kernels.abi.common_area import STRAT_COLUMNS
from dynshape_kernels.abi.cuda_tiles import CUDA_THREADS


@dataclass(frozen=True)
class GpuCostModel:
    sms: int = 108
    blocks_per_sm: int = 8
    launch_ns: float = 3000.0     # per launch (one per table)
    block_ns: float = 400.0       # per block: scheduling, table decode, outer offsets
    iter_ns: float = 2.0          # per thread iteration on coalesced memory
    strided_ns: float = 16.0      # per thread iteration that misses coalescing
    threads: int = CUDA_THREADS
    source: str = ("GPU model: waves of blocks over 108 SMs x 8 resident blocks, defaults "
                   "(not measured on a device)")

    def tile_costs(self, t0, rows_valid, row_modes, cols_valid, col_modes, col_t, strided,
                   repeats=False):
        # (``repeats``, an input repeating a row or a value per row, is not priced here)
        vr = rows_valid.astype(np.float64)[:, None]
        vc = cols_valid.astype(np.float64)[None, :]
        per = self.iter_ns
        if strided:
            # the square tile stages through shared memory; row tiles read uncoalesced
            per = self.iter_ns * 1.5 if t0 > 1 else self.strided_ns
        cost = self.block_ns + np.ceil(vr * vc / self.threads) * per
        return np.where((vr == 0) | (vc == 0), self.block_ns, cost)

    def walk_costs(self, tiling, t0, rows, cols):
        """Blocks of a reduction or row-wise table: each output is reduced by
        ``threads / (T0 * T1)`` threads (a tree in shared memory ends it)."""
        m, n = tiling.shape
        vr = rows.valid(m).astype(np.float64)[:, None]
        vc = cols.valid(n).astype(np.float64)[None, :]
        t1 = cols.tile.astype(np.float64)[None, :]
        per_out = np.maximum(self.threads // (t0 * t1), 1)
        work = tiling.count * tiling.passes
        steps = np.ceil(work / per_out) * (self.strided_ns if tiling.strategy == STRAT_COLUMNS
                                           else self.iter_ns)
        tree = np.log2(per_out) * 20.0
        cost = self.block_ns + steps + tree
        return np.where((vr == 0) | (vc == 0), self.block_ns, cost)

    def makespan(self, costs, n_outer):
        slots = self.sms * self.blocks_per_sm
        total = float(np.sum(costs)) * max(n_outer, 1)
        return self.launch_ns + total / slots + float(np.max(costs, initial=0.0))
