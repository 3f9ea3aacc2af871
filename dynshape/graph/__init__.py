"""The graph layer: ONNX models imported into a small IR, rewritten, and run as plans on
dynshape's kernels (``dynshape.load_onnx``)."""
from dynshape.graph.errors import InputError, ModelError  # noqa: F401
from dynshape.graph.lowering import supported_ops
from dynshape.graph.model import Model


def load_onnx(source, optimize=True):
    """A :class:`Model` of the ONNX model ``source`` (a path, bytes or an onnx.ModelProto).
    Unsupported op types are refused here with the node names; ``optimize=False`` skips
    the rewrites (GELU fusion, BatchNorm folding, epilogues)."""
    from dynshape.graph.importer import import_model
    return Model(import_model(source), optimize=optimize)


def onnx_supported_ops():
    """{ONNX op type: "cpu" (dynshape kernels) or "host" (NumPy)} the importer accepts."""
    return supported_ops()
