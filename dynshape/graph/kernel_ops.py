"""Kernel ops: tensor compute on dynshape's static kernels (``dynshape.run``), for the dtypes
the kernels take (float32, float64; int32, int64 where the family has them). Another dtype
(float16, int8, bool, ...) runs the NumPy equivalent on the host, so every model the importer
accepts runs; ``explain`` says which nodes ran where.

Each op is ``fn(inputs, attrs) -> list of outputs`` (ONNX attribute names and defaults).
"""
import numpy as np

from dynshape import api

FLOAT = (np.dtype(np.float32), np.dtype(np.float64))
NUMERIC = FLOAT + (np.dtype(np.int32), np.dtype(np.int64))

_UNARY = {"Relu": "relu", "Abs": "abs", "Neg": "neg", "Exp": "exp", "Log": "log",
          "Sqrt": "sqrt", "Sigmoid": "sigmoid", "Tanh": "tanh", "Reciprocal": "reciprocal"}
_UNARY_NP = {"Relu": lambda x: np.maximum(x, 0), "Abs": np.abs, "Neg": np.negative,
             "Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt,
             "Sigmoid": lambda x: 1 / (1 + np.exp(-x)), "Tanh": np.tanh,
             "Reciprocal": np.reciprocal}
_FLOAT_ONLY = {"Exp", "Log", "Sqrt", "Sigmoid", "Tanh", "Reciprocal"}


def unary(op):
    name, ref = _UNARY[op], _UNARY_NP[op]

    def fn(inputs, attrs):
        x = inputs[0]
        ok = FLOAT if op in _FLOAT_ONLY else NUMERIC
        return [api.run(name, x) if x.dtype in ok else ref(x).astype(x.dtype)]
    return fn


def leaky_relu(inputs, attrs):
    x, a = inputs[0], attrs.get("alpha", 0.01)
    if x.dtype in FLOAT:
        return [api.run("leaky_relu", x, alpha=a)]
    return [np.where(x >= 0, x, a * x).astype(x.dtype)]


def clip(inputs, attrs):
    x = inputs[0]
    lo = inputs[1] if len(inputs) > 1 and inputs[1] is not None else attrs.get("min")
    hi = inputs[2] if len(inputs) > 2 and inputs[2] is not None else attrs.get("max")
    lo = None if lo is None else np.asarray(lo).item()
    hi = None if hi is None else np.asarray(hi).item()
    if x.dtype in NUMERIC:
        return [api.run("clip", x, min=lo, max=hi)]
    return [np.clip(x, lo, hi)]


def gelu(inputs, attrs):
    x = inputs[0]
    approx = attrs.get("approximate", "none")
    approx = approx.decode() if isinstance(approx, bytes) else approx
    return [api.run("gelu", x, approximate=approx)]


_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow",
           "Max": "maximum", "Min": "minimum"}
_BINARY_NP = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": None,
              "Pow": np.power, "Max": np.maximum, "Min": np.minimum}


def binary(op):
    name, ref = _BINARY[op], _BINARY_NP[op]

    def two(a, b):
        if a.dtype == b.dtype and a.dtype in NUMERIC and not (op == "Div" and a.dtype.kind == "i"):
            return api.run(name, a, b)
        if op == "Div":          # ONNX integer division truncates toward zero
            if a.dtype.kind in "iu":
                return (np.trunc(np.true_divide(a, b))).astype(a.dtype)
            return np.true_divide(a, b).astype(a.dtype)
        return ref(a, b).astype(a.dtype)

    def fn(inputs, attrs):
        xs = [i for i in inputs if i is not None]
        out = xs[0]
        for b in xs[1:]:
            out = two(out, b)
        return [out if len(xs) > 1 else out.copy()]
    return fn


def matmul(inputs, attrs):
    a, b = inputs[0], inputs[1]
    bias = attrs.get("_bias")
    act = attrs.get("_activation")
    if a.dtype in FLOAT and a.dtype == b.dtype:
        kw = {}
        if bias is not None:
            kw["bias"] = bias
        if act:
            kw["activation"] = act
        return [api.run("matmul", a, b, **kw)]
    y = np.matmul(a, b)
    if bias is not None:
        y = y + bias
    return [np.maximum(y, 0) if act == "relu" else y]


