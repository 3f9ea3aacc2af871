"""Fixtures of the graph-layer tests."""
import pytest


@pytest.fixture(scope="session")
def exported():
    """name -> ONNX bytes of the small real models (exported once per session)."""
    pytest.importorskip("torch", reason="the real-model tests export models from PyTorch")
    import warnings
    from dynshape.testing.models import MODELS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: make() for name, make in MODELS.items()}
