"""The CUDA fused-sequence kernel: a chain of steps interpreted per element, with the tail
its control block names (``abi.fused_table``: T_NONE, T_ROWWISE, T_REDUCE_ROWS,
T_REDUCE_ALL).

Block ``(e, j)`` runs entry ``e`` of the fused table (a T0 x T1 tile of the coalesced
plane, clipped by bounds) for outer index ``j``; every element goes through the ONE call of
the device step interpreter (``cuda.steps``) in registers, then is stored or folded: one
launch, no intermediate array.

* T_NONE (elementwise chain): the block's threads take the tile's elements in turn.
* T_ROWWISE, T_REDUCE_ROWS: the entry's tile spans whole rows; a group of threads (a power
  of two) takes each row (``cuda.fused_tail``). A row-wise op sweeps its row three times
  (its statistics in float64, then the write), recomputing the steps before it each time
  instead of keeping the row anywhere; the op's result is rounded to the dtype, then the
  steps after it (``prog[split:]``) run on it (the interpreter's second stage).
* T_REDUCE_ALL: block (0, 0) alone (the launch has one block) walks every entry and outer
  index; its threads fold their elements, then the block combines them: deterministic,
  without a second launch.

What a tail sees is the element as stored (rounded to the chain's dtype, a half format's
carrier), as the ops one by one see it. Side inputs are the common area's operands 2..
(broadcast by stride 0). Outputs as on the CPU: ``o`` of the chain's dtype, integer sums to
``oi`` (int64) and integer means to ``of`` (float64). Half precision carries the format's
bits from step to step: every step widens, computes in float32 and rounds, as the ops one by
one do (bit for bit); the attributes ``pattrs`` are float32 and a constant operand is
rounded to the format where a step uses it, as on the CPU; the tails compute in float64 and
round once.
"""
import math

from numba import cuda, float64, int64

from ..abi.common_area import C_M, C_N, C_NOUTER, E_ANCH0, E_ANCH1, E_OFF0, E_OFF1
from ..abi.cuda_tiles import CUDA_THREADS
from ..abi.fused_table import (F_EPS, F_NSIDES, F_SPLIT, F_T0, F_T1, F_TAIL, F_TCODE, T_NONE,
                               T_REDUCE_ALL, T_REDUCE_ROWS, T_ROWWISE)
from ..abi.step_program import MAX_SIDES, SGEO_COLS
from ..abi.vocabulary import LOG_SOFTMAX, RMS_NORM, SOFTMAX
from .fused_tail import (F_MAX, F_SUM, fold, group_fold, group_size, how_of, make_finish,
                         row_scale, row_stat, row_value, side_geometry)
from .half import access
from .steps import make_steps
from .tiles import operand_strides, outer_offset, resolve