def gemm(inputs, attrs):
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    kw = dict(alpha=attrs.get("alpha", 1.0), beta=attrs.get("beta", 1.0),
              transA=attrs.get("transA", 0), transB=attrs.get("transB", 0))
    if a.dtype in FLOAT and a.dtype == b.dtype and (c is None or c.dtype == a.dtype):
        return [api.run("gemm", a, b, *([c] if c is not None else []), **kw)]
    a = a.T if kw["transA"] else a
    b = b.T if kw["transB"] else b
    y = kw["alpha"] * (a @ b)
    return [(y + kw["beta"] * c if c is not None else y).astype(a.dtype)]


def _conv_attrs(attrs, nd):
    out = {}
    for k in ("strides", "dilations", "kernel_shape"):
        if k in attrs:
            out[k] = tuple(attrs[k])
    if "pads" in attrs:
        out["pads"] = tuple(attrs["pads"])
    ap = attrs.get("auto_pad", "NOTSET")
    ap = ap.decode() if isinstance(ap, bytes) else ap
    if ap != "NOTSET":
        out["auto_pad"] = ap
    if nd == 1:                  # a 1-D op runs as 2-D over a height of 1
        for k in ("strides", "dilations", "kernel_shape"):
            if k in out:
                out[k] = (1,) + out[k]
        if "pads" in out:
            p = out["pads"]
            out["pads"] = (0, p[0], 0, p[1])
    return out


def conv(inputs, attrs):
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    nd = x.ndim - 2
    kw = _conv_attrs(attrs, nd)
    if attrs.get("group", 1) != 1:
        kw["group"] = attrs["group"]
    if attrs.get("_activation"):
        kw["activation"] = attrs["_activation"]
    if nd == 1:
        x, w = x[:, :, None, :], w[:, :, None, :]
    args = [x, w] + ([b] if b is not None else [])
    y = api.run("conv2d", *args, **kw)
    return [y[:, :, 0, :] if nd == 1 else y]


def pool(kind):
    name = {"MaxPool": "max_pool2d", "AveragePool": "avg_pool2d"}[kind]

    def fn(inputs, attrs):
        x = inputs[0]
        nd = x.ndim - 2
        kw = _conv_attrs(attrs, nd)
        if attrs.get("ceil_mode"):
            kw["ceil_mode"] = True
        if kind == "AveragePool" and attrs.get("count_include_pad"):
            kw["count_include_pad"] = True
        if nd == 1:
            x = x[:, :, None, :]
        y = api.run(name, x, **kw)
        return [y[:, :, 0, :] if nd == 1 else y]
    return fn


def global_average_pool(inputs, attrs):
    x = inputs[0]
    axes = tuple(range(2, x.ndim))
    return [api.run("mean", x, axis=axes, keepdims=True) if x.dtype in FLOAT
            else x.mean(axis=axes, keepdims=True)]


def softmax(name):
    def fn(inputs, attrs):
        x = inputs[0]
        return [api.run(name, x, axis=attrs.get("axis", -1))]
    return fn


def layer_norm(inputs, attrs):
    x = inputs[0]
    w = inputs[1] if len(inputs) > 1 else None
    b = inputs[2] if len(inputs) > 2 else None
    axis, eps = attrs.get("axis", -1), attrs.get("epsilon", 1e-5)
    if x.dtype in FLOAT and not attrs.get("_host"):
        y = api.run("layer_norm", x, w, b, axis=axis, epsilon=eps)
    else:
        y = None
    n_out = attrs.get("_n_out", 1)
    if y is None or n_out > 1:
        # the optional Mean and InvStdDev outputs (and other dtypes) on the host
        axes = tuple(range(axis % x.ndim, x.ndim))
        xf = x.astype(np.float32 if x.dtype != np.float64 else np.float64)
        mean = xf.mean(axis=axes, keepdims=True)
        inv = 1 / np.sqrt(((xf - mean) ** 2).mean(axis=axes, keepdims=True) + eps)
        if y is None:
            y = (xf - mean) * inv
            y = (y * w if w is not None else y)
            y = (y + b if b is not None else y).astype(x.dtype)
        return [y, mean, inv][:n_out]
    return [y]


