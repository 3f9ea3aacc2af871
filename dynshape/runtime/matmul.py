"""Executor of the matmul family: bucketed table lookup, per-batch offsets, ONE driver call.

The table (:class:`MatmulTable`) tiles the M x N output of every batch; it is built for the
upper ends of the (M, N, K, batch count) bucket and the driver clips tiles to the real
sizes, so every shape of a bucket shares it. Batch dimensions of any rank, broadcasting and
strides become one int64 array of per-batch element offsets (A, B, C, C_in), so operands are
read in place whatever their layout; nothing is copied except an output that overlaps an
input (computed into a temporary, then copied).

Epilogue program: ``launch.extra["steps"] = (prog, pattrs, sides, sgeo)`` (see
``dynshape_kernels.cpu.steps``) runs elementwise steps on every output tile before it is
stored; the tile origin is (row, column) of the output matrix of flattened batch ``b``, so a
side input's ``sgeo`` outer stride steps over the flattened batch index. Fused sequences that
start with a matmul set it; ``run("matmul")`` leaves it empty.
"""
import math

import numpy as np
from dynshape_kernels.abi.step_program import MAX_SIDES, empty_program
from dynshape_kernels.abi.storage import carried_compute
from dynshape_kernels.catalog import CATALOG

from dynshape.planning.matmul import combine
from dynshape.runtime import config
from dynshape.runtime.executor import Executor, register_executor, via_temporary_out
from dynshape.runtime.targets import get_target
from dynshape.runtime.layout import (broadcast_strides, element_strides, flat_view, flattener,
                                     kernel_view_dtype, same_view)
from dynshape.runtime.replay import epilogue_fill, positions
from dynshape.tables.bucket import bucket
from dynshape.tables.key import TableKey
from dynshape.tables.matmul_table import MatmulTable

QUANTA = CATALOG.families["matmul"].quanta   # (M and N buckets); K and batch use 16 and 1


def _buckets(M, N, K, nb):
    return (bucket(M, QUANTA[0]), bucket(N, QUANTA[1]), bucket(K, 16), bucket(nb, 1))


def _batch_offsets(batch, x, base):
    """Element offsets of every batch's (rows, cols) matrix of ``x`` (broadcast over the
    batch shape), C order, as an int64 vector."""
    st = broadcast_strides(batch, x.shape[:-2], element_strides(x)[:-2])
    offs = np.full(batch, base, dtype=np.int64) if batch else np.array(base, np.int64)
    for d, (n, s) in enumerate(zip(batch, st)):
        if s and n > 1:
            shape = [1] * len(batch)
            shape[d] = n
            offs = offs + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return np.ascontiguousarray(offs, dtype=np.int64).reshape(-1)


def _operand(x, dt):
    """(flat buffer, offset of x[0...0], row stride, col stride) of a matrix stack."""
    if x.size == 0:
        return np.zeros(1, dt), 0, 0, 0
    buf, off = flat_view(x)
    st = element_strides(x)
    return buf, off, st[-2], st[-1]


_NO_STEPS = {}


def _no_steps(dt):
    """The empty epilogue program (prog, pattrs, sides, sgeo) of kernel dtype ``dt`` (a
    carrier for half precision; ``pattrs`` is of the computed dtype)."""
    st = _NO_STEPS.get(dt)
    if st is None:
        dummy = np.zeros(1, dt)
        st = _NO_STEPS[dt] = (empty_program(), np.zeros(2, carried_compute(dt.name)),
                              (dummy,) * MAX_SIDES, np.zeros((MAX_SIDES, 4), np.int64))
    return st


def _overlaps(out, *arrays):
    return any(x is not None and x.size and np.may_share_memory(out, x) for x in arrays)