def make_fused(nbtype, dtype_kind):
    """The fused kernel of one dtype:
    ``(x, out, out_i64, out_f64, common, entries, prog, pattrs, fctl, side0, ..., side3)``."""
    run_steps = make_steps(nbtype, dtype_kind)
    fmt = access(dtype_kind, nbtype)
    load, store_wide = fmt.load, fmt.store_wide
    finish = make_finish(dtype_kind, store_wide)
    integer = dtype_kind == "integer"
    acc_t = int64 if integer else float64
    lo = -(2 ** 63) if integer else -math.inf
    hi = 2 ** 63 - 1 if integer else math.inf

    def fused(x, o, oi, of, common, entries, prog, pattrs, fctl, s0, s1, s2, s3):
        tail = fctl[F_TAIL]
        code = fctl[F_TCODE]
        split = fctl[F_SPLIT]
        nsteps = prog.shape[0]
        n = common[C_N]
        rows = tail == T_ROWWISE or tail == T_REDUCE_ROWS
        how = how_of(code)
        sweeps = 3 if tail == T_ROWWISE else 1
        eps = float64(pattrs[fctl[F_EPS]])
        geo = cuda.local.array((MAX_SIDES, SGEO_COLS), int64)
        sv = cuda.shared.array(CUDA_THREADS, acc_t)         # reduction partials
        sf = cuda.shared.array(CUDA_THREADS, float64)       # row-wise statistics
        osm, osn = operand_strides(common, 0)
        xsm, xsn = operand_strides(common, 1)
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        if tail == T_REDUCE_ALL:
            if cuda.blockIdx.x != 0 or cuda.blockIdx.y != 0:
                return
            e_lo, e_hi, j0, jstep = 0, entries.shape[0], 0, 1
        else:
            e_lo, e_hi = cuda.blockIdx.x, cuda.blockIdx.x + 1
            j0, jstep = cuda.blockIdx.y, cuda.gridDim.y
        total = acc_t(lo) if how == F_MAX else (acc_t(hi) if how != F_SUM else acc_t(0))
        for e in range(e_lo, e_hi):
            r0, v0 = resolve(entries[e, E_OFF0], entries[e, E_ANCH0], common[C_M], fctl[F_T0])
            c0, v1 = resolve(entries[e, E_OFF1], entries[e, E_ANCH1], common[C_N], fctl[F_T1])
            if v0 <= 0 or v1 <= 0:
                continue
            # a group of g threads per row (rows), or the whole block over the tile
            g = group_size(nt, v0) if rows else nt
            per_round = nt // g
            lane = tid % g
            first = tid - lane
            count = n if rows else v0 * v1
            width = n if rows else v1
            rounds = (v0 + per_round - 1) // per_round if rows else 1
            j = j0
            while j < common[C_NOUTER]:
                side_geometry(common, fctl[F_NSIDES], j, geo)
                ob = outer_offset(common, 0, j)
                xb = outer_offset(common, 1, j)
                for rd in range(rounds):
                    q = rd * per_round + tid // g
                    active = q < v0 if rows else True
                    rb = r0 + q if rows else r0
                    cb = 0 if rows else c0
                    m1 = 0.0
                    mean = 0.0
                    scale = 0.0
                    for sweep in range(sweeps):
                        soft = code == SOFTMAX or code == LOG_SOFTMAX
                        st = -math.inf if (sweep == 0 and soft) else 0.0
                        acc = total if tail == T_REDUCE_ALL else (
                            acc_t(lo) if how == F_MAX else (
                                acc_t(hi) if how != F_SUM else acc_t(0)))
                        write = tail == T_NONE or (tail == T_ROWWISE and sweep == 2)
                        stages = 2 if (tail == T_ROWWISE and sweep == 2) else 1
                        skip = sweep == 1 and code == RMS_NORM     # rms_norm: one statistic
                        if active and not skip:
                            for i in range(lane, count, g):
                                r = rb + i // width
                                c = cb + i % width
                                w = x[xb + r * xsm + c * xsn]
                                s_lo = 0
                                s_hi = nsteps if tail == T_NONE else split
                                for stage in range(stages):
                                    w = nbtype(run_steps(prog, s_lo, s_hi, pattrs, w, geo, 0,
                                                         r, c, s0, s1, s2, s3))
                                    if stage + 1 < stages:
                                        y = row_value(code, float64(load(w)), m1, mean, scale)
                                        w = nbtype(store_wide(y))
                                        s_lo = split
                                        s_hi = nsteps
                                if write:
                                    o[ob + r * osm + c * osn] = w
                                elif tail == T_ROWWISE:
                                    st = row_stat(code, sweep, st, float64(load(w)), m1, mean)
                                else:
                                    acc = fold(acc, acc_t(load(w)), how)
                        if tail == T_REDUCE_ALL:
                            total = acc
                        elif tail == T_REDUCE_ROWS:
                            sv[tid] = acc
                            group_fold(sv, tid, lane, g, how)
                            if lane == 0 and active:
                                finish(o, oi, of, ob + rb * osm, sv[tid], code, n)
                            cuda.syncthreads()
                        elif tail == T_ROWWISE and sweep < 2:
                            sf[tid] = st
                            group_fold(sf, tid, lane, g, F_MAX if (sweep == 0 and soft)
                                       else F_SUM)
                            if sweep == 0:
                                m1 = sf[first]
                                mean = m1 / n
                            elif active:
                                scale = row_scale(code, sf[first], mean, eps, n)
                            cuda.syncthreads()
                j += jstep
        if tail == T_REDUCE_ALL:
            sv[tid] = total
            group_fold(sv, tid, tid, nt, how)
            if tid == 0:
                finish(o, oi, of, outer_offset(common, 0, 0), sv[0], code,
                       common[C_M] * common[C_N] * common[C_NOUTER])
    return fused
