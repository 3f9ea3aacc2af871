"""The graph layer: ONNX models imported into a small IR, rewritten, and run as plans on
dynshape's kernels (``dynshape.load_onnx``)."""
from dynshape.graph.errors import InputError, ModelError  # noqa: F401
from dynshape.graph.lowering import supported_ops
from dynshape.graph.model import Model


def load_onnx(source, optimize=True, partition=None):
    """A :class:`Model` of the ONNX model ``source`` (a path, bytes or an onnx.ModelProto).
    Unsupported op types are refused here with the node names; ``optimize=False`` skips
    the rewrites (GELU fusion, BatchNorm folding, epilogues). ``partition``: run the model
    as sub-models, each on one device: a method name ("depth", "typed", "serial"), a dict
    ``{"method": ..., **options}`` (see ``dynshape.partition``) or a Partition of it."""
    from dynshape.graph.importer import import_model
    model = Model(import_model(source), optimize=optimize)
    if partition is not None:
        model.use_partition(partition)
    return model


def onnx_supported_ops():
    """{ONNX op type: "cpu" (dynshape kernels) or "host" (NumPy)} the importer accepts."""
    return supported_ops()
