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

import numba
import numpy as np
from dynshape_kernels import drivers
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.matmul_table import TABLE_COLS
from dynshape_kernels.abi.step_program import MAX_SIDES, empty_program
from dynshape_kernels.abi.tiles import MATMUL_NSLOTS as NSLOTS, matmul_slots as _slots_for

from dynshape.runtime import config
from dynshape.tables.bucket import bucket
from dynshape.api import register_executor
from dynshape.errors import TableFormatError
from dynshape.runtime.plane import via_temporary_out
from dynshape.runtime.layout import broadcast_strides, element_strides, flat_view, same_view
from dynshape.planning.matmul import combine
from dynshape.tables.param_table import TABLE_CLASSES, ParamTable

TARGET = "cpu"
QUANTA = CATALOG.families["matmul"].quanta   # (M and N buckets); K and batch use 16 and 1


class MatmulTable(ParamTable):
    """Output tiles ``(slot, m0, n0, tm, tn, batch)`` (int64 entries) for every problem of a
    bucket: ``bucket`` = ((lo, hi] of M, N, K, batch count); ``shape`` = the (M, N, K, batch)
    it was built for (the bucket's upper ends). A ParamTable: saved, loaded and checked like
    every table (no common area: a call's sizes, strides and batch offsets are arguments)."""

    @classmethod
    def of(cls, dtype, bucket, shape, comb):
        return cls("matmul", "matmul", dtype, TARGET, CATALOG.hash, bucket, comb.entries,
                   np.zeros(0, np.int64), 3, CATALOG.family_base("matmul", dtype), 0,
                   comb.variant, comb.cost, comb.description, shape)

    def __len__(self):
        return len(self.entries)

    def kernel_ids(self):
        return self.id_base + self.entries[:, 0]

    def validate(self, catalog=CATALOG):
        """Raise TableFormatError unless every row names a slot of the catalog, fits its
        macro tile and lies inside the built shape, and no output element is listed twice."""
        e = self.entries
        if e.ndim != 2 or e.shape[1] != TABLE_COLS:
            raise TableFormatError(f"matmul table: entries must be (E, {TABLE_COLS}), got "
                                   f"{e.shape}")
        if self.dtype not in catalog.families["matmul"].dtypes or \
                self.id_base != catalog.family_base("matmul", self.dtype):
            raise TableFormatError(f"matmul table: no matmul kernels for {self.dtype} at id "
                                   f"{self.id_base} in the catalog")
        if self.shape is None or len(self.shape) != 4 or len(self.bucket) != 4 or any(
                not lo <= s <= hi for s, (lo, hi) in zip(self.shape, self.bucket)):
            raise TableFormatError(f"matmul table: shape {self.shape} is not in its bucket "
                                   f"{self.bucket}")
        M, N, _, nb = self.shape
        if len(e) == 0:
            return
        if e[:, 0].min() < 0 or e[:, 0].max() >= NSLOTS:
            raise TableFormatError(f"matmul table: slot outside 0..{NSLOTS - 1}")
        cfg = np.array(_slots_for(self.dtype), dtype=np.int64)
        mc, nc = cfg[e[:, 0], 2], cfg[e[:, 0], 3]
        if ((e[:, 3] < 1) | (e[:, 4] < 1) | (e[:, 3] > mc) | (e[:, 4] > nc)).any():
            raise TableFormatError("matmul table: a tile is empty or exceeds its slot's "
                                   "macro tile")
        if ((e[:, 1] < 0) | (e[:, 2] < 0) | (e[:, 5] < 0) | (e[:, 1] >= M) | (e[:, 2] >= N)
                | (e[:, 5] >= nb)).any():
            raise TableFormatError("matmul table: a tile starts outside the built shape")
        # exactly-once coverage of every batch's M x N: the tiles form a grid whose row
        # and column intervals partition [0, M) and [0, N), each cell listed once
        rows = np.unique(e[:, [1, 3]], axis=0)
        cols = np.unique(e[:, [2, 4]], axis=0)
        for iv, size in ((rows, M), (cols, N)):
            ends = iv[:, 0] + iv[:, 1]
            if iv[0, 0] != 0 or ends[-1] != size or (iv[1:, 0] != ends[:-1]).any():
                raise TableFormatError("matmul table: the tiles do not cover the output "
                                       "exactly once")
        cells = np.unique(e[:, [1, 2, 5]], axis=0)
        if len(cells) != len(e) or len(e) != len(rows) * len(cols) * nb:
            raise TableFormatError("matmul table: the tiles do not cover the output exactly "
                                   "once")

    def describe(self, catalog=None, limit=20):
        (ml, mh), (nl, nh), (kl, kh), (bl, bh) = self.bucket
        rows = [f"ParamTable matmul/{self.dtype} on {self.target} ({self.variant}), catalog "
                f"{self.catalog_hash}",
                f"  bucket: M in ({ml}, {mh}], N in ({nl}, {nh}], K in ({kl}, {kh}], batches "
                f"in ({bl}, {bh}]; built for M={self.shape[0]} N={self.shape[1]} "
                f"K={self.shape[2]} batches={self.shape[3]}",
                f"  {self.description}; model cost {self.cost / 1e3:.1f} us",
                "  K is walked inside each tile in the slot's K blocks (never tiled, never "
                "overlapped); tiles past the real M/N/batch are clipped by the driver",
                "     kid  slot     m0     n0     tm     tn  batch"]
        from dynshape.tables.geometry import call_lines
        rows[3:3] = call_lines(self)
        for r in self.entries[:limit]:
            rows.append(f"  {self.id_base + r[0]:6d}  {r[0]:4d} {r[1]:6d} {r[2]:6d} {r[3]:6d} "
                        f"{r[4]:6d} {r[5]:6d}")
        if len(self.entries) > limit:
            rows.append(f"  ... {len(self.entries) - limit} more")
        return "\n".join(rows)

    def __repr__(self):
        return f"<MatmulTable {self.dtype} {self.variant} {len(self)} tiles {self.description}>"


