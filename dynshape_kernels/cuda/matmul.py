"""The CUDA matmul kernel: ``C = act(alpha * A @ B + beta * C_in + bias)`` per output tile.

One block per table entry ``(slot, m0, n0, tm, tn, batch)`` (``abi.matmul_table``), clipped
to the real M, N and batch count. The block walks K in blocks of ``BK``: it stages an
A tile (TM x BK) and a B tile (BK x TN) in shared memory (zero-filled past the edges), then
every thread accumulates its own outputs of the tile (threads stride by the block size, so
a 256-thread block gives each thread TM * TN / 256 accumulators). The epilogue runs while
storing: ``alpha``, ``beta * C_in``, the bias and the activation, then the step program of a
fused sequence led by the matmul (``prog``; none when empty), run on each output element by
the one device step interpreter (``cuda.steps``) with the executor's side geometry ``sgeo``
as it is: side ``k`` at ``sgeo[k, 0] + batch*sgeo[k, 1] + row*sgeo[k, 2] + col*sgeo[k, 3]``
(the CPU epilogue's ``apply_steps`` contract). The driver is called with the CPU matmul
driver's arguments. Half precision stages A and B widened to float32, accumulates and runs
the epilogue in float32 (alpha, beta float32; C_in and bias read in the format) and rounds
each output once (fused steps after it run on the stored value, each rounding to the format).
"""
from numba import cuda

from ..abi.cuda_tiles import CUDA_MATMUL_TILES
from ..abi.matmul_table import M_BATCH, M_M0, M_N0, M_SLOT, M_TM, M_TN
from .half import access
from .scalars import switches
from .steps import make_steps

BK = 16
TMAX = max(t[0] for t in CUDA_MATMUL_TILES)
NMAX = max(t[1] for t in CUDA_MATMUL_TILES)
#: accumulators per thread for the smallest block the kernel is launched with (32 threads,
#: the simulator's); a 256-thread block uses the first TM * TN / 256 of them
MIN_THREADS = 32
ACC = TMAX * NMAX // MIN_THREADS
N_SLOTS = len(CUDA_MATMUL_TILES)
TMS = tuple(t[0] for t in CUDA_MATMUL_TILES)
TNS = tuple(t[1] for t in CUDA_MATMUL_TILES)


def make_matmul(nbtype, kind):
    """The matmul kernel of one float dtype (arguments: see ``MatmulKernel.call``)."""
    unary_op, _ = switches("float")
    fmt = access(kind, nbtype)
    load, store, ctype = fmt.load, fmt.store, fmt.compute
    run_steps = make_steps(nbtype, kind)    # on the stored value: a half one rounds per step
    tms, tns = TMS, TNS

    def matmul(entries, M, N, K, boffs, a, ars, acs, b, brs, bcs, c, crs, ccs, alpha, beta,
               cin, irs, ics, bias, bo, bst, has_bias, act, prog, pattrs, s0, s1, s2, s3,
               sgeo):
        e = cuda.blockIdx.x
        slot = entries[e, M_SLOT]
        m0 = entries[e, M_M0]
        n0 = entries[e, M_N0]
        bt = entries[e, M_BATCH]
        tm = 1
        tn = 1
        for s in range(N_SLOTS):
            if s == slot:
                tm = tms[s]
                tn = tns[s]
        mv = min(entries[e, M_TM], M - m0)
        nv = min(entries[e, M_TN], N - n0)
        if mv <= 0 or nv <= 0 or bt >= boffs.shape[0]:
            return
        ao = boffs[bt, 0]
        bo_ = boffs[bt, 1]
        co = boffs[bt, 2]
        io = boffs[bt, 3]
        sa = cuda.shared.array((TMAX, BK), ctype)
        sb = cuda.shared.array((BK, NMAX), ctype)
        acc = cuda.local.array(ACC, ctype)
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        mine = (tm * tn + nt - 1) // nt
        nsteps = prog.shape[0]
        for q in range(mine):
            acc[q] = 0
        for k0 in range(0, K, BK):
            for i in range(tid, tm * BK, nt):
                r = i // BK
                kk = i - r * BK
                v = ctype(0)
                if r < mv and k0 + kk < K:
                    v = load(a[ao + (m0 + r) * ars + (k0 + kk) * acs])
                sa[r, kk] = v
            for i in range(tid, BK * tn, nt):
                kk = i // tn
                cc = i - kk * tn
                v = ctype(0)
                if cc < nv and k0 + kk < K:
                    v = load(b[bo_ + (k0 + kk) * brs + (n0 + cc) * bcs])
                sb[kk, cc] = v
            cuda.syncthreads()
            for q in range(mine):
                i = tid + q * nt
                if i < tm * tn:
                    r = i // tn
                    cc = i - r * tn
                    s = acc[q]
                    for kk in range(BK):
                        s += sa[r, kk] * sb[kk, cc]
                    acc[q] = s
            cuda.syncthreads()
        for q in range(mine):
            i = tid + q * nt
            if i < tm * tn:
                r = i // tn
                cc = i - r * tn
                if r < mv and cc < nv:
                    v = alpha * acc[q]
                    if beta != 0:
                        v += beta * load(cin[io + (m0 + r) * irs + (n0 + cc) * ics])
                    if has_bias:
                        v += load(bias[bo + (n0 + cc) * bst])
                    if act > 0:
                        v = unary_op(act - 1, v, 0.0, 0.0)
                    w = nbtype(store(v))
                    if nsteps > 0:
                        w = nbtype(run_steps(prog, 0, nsteps, pattrs, w, sgeo, bt, m0 + r,
                                             n0 + cc, s0, s1, s2, s3))
                    c[co + (m0 + r) * crs + (n0 + cc) * ccs] = w
    return matmul
