"""Lowering: which function runs a node, and on which device ("cpu": dynshape's static
kernels; "host": NumPy shape arithmetic and ops no kernel family covers)."""
from dynshape.graph.host_ops import HOST_OPS
from dynshape.graph.kernel_ops import KERNEL_OPS

#: opsets older than this are converted with onnx.version_converter first
MIN_OPSET = 13
#: op types with internal names (made by rewrites, never in a model file)
INTERNAL = {"DsFused"}
SUPPORTED = (set(HOST_OPS) | set(KERNEL_OPS)) - INTERNAL


def supported_ops():
    """{op type: device} of every ONNX op type the importer accepts (domain ai.onnx, opset
    13 and later; older models are converted)."""
    out = {op: "host" for op in HOST_OPS}
    out.update({op: "cpu" for op in KERNEL_OPS if op not in INTERNAL})
    return dict(sorted(out.items()))


#: ONNX element types Cast does not produce (their NumPy stand-ins round and saturate
#: differently from ONNX's definitions)
_EXOTIC = {16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2",
           20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1", 24: "float8e8m0"}


def _unsupported(node):
    """Why a node of a supported op type cannot run (a configuration dynshape refuses), or
    None."""
    a = node.attrs
    rank = len(a.get("kernel_shape", ())) or None
    if node.op in ("MaxPool", "AveragePool", "Conv") and rank is not None and rank > 2:
        return f"{rank}-D {node.op} (1-D and 2-D are supported)"
    if node.op == "MaxPool" and len([o for o in node.outputs if o]) > 1:
        return "MaxPool's Indices output"
    if node.op == "AveragePool" and any(d != 1 for d in a.get("dilations", ())):
        return "AveragePool with dilations"
    if node.op == "Cast" and a.get("to") in _EXOTIC:
        return f"Cast to {_EXOTIC[a['to']]} (casts between float16/32/64, integers and bool are supported)"
    if node.op == "BatchNormalization" and a.get("training_mode", 0):
        return "BatchNormalization in training mode"
    return None


def check(nodes):
    """{reason: [node names]} of the nodes whose configuration dynshape refuses."""
    out = {}
    for n in nodes:
        why = _unsupported(n)
        if why:
            out.setdefault(why, []).append(n.name)
    return out


def device(node):
    return "cpu" if node.op in KERNEL_OPS else "host"


def supports(node):
    """The devices that can run ``node``: "cpu" (dynshape kernels) for the kernel ops,
    "host" (NumPy) for the host ops and the kernel ops with a NumPy implementation."""
    from dynshape.graph.numpy_ops import NUMPY_OPS
    if node.op in KERNEL_OPS:
        return {"cpu", "host"} if node.op in NUMPY_OPS else {"cpu"}
    return {"host"}


def lower(node, on=None):
    """``fn(inputs) -> outputs`` running ``node`` (its attributes bound) on device ``on``
    (default: its own: kernels for kernel ops)."""
    attrs = node.attrs
    n_out = len(node.outputs)
    if node.op in KERNEL_OPS and on == "host":
        from dynshape.graph.numpy_ops import NUMPY_OPS
        f = NUMPY_OPS[node.op]
        if n_out > 1:
            attrs = dict(attrs, _n_out=n_out)
        return lambda inputs: f(inputs, attrs)
    if node.op in KERNEL_OPS:
        f = KERNEL_OPS[node.op]
        if n_out > 1:
            attrs = dict(attrs, _n_out=n_out)
        return lambda inputs: f(inputs, attrs)
    f, takes_n = HOST_OPS[node.op]
    if takes_n:
        return lambda inputs: f(inputs, attrs, n_out)
    return lambda inputs: f(inputs, attrs)
