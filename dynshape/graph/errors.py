"""Errors of the graph layer (all are DynshapeErrors)."""
from dynshape.errors import DynshapeError


class ModelError(DynshapeError, ValueError):
    """A model that cannot be loaded: unreadable, invalid, or with unsupported op types."""


class InputError(DynshapeError, ValueError):
    """A run's inputs do not match the model: name, dtype, rank or a symbolic dim."""
