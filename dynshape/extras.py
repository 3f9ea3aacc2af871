"""Optional packages, imported only by the features that need them.

``import dynshape`` imports NumPy and Numba only. A feature that needs an optional package
calls :func:`require`, which imports it or raises :class:`MissingExtraError` with a one-line
message naming the ``pip install`` extra that provides it.
"""
import importlib

from dynshape.errors import MissingExtraError

# module -> the extra of pyproject.toml that installs it
EXTRAS = {
    "hypothesis": "test",
    "matplotlib": "plot",
    "onnx": "onnx",
    "onnxruntime": "onnx",
    "torch": "bench",
    "dask": "dask",
    "distributed": "dask",
}


def require(module, feature):
    """Import ``module`` for ``feature`` (a short phrase, e.g. "dynshape.testing strategies")
    or raise MissingExtraError saying which extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        extra = EXTRAS.get(top)
        how = (f"pip install 'dynshape[{extra}]'" if extra else f"pip install {top}")
        raise MissingExtraError(f"{feature} needs the optional package {top!r}, which is not "
                                f"installed ({exc.__class__.__name__}: {exc}); install it "
                                f"with: {how}") from None