class MatmulExecutor(Executor):
    """The memo skips geometry, key and lookup; every call binds its own per-batch offsets
    (``call``), so nothing else is memoized."""
    name = family = "matmul"
    calibrated = False
    model_note = "per-slot rates measured on the project's machine (not measured by dynshape calibrate yet)"

    def signature(self, launch):
        a, b = launch.inputs
        return (launch.target, "matmul", launch.dtype, a.shape, a.strides, b.shape, b.strides,
                launch.out.shape, config.num_threads())

    def operands(self, launch, explain=False):
        out, ex = launch.out, launch.extra
        a, b = launch.inputs
        cin, bias = ex["cin"], ex["bias"]
        if not explain and (_overlaps(out, a, b, bias) or (
                cin is not None and _overlaps(out, cin) and not same_view(out, cin))):
            # the driver requires C disjoint from its inputs (C_in may be exactly C)
            if cin is not None and _overlaps(out, cin):
                ex["cin"] = cin.copy()
            return via_temporary_out(launch, self.run)
        if any(element_strides(x) is None for x in (a, b)):
            launch.inputs = [np.ascontiguousarray(x) for x in (a, b)]

    def geometry(self, launch):
        a, b = launch.inputs
        return {"a_k_contig": a.shape[-1] <= 1 or a.strides[-1] == a.itemsize,
                "b_n_contig": b.shape[-1] <= 1 or b.strides[-1] == b.itemsize}

    def key(self, launch, g, target):
        M, N, K = launch.extra["mnk"]
        nb = math.prod(launch.extra["batch"])
        return TableKey("matmul", "matmul", launch.dtype, target, _buckets(M, N, K, nb),
                        (g["a_k_contig"], g["b_n_contig"]), (), False, config.num_threads())

    def build(self, launch, g, key, variant):
        return build_table(key, variant)

    def bind(self, launch, g, table):
        return None

    def call(self, driver, launch, table, bound):
        _call(driver, launch, table)

    def replay(self, launch, arrays, table, bound):
        """The caller's arrays in any order (``run``'s a, b; a fused sequence's a, b, then
        its side inputs), each operand one of them; an epilogue program's sides too."""
        ex = launch.extra
        a, b = launch.inputs
        steps = ex.get("steps")
        srcs = list(ex.get("side_sources", ())) if steps else []
        idx = positions(arrays, [a, b] + srcs)
        if idx is None or ex["cin"] is not None:
            return None
        args = list(_args(launch, table))
        call, nth = get_target(launch.target).replay_driver("matmul", launch.dtype), args[-1]
        fa, fb, fo = flattener(a), flattener(b), flattener(launch.out)
        ia, ib, isides = idx[0], idx[1], idx[2:]
        pad = args[26][len(isides):]
        fill = epilogue_fill(launch, self.family) if steps else None
        fsides = [(flattener(arrays[j]), j) for j in isides]

        def go(arrays, out):
            if config.num_threads() != nth:
                return False
            if fill is not None:
                fill()
            args[5] = fa(arrays[ia])
            args[8] = fb(arrays[ib])
            args[11] = fo(out)
            if fsides:
                args[26] = tuple([f(arrays[j]) for f, j in fsides]) + pad
            call(*args)
        return go


def _call(driver, launch, table):
    """The driver call with this call's sizes, strides and per-batch offsets."""
    driver(*_args(launch, table))


def _args(launch, table):
    """The matmul driver's arguments for this call (A, B and C buffers at 5, 8 and 11)."""
    out, ex = launch.out, launch.extra
    a, b = launch.inputs
    cin, bias = ex["cin"], ex["bias"]
    M, N, K = ex["mnk"]
    dt = kernel_view_dtype(out.dtype)      # the carrier of a half-precision format
    nthreads = config.num_threads()
    batch = ex["batch"]
    ab, ao, ars, acs = _operand(a, dt)
    bb, bo, brs, bcs = _operand(b, dt)
    cb, co, crs, ccs = _operand(out, dt)
    beta = ex["beta"]
    if cin is not None and beta != 0.0:
        if element_strides(cin) is None:
            cin = np.ascontiguousarray(cin)
        ib, io, irs, ics = _operand(cin, dt)
        ioffs = _batch_offsets(batch, cin, io)
    else:
        beta = 0.0
        ib, irs, ics = np.zeros(1, dt), 0, 0
        ioffs = np.zeros(max(math.prod(batch), 1), np.int64)
    if bias is not None:
        sb, so = flat_view(bias) if bias.size else (np.zeros(1, dt), 0)
        sst, hb = element_strides(bias)[0], 1
    else:
        sb, so, sst, hb = np.zeros(1, dt), 0, 0, 0
    boffs = np.empty((max(math.prod(batch), 1), 4), np.int64)
    boffs[:, 0] = _batch_offsets(batch, a, ao) if K else 0
    boffs[:, 1] = _batch_offsets(batch, b, bo) if K else 0
    boffs[:, 2] = _batch_offsets(batch, out, co)
    boffs[:, 3] = ioffs
    prog, pattrs, sides, sgeo = ex.get("steps") or _no_steps(dt)
    i = np.int64
    return (table.entries, i(M), i(N), i(K), boffs, ab, i(ars), i(acs), bb, i(brs), i(bcs),
            cb, i(crs), i(ccs), float(ex["alpha"]), float(beta), ib, i(irs), i(ics),
            sb, i(so), i(sst), i(hb), i(ex["act"]), prog, pattrs, sides, sgeo, i(nthreads))


def build_table(key, variant):
    """The matmul table of ``key`` (its layout: A's K and B's N contiguous), laid out for the
    upper ends of the bucket."""
    shape = tuple(hi for _, hi in key.bucket)
    a_k_contig, b_n_contig = key.layout
    if key.target != "cpu":
        from dynshape.planning.gpu_matmul import combine_blocks
        return MatmulTable.of(key.dtype, key.target, key.bucket, shape,
                              combine_blocks(*shape, key.dtype, key.target, variant))
    low = (key.bucket[0][0], key.bucket[1][0])       # priced over the bucket's M and N
    comb = combine(*shape, key.dtype, a_k_contig, b_n_contig, key.threads, variant, low)
    return MatmulTable.of(key.dtype, key.target, key.bucket, shape, comb)


def matmul_key(dtype, M, N, K, nb=1, threads=2, layout=(True, True), target="cpu"):
    """The TableKey of a matmul problem (for tools and tests)."""
    return TableKey("matmul", "matmul", dtype, target, _buckets(M, N, K, nb), tuple(layout),
                    (), False, threads)


MATMUL = register_executor(MatmulExecutor())
