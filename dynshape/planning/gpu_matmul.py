"""Matmul tables of a device target: one thread block per output tile of the target's
matmul tile set (``abi.cuda_tiles.CUDA_MATMUL_TILES``), K walked inside each block.

The candidates are the tile shapes; a tile's block costs its multiply-adds at the block's
rate plus, per K block, the loads of its A and B tiles (TM + TN rows of BK elements) and two
barriers, and blocks run
in waves (``gpu_cost.GpuCostModel.makespan``): small problems prefer small tiles (more
blocks, all SMs busy), large ones large tiles (fewer loads per multiply-add). The
simplified variant takes the first (largest) tile.
"""
import numpy as np
from dynshape_kernels.catalog import catalog_for

from dynshape.planning import cost_model
from dynshape.planning.matmul import MatmulCombination
from dynshape.planning.matmul_tiles import make_gemm_table

BK = 16                 # K block of the CUDA matmul kernel (dynshape_kernels.cuda.matmul)
FMA_PER_NS = 64.0       # multiply-adds per ns of one resident block (a quarter SM)
K_BLOCK_NS = 40.0       # per K block: the barriers and the loop
LOAD_NS = 0.5           # per element of the A and B tiles loaded from global memory


def block_cost(tm, tn, K):
    return tm * tn * K / FMA_PER_NS + -(-K // BK) * (K_BLOCK_NS + (tm + tn) * BK * LOAD_NS)


def combine_blocks(M, N, K, batch, dtype, target, variant):
    """The combination of an M x N x K problem with ``batch`` batches on ``target``."""
    tiles = [t[:2] for t in catalog_for(target).families["matmul"].tiles_for(dtype)]
    model = cost_model.for_target(target)
    priced = []
    for slot, (tm, tn) in enumerate(tiles if variant != "simplified" else tiles[:1]):
        n_blocks = -(-M // tm) * -(-N // tn) * batch
        costs = np.full(max(n_blocks, 1), model.block_ns + block_cost(tm, tn, K))
        priced.append((model.makespan(costs, 1), slot, (tm, tn)))
    cost, slot, (tm, tn) = min(priced)
    entries = make_gemm_table(M, N, tm, tn, slot, batch)
    desc = (f"{tm}x{tn} output tiles, one block each, K in blocks of {BK} through shared "
            f"memory; {len(entries)} blocks over {batch} batch(es), {len(priced)} "
            f"candidate(s)")
    return MatmulCombination(entries, slot, (tm, tn), variant, cost, desc)
