"""NumPy implementations of the kernel ops, for nodes a partition places on the host
("host" device): same semantics as kernel_ops, computed by NumPy. Conv and pooling have
none (they run on dynshape's kernels only)."""
import math

import numpy as np

from dynshape.graph import kernel_ops as K


def _softmax(x, axis, log=False):
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    s = e.sum(axis=axis, keepdims=True)
    return ((x - m) - np.log(s) if log else e / s).astype(x.dtype)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _gelu(x, approx):
    x64 = x.astype(np.float64)
    if approx == "tanh":
        y = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
    else:
        y = 0.5 * x64 * (1 + _erf(x64 / math.sqrt(2)))
    return y.astype(x.dtype)


def _unary(op):
    ref = K._UNARY_NP[op]
    return lambda inputs, attrs: [np.asarray(ref(inputs[0])).astype(inputs[0].dtype)]


def _binary(op):
    def fn(inputs, attrs):
        xs = [i for i in inputs if i is not None]
        out = xs[0]
        for b in xs[1:]:
            if op == "Div":
                out = (np.trunc(np.true_divide(out, b)) if out.dtype.kind in "iu"
                       else np.true_divide(out, b)).astype(out.dtype)
            else:
                out = K._BINARY_NP[op](out, b).astype(out.dtype)
        return [out]
    return fn


def _matmul(inputs, attrs):
    y = np.matmul(inputs[0], inputs[1])
    if attrs.get("_bias") is not None:
        y = y + attrs["_bias"]
    if attrs.get("_activation") == "relu":
        y = np.maximum(y, 0)
    return [y.astype(inputs[0].dtype)]


def _gemm(inputs, attrs):
    a, b = inputs[0], inputs[1]
    a = a.T if attrs.get("transA", 0) else a
    b = b.T if attrs.get("transB", 0) else b
    y = attrs.get("alpha", 1.0) * (a @ b)
    if len(inputs) > 2 and inputs[2] is not None:
        y = y + attrs.get("beta", 1.0) * inputs[2]
    return [y.astype(inputs[0].dtype)]


def _reduce(name):
    fn = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max,
          "ReduceMin": np.min}[name]

    def run(inputs, attrs):
        from dynshape.graph.host_ops import _axes
        x = inputs[0]
        axes = _axes(attrs, inputs, 1)
        if not axes and attrs.get("noop_with_empty_axes", 0):
            return [x]
        axis = tuple(a % x.ndim for a in axes) if axes else None
        return [np.asarray(fn(x, axis=axis, keepdims=bool(attrs.get("keepdims", 1))))
                .astype(x.dtype)]
    return run


def _layer_norm(inputs, attrs):
    return K.layer_norm(inputs, dict(attrs, _host=True))


def _batch_norm(inputs, attrs):
    x, scale, b, mean, var = inputs[:5]
    shape = (1, -1) + (1,) * (x.ndim - 2)
    a = scale / np.sqrt(var + attrs.get("epsilon", 1e-5))
    return [((x - mean.reshape(shape)) * a.reshape(shape) + b.reshape(shape)).astype(x.dtype)]


def _argmax(inputs, attrs):
    x, axis = inputs[0], attrs.get("axis", 0)
    if attrs.get("select_last_index", 0):
        y = x.shape[axis] - 1 - np.argmax(np.flip(x, axis), axis=axis)
    else:
        y = np.argmax(x, axis=axis)
    y = np.asarray(y, np.int64)
    return [np.expand_dims(y, axis) if attrs.get("keepdims", 1) else y]


def _fused(inputs, attrs):
    chain = attrs["_chain"]
    env = dict(attrs["_consts"])
    env.update(zip(attrs["_side_values"], inputs[1:]))
    env[chain[0].inputs[0]] = inputs[0]
    for n in chain:
        out = NUMPY_OPS[n.op]([env[i] for i in n.inputs], n.attrs)[0]
        env[n.outputs[0]] = out
    return [out]


NUMPY_OPS = {op: _unary(op) for op in K._UNARY}
NUMPY_OPS.update({op: _binary(op) for op in K._BINARY})
NUMPY_OPS.update({
    "LeakyRelu": lambda i, a: [np.where(i[0] >= 0, i[0], a.get("alpha", 0.01) * i[0])
                               .astype(i[0].dtype)],
    "Clip": lambda i, a: [np.clip(i[0], *(np.asarray(i[k]).item() if len(i) > k and
                                          i[k] is not None else a.get(n)
                                          for k, n in ((1, "min"), (2, "max"))))],
    "Gelu": lambda i, a: [_gelu(i[0], a.get("approximate", "none"))],
    "MatMul": _matmul, "Gemm": _gemm,
    "GlobalAveragePool": lambda i, a: [i[0].mean(axis=tuple(range(2, i[0].ndim)),
                                                 keepdims=True).astype(i[0].dtype)],
    "Softmax": lambda i, a: [_softmax(i[0], a.get("axis", -1))],
    "LogSoftmax": lambda i, a: [_softmax(i[0], a.get("axis", -1), log=True)],
    "LayerNormalization": _layer_norm, "BatchNormalization": _batch_norm,
    "ReduceSum": _reduce("ReduceSum"), "ReduceMean": _reduce("ReduceMean"),
    "ReduceMax": _reduce("ReduceMax"), "ReduceMin": _reduce("ReduceMin"),
    "ArgMax": _argmax, "Transpose": K.transpose, "DsFused": _fused,
})