def reduce(name):
    op = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min"}[name]
    np_fn = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[op]

    def fn(inputs, attrs):
        from dynshape.graph.host_ops import _axes
        x = inputs[0]
        axes = _axes(attrs, inputs, 1)
        keep = bool(attrs.get("keepdims", 1))
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(x.ndim))
        axis = tuple(a % x.ndim for a in axes) if x.ndim else None
        if x.dtype in NUMERIC and x.size:
            y = api.run(op, x, axis=axis, keepdims=keep)
        elif x.size == 0 and op in ("max", "min"):
            # ONNX: the max of nothing is the lowest value (-inf), the min the highest
            shape = tuple(1 if d in axis else n for d, n in enumerate(x.shape)) if keep \
                else tuple(n for d, n in enumerate(x.shape) if d not in axis)
            lo = -np.inf if x.dtype.kind == "f" else (False if x.dtype == bool else
                                                       np.iinfo(x.dtype).min)
            hi = np.inf if x.dtype.kind == "f" else (True if x.dtype == bool else
                                                      np.iinfo(x.dtype).max)
            y = np.full(shape, lo if op == "max" else hi, dtype=x.dtype)
        else:
            y = np_fn(x, axis=axis, keepdims=keep)
        return [np.asarray(y).astype(x.dtype)]
    return fn


def argmax(inputs, attrs):
    x = inputs[0]
    axis = attrs.get("axis", 0)
    keep = bool(attrs.get("keepdims", 1))
    if attrs.get("select_last_index", 0):
        flipped = np.flip(x, axis)
        y = x.shape[axis] - 1 - np.argmax(flipped, axis=axis)
    elif x.dtype in NUMERIC:
        y = api.run("argmax", x, axis=axis)
    else:
        y = np.argmax(x, axis=axis)
    y = np.asarray(y, dtype=np.int64)
    return [np.expand_dims(y, axis) if keep else y]


def batch_norm(inputs, attrs):
    x, scale, b, mean, var = inputs[:5]
    eps = attrs.get("epsilon", 1e-5)
    a = (scale / np.sqrt(var + eps)).astype(x.dtype)
    c = (b - mean * a).astype(x.dtype)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return [api.run("add", api.run("mul", x, a.reshape(shape)), c.reshape(shape))]


def transpose(inputs, attrs):
    """A strided view: dynshape's kernels read any strides, so the next kernel reads the
    permuted layout in place and no copy is made (a Reshape after it copies, as NumPy does)."""
    x = inputs[0]
    perm = attrs.get("perm")
    return [x.transpose(perm) if perm is not None else x.T]


def fused(inputs, attrs):
    """A chain of elementwise nodes run as one dynshape fused sequence (rewrites.py); the
    nodes one by one for a dtype the fused driver does not take, or operands of another
    dtype."""
    x = inputs[0]
    if x.dtype in NUMERIC and all(s.dtype == x.dtype for s in inputs[1:]):
        return [attrs["_fused"](x, **dict(zip(attrs["_sides"], inputs[1:])))]
    chain = attrs["_chain"]
    env = dict(attrs["_consts"])
    env.update(zip(attrs["_side_values"], inputs[1:]))
    env[chain[0].inputs[0]] = x
    for n in chain:
        out = KERNEL_OPS[n.op]([env[i] for i in n.inputs], n.attrs)[0]
        env[n.outputs[0]] = out
    return [out]


#: op type -> fn; the importer's "cpu" ops
KERNEL_OPS = {op: unary(op) for op in _UNARY}
KERNEL_OPS.update({op: binary(op) for op in _BINARY})
KERNEL_OPS.update({
    "LeakyRelu": leaky_relu, "Clip": clip, "Gelu": gelu, "MatMul": matmul, "Gemm": gemm,
    "Conv": conv, "MaxPool": pool("MaxPool"), "AveragePool": pool("AveragePool"),
    "GlobalAveragePool": global_average_pool, "Softmax": softmax("softmax"),
    "LogSoftmax": softmax("log_softmax"), "LayerNormalization": layer_norm,
    "ReduceSum": reduce("ReduceSum"), "ReduceMean": reduce("ReduceMean"),
    "ReduceMax": reduce("ReduceMax"), "ReduceMin": reduce("ReduceMin"), "ArgMax": argmax,
    "BatchNormalization": batch_norm, "Transpose": transpose, "DsFused": fused,
})