TABLE_CLASSES["matmul"] = MatmulTable


def _buckets(M, N, K, nb):
    return (bucket(M, QUANTA[0]), bucket(N, QUANTA[1]), bucket(K, 16), bucket(nb, 1))


def table_key(launch, nthreads):
    M, N, K = launch.extra["mnk"]
    nb = math.prod(launch.extra["batch"])
    a, b = launch.inputs
    a_k_contig = a.shape[-1] <= 1 or a.strides[-1] == a.itemsize
    b_n_contig = b.shape[-1] <= 1 or b.strides[-1] == b.itemsize
    return ("matmul", launch.dtype, TARGET, nthreads, (a_k_contig, b_n_contig),
            _buckets(M, N, K, nb))


def build_table(key, variant):
    _, dtype, _, nthreads, (a_k_contig, b_n_contig), bk = key
    shape = tuple(hi for _, hi in bk)
    comb = combine(*shape, dtype, a_k_contig, b_n_contig, nthreads, variant)
    return MatmulTable.of(dtype, bk, shape, comb)


def lookup(key):
    """The cached (or saved) table of ``key``: policies, background optimization, table
    directory and ``last_table`` as for every family."""
    return config.cache.get_or_build(key, lambda variant: build_table(key, variant),
                                     expect={"family": "matmul", "dtype": key[1],
                                             "bucket": key[5]})


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
    """The empty epilogue program (prog, pattrs, sides, sgeo) of dtype ``dt``."""
    st = _NO_STEPS.get(dt)
    if st is None:
        dummy = np.zeros(1, dt)
        st = _NO_STEPS[dt] = (empty_program(), np.zeros(2, dt), (dummy,) * MAX_SIDES,
                              np.zeros((MAX_SIDES, 4), np.int64))
    return st


def _overlaps(out, *arrays):
    return any(x is not None and x.size and np.may_share_memory(out, x) for x in arrays)


def run_matmul(launch):
    out = launch.out
    ex = launch.extra
    if out.size == 0:
        return launch.result
    if element_strides(out) is None:
        return via_temporary_out(launch, run_matmul)
    a, b = launch.inputs
    cin, bias = ex["cin"], ex["bias"]
    if _overlaps(out, a, b, bias) or (cin is not None and _overlaps(out, cin)
                                      and not same_view(out, cin)):
        # the driver requires C disjoint from its inputs (C_in may be exactly C)
        if cin is not None and _overlaps(out, cin):
            ex["cin"] = cin = cin.copy()
        return via_temporary_out(launch, run_matmul)
    if any(element_strides(x) is None for x in (a, b)):
        launch.inputs = a, b = [np.ascontiguousarray(x) for x in (a, b)]
    M, N, K = ex["mnk"]
    dt = out.dtype
    nthreads = numba.get_num_threads()
    table = lookup(table_key(launch, nthreads))
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
    drivers.get("matmul", launch.dtype)(
        table.entries, i(M), i(N), i(K), boffs, ab, i(ars), i(acs), bb, i(brs), i(bcs),
        cb, i(crs), i(ccs), float(ex["alpha"]), float(beta), ib, i(irs), i(ics),
        sb, i(so), i(sst), i(hb), i(ex["act"]), prog, pattrs, sides, sgeo, i(nthreads))
    config.counters["driver_calls"] += 1
    return launch.result


def explain_matmul(launch):
    if launch.out.size == 0:
        return None
    return lookup(table_key(launch, numba.get_num_threads()))


register_executor("matmul", run_matmul, explain_matmul)
