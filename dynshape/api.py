"""``run`` and ``explain``: the op spec validates and describes the launch, the family's
executor runs it (or, for ``explain``, finds the table it would run)."""
import numpy as np

from dynshape import ops
from dynshape.errors import ArgumentError, SettingError
from dynshape.planning import calibration
from dynshape.runtime import config
from dynshape.runtime import replay
from dynshape.runtime.executor import _EXECUTORS, executor_of
from dynshape.runtime.replay import REPLAY
from dynshape.runtime.targets import get_target


def run(op, *arrays, out=None, target=None, stream=None, **attrs):
    """Run ``op`` on arrays of any shape; returns ``out`` (allocated when None).

    No compilation happens here once the op family's kernels are loaded; the parameter
    table comes from the bucketed cache or is built by the combination algorithm.
    ``target``: the name of a registered target (default: the one the arrays belong to,
    "cpu" for NumPy arrays, "cuda" for device arrays: CuPy, Numba, anything with
    ``__cuda_array_interface__``; the result is then the same kind of device array).
    ``stream``: the CUDA stream of a device call (default: CuPy's current stream). ``op``
    may also be an object with a ``__dynshape_run__`` method (a fused sequence,
    ``dynshape.fuse``), which then runs the call.
    """
    sig = None
    if target is None and type(op) is str:
        sig = replay.signature(op, arrays, out, attrs)
        if sig is not None:
            result = REPLAY.run(sig, arrays, out)
            if result is not None:
                return result
    elif not isinstance(op, str) and hasattr(op, "__dynshape_run__"):
        return op.__dynshape_run__(*arrays, out=out, **attrs)
    spec = ops.get(op)
    executor = _EXECUTORS.get(spec.executor) or executor_of(spec.executor)
    if target == "cuda" or (target is None and sig is None and _on_device(arrays, out)):
        from dynshape.cuda.call import run_device
        get_target("cuda")
        return run_device(spec, executor, arrays, out, attrs, stream)
    if stream is not None:
        raise ArgumentError(f"{op}: stream= applies to device arrays only")
    launch = spec.prepare(arrays, out, attrs)
    if target is not None:
        launch.target = get_target(target).name
    result = executor.run(launch)
    if sig is not None:
        REPLAY.record(sig, executor, launch, arrays, out, attrs)
    if launch.finalize is not None:
        result = launch.finalize(result)
    return result


def _on_device(arrays, out):
    """Whether any operand may be a device array (checked without importing CUDA)."""
    for a in (*arrays, out):
        t = type(a)
        if t is np.ndarray or a is None or t in (int, float, bool):
            continue
        if hasattr(t, "__cuda_array_interface__") or hasattr(t, "__dlpack_device__") \
                or t.__name__ == "FakeCUDAArray":
            from dynshape.cuda.arrays import is_device_array
            if is_device_array(a):
                return True
    return False


def _layout_only(a):
    """A device array's layout as a memory-less NumPy array (other values unchanged)."""
    if type(a) is np.ndarray or not _on_device((a,), None):
        return a
    from dynshape.cuda.arrays import info
    lay = info(a)
    return np.lib.stride_tricks.as_strided(np.zeros(1, lay.dtype), lay.shape, lay.strides,
                                           writeable=False)


def run_launch(spec, launch):
    """Run a prepared launch of op spec ``spec`` through its executor (for callers that
    amend the launch first, e.g. a fused sequence giving a matmul its epilogue program)."""
    result = executor_of(spec.executor).run(launch)
    if launch.finalize is not None:
        result = launch.finalize(result)
    return result


