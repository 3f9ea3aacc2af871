"""ONNX -> graph IR: parse and check with the ``onnx`` package, infer shapes (symbolic dims
kept by name), read initializers and attributes, refuse op types no lowering handles.
"""
import os

import numpy as np

from dynshape.extras import require
from dynshape.graph.errors import ModelError
from dynshape.graph.ir import Graph, Node, Value
from dynshape.graph.lowering import MIN_OPSET, SUPPORTED, check


def _model_proto(source):
    onnx = require("onnx", "ONNX import")
    if isinstance(source, onnx.ModelProto):
        return source
    try:
        if isinstance(source, (bytes, bytearray)):
            return onnx.load_from_string(bytes(source))
        if isinstance(source, (str, os.PathLike)):
            if not os.path.isfile(source):
                raise ModelError(f"no ONNX model file at {os.fspath(source)!r}")
            return onnx.load(os.fspath(source))
    except ModelError:
        raise
    except Exception as exc:
        raise ModelError(f"cannot read the ONNX model ({type(exc).__name__}: {exc}); "
                         f"accepted: a path, bytes or an onnx.ModelProto of a valid model") \
            from None
    raise ModelError(f"load_onnx takes a path, bytes or an onnx.ModelProto, got "
                     f"{type(source).__name__}")


def _dtype(elem_type):
    from onnx import helper
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)) if elem_type else None
    except Exception:
        return None


def _value(vi):
    t = vi.type.tensor_type
    shape = None
    if t.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else
                      (d.dim_param or None) for d in t.shape.dim)
    return Value(vi.name, _dtype(t.elem_type), shape)


def _attrs(node):
    from onnx import helper, numpy_helper
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if hasattr(v, "dims") and hasattr(v, "data_type"):      # a TensorProto
            v = numpy_helper.to_array(v)
        elif isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list):
            v = [x.decode() if isinstance(x, bytes) else x for x in v]
        out[a.name] = v
    return out


def opset_of(model):
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
               default=0)


def import_model(source):
    """The :class:`Graph` of an ONNX model (path, bytes or ModelProto)."""
    onnx = require("onnx", "ONNX import")
    model = _model_proto(source)
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        raise ModelError(f"the ONNX model is not valid: {str(exc).splitlines()[0]}") from None
    opset = opset_of(model)
    if opset < MIN_OPSET:
        try:
            import onnx.version_converter
            model = onnx.version_converter.convert_version(model, MIN_OPSET)
            opset = MIN_OPSET
        except Exception as exc:
            raise ModelError(f"opset {opset} is older than {MIN_OPSET} and could not be "
                             f"converted ({exc})") from None
    unsupported = {}
    for i, n in enumerate(model.graph.node):
        if n.domain not in ("", "ai.onnx") or n.op_type not in SUPPORTED:
            unsupported.setdefault(f"{n.domain + '.' if n.domain else ''}{n.op_type}",
                                   []).append(n.name or f"#{i}")
    if unsupported:
        desc = "; ".join(f"{op} (nodes {', '.join(names[:5])}"
                         f"{', ...' if len(names) > 5 else ''})"
                         for op, names in sorted(unsupported.items()))
        raise ModelError(f"the model uses op types dynshape does not support: {desc}; "
                         f"supported: see dynshape.onnx_supported_ops()")
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:
        inferred = model
    from onnx import numpy_helper
    g = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    values = {}
    for vi in list(inferred.graph.value_info) + list(g.input) + list(g.output):
        values[vi.name] = _value(vi)
    inputs = [_value(vi) for vi in g.input if vi.name not in inits]
    outputs = [_value(vi) for vi in g.output]
    nodes = [Node(n.name or f"{n.op_type}_{i}", n.op_type, list(n.input), list(n.output),
                  _attrs(n)) for i, n in enumerate(g.node)]
    refused = check(nodes)
    if refused:
        raise ModelError("the model uses configurations dynshape does not support: " +
                         "; ".join(f"{why} (nodes {', '.join(names[:5])})"
                                   for why, names in refused.items()))
    return Graph(nodes, inputs, outputs, inits, values, opset).sort()
