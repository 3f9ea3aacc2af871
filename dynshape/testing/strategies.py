"""Hypothesis strategies: shapes, strided views, tail-mode sets, tables and shapes inside a
table's bucket. Needs the ``test`` extra (hypothesis)."""
from dataclasses import dataclass

import numpy as np
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.tail_mode import TailMode

from dynshape.extras import require
from dynshape.ops import as_dtype
from dynshape.tables.bucket import bucket
from dynshape.planning.plane import Tiling
from dynshape.tables.param_table import ParamTable

st = require("hypothesis.strategies", "dynshape.testing strategies")


def shapes(max_rank=6, max_side=40, min_side=0):
    """Shapes of rank 0..max_rank, with 0- and 1-sized dimensions well represented."""
    side = st.one_of(st.sampled_from([0, 1, 1, 2, 3]), st.integers(min_side, max_side))
    return st.lists(side, min_size=0, max_size=max_rank).map(tuple)


def views(draw_shape, dtype=np.float32, allow_negative=True):
    """Strategy: arrays of the given shape that are views with random strides (sliced with
    steps, negative steps, transposed), over random data. ``dtype`` is a NumPy dtype or its
    name, "bfloat16" (``ml_dtypes``) included."""
    dtype = as_dtype(dtype)

    @st.composite
    def _v(draw):
        shape = draw_shape if isinstance(draw_shape, tuple) else draw(draw_shape)
        steps = [draw(st.sampled_from([1, 1, 2, 3] + ([-1, -2] if allow_negative else [])))
                 for _ in shape]
        base_shape = [max(1, n) * abs(s) for n, s in zip(shape, steps)]
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        base = (rng.standard_normal(base_shape) * 4).astype(dtype)
        if np.dtype(dtype).kind in "iu":
            base = rng.integers(-50, 50, size=base_shape).astype(dtype)
        sl = tuple(slice(None, n * s, s) if s > 0 else slice(None, None, s)
                   for n, s in zip(shape, steps))
        v = base[sl]
        v = v[tuple(slice(0, n) for n in shape)] if shape else base.reshape(())[...]
        if v.ndim >= 2 and draw(st.booleans()):
            perm = draw(st.permutations(range(v.ndim)))
            inv = np.argsort(perm)
            v = np.ascontiguousarray(v.transpose(perm)).transpose(inv) if draw(st.booleans()) \
                else v
        assert v.shape == tuple(shape)
        return v
    return _v()


def tail_mode_sets():
    """Non-empty sets of allowed tail modes (VARIABLE_FULL is always possible)."""
    return st.sets(st.sampled_from(list(TailMode))).map(
        lambda s: frozenset(s | {TailMode.VARIABLE_FULL}))


@dataclass
class TableCase:
    table: ParamTable
    shape: tuple          # (m, n) the table was built for
    tiling: Tiling


@st.composite
def tables(draw, family="unary", op="relu", dtype="float32", variant=None, max_side=3000):
    """Strategy: a (table, shape) from the combination algorithm for a random inner plane,
    random allowed tail modes and layout, with the simplified or the optimized variant."""
    fam = CATALOG.families[family]
    m = draw(st.one_of(st.integers(1, 4), st.integers(1, 200)))
    n = draw(st.one_of(st.integers(1, 40), st.integers(1, max_side)))
    modes = draw(tail_mode_sets())
    strided = draw(st.booleans())
    w = min(t[2] for t in fam.tiles if t[1] > t[2])
    bk = (bucket(m, fam.quanta[0]), bucket(n, fam.quanta[1], w))
    tiling = Tiling(CATALOG, family, op, dtype, bk, (m, n), draw(st.integers(1, 3)), strided,
                    modes)
    variant = variant or draw(st.sampled_from(["simplified", "optimized"]))
    comb = tiling.simplified() if variant == "simplified" else tiling.optimized()
    t = ParamTable(family, op, dtype, "cpu", CATALOG.hash, bk, comb.entries, np.zeros(0),
                   2, CATALOG.family_base(family, dtype), fam.op_base, comb.variant, comb.cost,
                   comb.description, (m, n))
    return TableCase(t, (m, n), tiling)


def sizes_in_bucket(table):
    """Strategy: a plane shape anywhere in the table's bucket (the table must serve it)."""
    (lo0, hi0), (lo1, hi1) = table.bucket
    return st.tuples(st.integers(lo0 + 1, hi0), st.integers(lo1 + 1, hi1))


@st.composite
def chunk_layouts(draw, shape, max_chunks=4, whole=()):
    """Irregular chunks for an array of ``shape`` (as dask's ``chunks=``): per dimension a
    random split into at most ``max_chunks`` non-empty parts of random lengths (dimensions
    in ``whole`` stay one chunk; a zero-length dimension is one empty chunk)."""
    layout = []
    for d, n in enumerate(shape):
        if n == 0 or d in whole:
            layout.append((n,))
            continue
        k = draw(st.integers(1, min(max_chunks, n)))
        cuts = sorted(draw(st.lists(st.integers(1, n - 1), min_size=k - 1, max_size=k - 1,
                                    unique=True))) if k > 1 else []
        edges = [0] + cuts + [n]
        layout.append(tuple(b - a for a, b in zip(edges[:-1], edges[1:])))
    return tuple(layout)


@st.composite
def dags(draw, max_nodes=14, devices=("cpu", "host"), density=0.3):
    """A random operator DAG for partitioning (``dynshape.partitioning.graph``'s
    attributes): nodes 0..n-1 in execution order, edges only from lower to higher numbers,
    each node with a non-empty random set of supporting ``devices``, compute and bytes;
    sinks become graph outputs (data output nodes)."""
    from dynshape.partitioning.graph import nx
    n = draw(st.integers(1, max_nodes))
    g = nx().DiGraph()
    for k in range(n):
        devs = draw(st.sets(st.sampled_from(devices), min_size=1))
        g.add_node(k, op=draw(st.sampled_from(["Conv", "Add", "Relu", "Shape", "MatMul"])),
                   devices=devs, compute=draw(st.integers(0, 5)), bytes=draw(st.integers(1, 64)),
                   order=k, kind="op")
    for v in range(1, n):
        for u in range(v):
            if draw(st.floats(0, 1)) < density:
                g.add_edge(u, v, bytes=g.nodes[u]["bytes"])
    for k, s in enumerate([x for x in list(g.nodes) if g.out_degree(x) == 0]):
        name = f"output:{s}"
        g.add_node(name, op="Output", devices=set(devices), compute=0, bytes=1, order=n + k,
                   kind="output")
        g.add_edge(s, name, bytes=1)
    return g
