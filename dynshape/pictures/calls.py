"""The call an explained table answered (``table.call``, set by ``dynshape.explain``) and
its geometry in the user's coordinates, family by family; ``describe`` lines from it."""
from dataclasses import dataclass, field

import numpy as np

from dynshape.errors import ShapeError
from dynshape.pictures.geometry import _fused_family, _plane_family, _reduce_family, label
from dynshape.pictures.geometry_outputs import conv_family, matmul_family, pool_family


@dataclass
class Call:
    """The call an explained table answered: op, the user's dtype and shapes, the launch."""
    op: str
    executor: str
    dtype: str
    shapes: tuple
    out_shape: tuple
    launch: object = field(repr=False)

    def lines(self, table):
        """Lines for ``table.describe()``: the user's tensor, how it was tiled, the counts."""
        return call_lines(table)


def detached(launch):
    """A copy of ``launch`` whose arrays are stand-ins of the same shape, dtype and strides
    over one element: a cached table that records its latest call pins no user memory."""
    from dynshape.ops import Launch

    def standin(a):
        if not isinstance(a, np.ndarray):
            return a
        return np.lib.stride_tricks.as_strided(np.zeros(1, a.dtype), a.shape, a.strides,
                                               writeable=False)
    return Launch(launch.family, launch.op, launch.dtype, standin(launch.out),
                  [standin(a) for a in launch.inputs], None, None, launch.overlap_ok,
                  launch.table_attrs, None, {k: standin(v) for k, v in launch.extra.items()})


def fused_call(fused, x, sides, out, shape, p):
    """The :class:`Call` of an explained fused sequence (its plane spans the broadcast shape
    of x and the side inputs in C order; the last step may reduce or normalize rows)."""
    from types import SimpleNamespace
    standin = detached(SimpleNamespace(family="fused", op="fused", dtype=str(x.dtype),
                                       out=out, inputs=[x] + list(sides), overlap_ok=False,
                                       table_attrs=(), extra={}))
    standin.extra.update(plane=p, shape=tuple(shape), fused=repr(fused))
    return Call(repr(fused), "fused", str(x.dtype), (tuple(x.shape),)
                + tuple(tuple(a.shape) for a in sides), tuple(out.shape), standin)


def _families():
    return {"plane": _plane_family, "reduce": _reduce_family, "rowwise": _reduce_family,
            "pool": pool_family, "matmul": matmul_family, "conv": conv_family,
            "fused": _fused_family}


def call_geometry(table):
    """The :class:`Geometry` of the latest call explained with ``table`` (``table.call``).
    Raises ShapeError for a table that records no call (built by hand or loaded)."""
    call = getattr(table, "call", None)
    if call is None:
        raise ShapeError("this table records no call (it was not returned by "
                         "dynshape.explain): draw its plane with shape=(rows, columns)")
    return _families()[call.executor](table, call)


def call_lines(table):
    """Lines for ``describe``: the user's tensor, how it was tiled, the counts (empty when
    the table records no call)."""
    if getattr(table, "call", None) is None:
        return []
    geo = call_geometry(table)
    lines = [f"  call: {geo.title()}"] + [f"  {n}" for n in geo.notes]
    lines.append("  entries run: " + ", ".join(f"{n} x {label(c)}" for c, n in
                                                sorted(geo.counts.items(), key=_order)))
    return lines


def _order(item):
    (kind, tile, mode), _ = item
    return ({"full": 0, "tail": 1, "overlap": 2}[kind], tuple(tile), mode or "")