def explain(op, *arrays_or_shapes, dtype="float32", target=None, **attrs):
    """The ParamTable the call would use (None for an empty result). Shapes (tuples) stand
    for C-contiguous arrays of ``dtype``; device arrays for their layout on the cuda target;
    nothing is computed and no memory is touched."""
    if not isinstance(op, str) and hasattr(op, "__dynshape_explain__"):
        return op.__dynshape_explain__(*arrays_or_shapes, dtype=dtype, **attrs)
    spec = ops.get(op)
    if target is None and _on_device(arrays_or_shapes, None):
        target = "cuda"
    arrays = [_placeholder(a, dtype) if isinstance(a, (tuple, list)) else _layout_only(a)
              for a in arrays_or_shapes]
    with ops.planning():
        launch = spec.prepare(arrays, None, attrs)
        if target is not None:
            launch.target = get_target(target).name
        shapes = tuple(tuple(a.shape) for a in arrays)
        table = executor_of(spec.executor).explain(launch)
    if table is not None:
        # the latest call explained with this (bucket-shared) table: describe() and the
        # picture speak in its coordinates (see geometry.call_geometry)
        from dynshape.pictures.calls import Call, detached
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
    return ops.placeholder(shape, ops.as_dtype(dtype))


# ---- the ops, the table cache and its policies ----------------------------------------------
def known_ops():
    """The names of all ops ``run`` accepts, sorted."""
    return ops.known()


def describe_ops():
    """One dict per op: ``name``, ``family``, ``dtypes`` (accepted input dtypes) and
    ``attributes`` (name -> default), sorted by family and name."""
    return ops.describe()


def cache_stats():
    """Table-cache counters: tables, max_tables, hits, misses, evictions, optimized_swaps,
    tables_built, tables_loaded, tables_saved, tables_rejected, save_errors, pending."""
    return config.cache.stats()


def clear_cache():
    """Drop every cached table and the exact-layout memo (and the half-precision lookup
    tables of unary ops); reset the counters."""
    from dynshape.ops import lookup
    config.cache.clear()
    lookup.clear()


def set_policy(policy):
    """How tables are built on a cache miss: "background", "simplified" or "optimized"."""
    config.set_policy(policy)


def set_cache_limit(max_tables):
    """Keep at most ``max_tables`` parameter tables in memory (least recently used go first)."""
    if isinstance(max_tables, bool) or not isinstance(max_tables, int) or max_tables < 1:
        raise SettingError(f"cache limit must be a whole number >= 1, got {max_tables!r}")
    config.cache.max_tables = max_tables


def wait_optimized():
    """Block until background optimizations are swapped into the cache."""
    config.cache.wait()


def set_table_dir(path):
    """Persist parameter tables under ``path`` (str or PathLike; created on the first save),
    or stop persisting with None. Default: the ``DYNSHAPE_TABLE_DIR`` environment variable.

    Files: ``<path>/<catalog hash>/<key hash>.npz`` (format: param_tables/README.md). Policies
    "background" and "optimized" load a saved table on a cache miss instead of building it
    and save every optimized table they build; "simplified" ignores the directory. A file
    that is corrupt or from another catalog is ignored with a TableStoreWarning and rebuilt."""
    config.set_table_dir(path)
    calibration.apply()         # this host's calibration may live in the new directory


def table_dir():
    """The table directory in use (absolute path), or None."""
    return config.table_dir()


def warmup(op, *shapes_or_arrays, dtype="float32", **attrs):
    """Build the optimized table of a call now and save it in the table directory (the
    fixed-shape scenario: call at initialisation; a later process loads the table instead of
    building it). Arguments as for :func:`explain`; nothing is computed. A table already
    saved is loaded, a cached simplified one is replaced. Returns the ParamTable (None for
    an empty result). Kernels are not loaded here: see :func:`dynshape.warm`."""
    with config.policy_scope("warmup"):
        return explain(op, *shapes_or_arrays, dtype=dtype, **attrs)


def last_table():
    """The ParamTable used by the latest ``run`` (or ``explain``/``warmup``) of the calling
    thread, or None. With the background policy it shows whether a call ran the simplified
    table or the optimized one swapped in later (``last_table().variant``). A call with an
    empty result runs no table and leaves it unchanged."""
    return config.cache.last_table()


calibration.apply()
