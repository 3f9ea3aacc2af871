"""``run`` and ``explain``: validate, look the table up (or build it), one driver call."""
from dynshape import ops
from dynshape.runtime import plane as executor
import numpy as np

from dynshape.errors import ArgumentError, DtypeError

_EXECUTORS = {"plane": (executor.run_plane, executor.explain_plane)}


def register_executor(name, run, explain):
    _EXECUTORS[name] = (run, explain)


def run(op, *arrays, out=None, **attrs):
    """Run ``op`` on NumPy arrays of any shape; returns ``out`` (allocated when None).

    No compilation happens here once the op family's kernels are loaded; the parameter
    table comes from the bucketed cache or is built by the combination algorithm.
    ``op`` may also be an object with a ``__dynshape_run__`` method (a fused sequence,
    ``dynshape.fuse``), which then runs the call.
    """
    if not isinstance(op, str) and hasattr(op, "__dynshape_run__"):
        return op.__dynshape_run__(*arrays, out=out, **attrs)
    spec = ops.get(op)
    launch = spec.prepare(arrays, out, attrs)
    result = _EXECUTORS[spec.executor][0](launch)
    if launch.finalize is not None:
        result = launch.finalize(result)
    return result


def run_launch(spec, launch):
    """Run a prepared launch of op spec ``spec`` through its executor (for callers that
    amend the launch first, e.g. a fused sequence giving a matmul its epilogue program)."""
    result = _EXECUTORS[spec.executor][0](launch)
    if launch.finalize is not None:
        result = launch.finalize(result)
    return result


def explain(op, *arrays_or_shapes, dtype="float32", **attrs):
    """The ParamTable the call would use (None for an empty result). Shapes (tuples) stand
    for C-contiguous arrays of ``dtype``; nothing is computed and no memory is touched."""
    if not isinstance(op, str) and hasattr(op, "__dynshape_explain__"):
        return op.__dynshape_explain__(*arrays_or_shapes, dtype=dtype, **attrs)
    spec = ops.get(op)
    arrays = [_placeholder(a, dtype) if isinstance(a, (tuple, list)) else a
              for a in arrays_or_shapes]
    with ops.planning():
        launch = spec.prepare(arrays, None, attrs)
        shapes = tuple(tuple(a.shape) for a in arrays)
        table = _EXECUTORS[spec.executor][1](launch)
    if table is not None:
        # the latest call explained with this (bucket-shared) table: describe() and the
        # picture speak in its coordinates (see geometry.call_geometry)
        from dynshape.tables.geometry import Call, detached
        dt = str(arrays[0].dtype) if arrays else str(dtype)
        table.call = Call(op, spec.executor, dt, shapes, tuple(launch.out.shape),
                          detached(launch))
    return table


def _placeholder(shape, dtype):
    try:
        shape = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise ArgumentError(f"a shape must be a tuple of integers, got {shape!r}") from None
    if any(s < 0 for s in shape):
        raise ArgumentError(f"negative dimension in shape {shape}")
    try:
        np.dtype(dtype)
    except TypeError:
        raise DtypeError(f"unknown dtype {dtype!r}; accepted: a NumPy dtype name such as "
                         f"float32, float64, int32, int64 (see: dynshape ops)") from None
    return ops.placeholder(shape, dtype)
