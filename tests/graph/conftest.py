import sys
import os

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(scope="session")
def exported():
    """name -> ONNX bytes of the small real models (exported once per session)."""
    pytest.importorskip("torch", reason="the real-model tests export models from PyTorch")
    import warnings
    from models import MODELS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: make() for name, make in MODELS.items()}
