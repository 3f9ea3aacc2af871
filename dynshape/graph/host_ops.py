"""Host ops: shape arithmetic and data movement in NumPy (run once per call on small
tensors, or as views), and the ops no kernel family covers.

Each op is ``fn(inputs, attrs) -> list of outputs``; ``inputs`` holds NumPy arrays (None for
an omitted optional input), ``attrs`` the node's attributes (ONNX names and defaults).
"""
import math

import numpy as np

from dynshape.graph.errors import ModelError


def _axes(attrs, inputs, index, name="axes"):
    """Axes from an input (newer opsets) or an attribute (older), or None."""
    if len(inputs) > index and inputs[index] is not None:
        return [int(a) for a in np.asarray(inputs[index]).reshape(-1)]
    a = attrs.get(name)
    return None if a is None else [int(v) for v in a]


def shape(inputs, attrs):
    s = np.array(inputs[0].shape, dtype=np.int64)
    start, end = attrs.get("start", 0), attrs.get("end")
    return [s[start:end]]


def reshape(inputs, attrs):
    x, target = inputs[0], np.asarray(inputs[1]).tolist()
    if not attrs.get("allowzero", 0):
        target = [x.shape[i] if v == 0 else v for i, v in enumerate(target)]
    return [x.reshape(target)]


def flatten(inputs, attrs):
    x = inputs[0]
    axis = attrs.get("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


def squeeze(inputs, attrs):
    axes = _axes(attrs, inputs, 1)
    x = inputs[0]
    return [np.squeeze(x, axis=tuple(axes)) if axes else np.squeeze(x)]


def unsqueeze(inputs, attrs):
    axes = _axes(attrs, inputs, 1)
    x = inputs[0]
    rank = x.ndim + len(axes)
    for a in sorted(a % rank for a in axes):
        x = np.expand_dims(x, a)
    return [x]


def concat(inputs, attrs):
    return [np.concatenate([i for i in inputs if i is not None], axis=attrs["axis"])]


def split(inputs, attrs, n_out):
    x, axis = inputs[0], attrs.get("axis", 0)
    sizes = _axes(attrs, inputs, 1, "split")
    if sizes is None:
        n = x.shape[axis]
        k = -(-n // n_out)
        sizes = [min(k, n - i * k) for i in range(n_out)]
    # views by slicing (np.split, through array_split and swapaxes, took 7.5 us for 3 parts)
    axis = axis + x.ndim if axis < 0 else axis
    if sum(sizes) != x.shape[axis] or any(v < 0 for v in sizes):
        raise ModelError(f"Split: parts of sizes {sizes} do not add up to the "
                         f"{x.shape[axis]} elements of axis {axis} (input shape {x.shape})")
    lead = (slice(None),) * axis
    out, start = [], 0
    for v in sizes:
        out.append(x[lead + (slice(start, start + v),)])
        start += v
    return out


def slice_(inputs, attrs):
    x = inputs[0]
    if len(inputs) > 1:
        starts, ends = inputs[1], inputs[2]
        axes = inputs[3] if len(inputs) > 3 and inputs[3] is not None else range(len(starts))
        steps = inputs[4] if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts)
    else:
        starts, ends = attrs["starts"], attrs["ends"]
        axes = attrs.get("axes", range(len(starts)))
        steps = [1] * len(starts)
    idx = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        n = x.shape[int(a)]
        s, e, st = int(s), int(e), int(st)
        s = max(-n - 1, min(n, s)) if st < 0 else max(-n, min(n, s))
        e = max(-n - 1, min(n, e))
        idx[int(a)] = slice(s, e if e >= -n else None, st) if st < 0 else slice(s, e, st)
    return [x[tuple(idx)]]


def gather(inputs, attrs):
    x, idx = inputs
    return [np.take(x, idx.astype(np.int64), axis=attrs.get("axis", 0))]


def cast(inputs, attrs):
    from onnx import helper
    return [inputs[0].astype(helper.tensor_dtype_to_np_dtype(attrs["to"]))]


def where(inputs, attrs):
    return [np.where(*inputs)]


def expand(inputs, attrs):
    x, s = inputs
    return [np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(int(v) for v in s)))]


def range_(inputs, attrs):
    start, limit, delta = (np.asarray(v).reshape(()) for v in inputs)
    return [np.arange(start, limit, delta, dtype=np.asarray(inputs[0]).dtype)]


def constant_of_shape(inputs, attrs):
    v = attrs.get("value")
    v = np.zeros(1, np.float32) if v is None else np.asarray(v).reshape(-1)
    return [np.full(tuple(int(d) for d in inputs[0]), v[0], dtype=v.dtype)]


def constant(inputs, attrs):
    for k in ("value", "value_float", "value_int", "value_floats", "value_ints"):
        if k in attrs:
            v = attrs[k]
            dt = np.float32 if "float" in k else (np.int64 if "int" in k else None)
            return [np.asarray(v, dtype=dt)]
    raise ModelError(f"Constant: no supported value attribute in {sorted(attrs)}")


def identity(inputs, attrs):
    return [inputs[0]]


def dropout(inputs, attrs, n_out):
    if len(inputs) > 2 and inputs[2] is not None and bool(np.asarray(inputs[2]).reshape(-1)[0]):
        raise ModelError("Dropout in training mode (training_mode=True) is not supported; "
                         "dynshape runs inference: pass training_mode=False or omit it")
    out = [inputs[0]]
    if n_out > 1:
        out.append(np.ones(inputs[0].shape, dtype=bool))
    return out


def erf(inputs, attrs):
    x = inputs[0]
    return [np.vectorize(math.erf, otypes=[x.dtype])(x) if x.size else x.copy()]


def _cmp(fn):
    return lambda inputs, attrs: [fn(inputs[0], inputs[1])]


equal, less, greater = _cmp(np.equal), _cmp(np.less), _cmp(np.greater)
less_or_equal, greater_or_equal = _cmp(np.less_equal), _cmp(np.greater_equal)
and_, or_ = _cmp(np.logical_and), _cmp(np.logical_or)


def not_(inputs, attrs):
    return [np.logical_not(inputs[0])]


#: op type -> (fn, takes the number of outputs)
HOST_OPS = {
    "Shape": (shape, False), "Reshape": (reshape, False), "Flatten": (flatten, False),
    "Squeeze": (squeeze, False), "Unsqueeze": (unsqueeze, False), "Concat": (concat, False),
    "Split": (split, True), "Slice": (slice_, False), "Gather": (gather, False),
    "Cast": (cast, False), "Where": (where, False), "Expand": (expand, False),
    "Range": (range_, False), "ConstantOfShape": (constant_of_shape, False),
    "Constant": (constant, False), "Identity": (identity, False), "Dropout": (dropout, True),
    "Erf": (erf, False), "Equal": (equal, False), "Less": (less, False),
    "Greater": (greater, False), "LessOrEqual": (less_or_equal, False),
    "GreaterOrEqual": (greater_or_equal, False), "Not": (not_, False), "And": (and_, False),
    "Or": (or_, False),
}
