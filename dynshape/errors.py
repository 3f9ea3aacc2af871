"""Exceptions raised for bad input. Each message names what was wrong and what is accepted."""


class DynshapeError(Exception):
    """Base class of dynshape's errors."""


class UnknownOpError(DynshapeError, ValueError):
    pass


class DtypeError(DynshapeError, TypeError):
    pass


class ShapeError(DynshapeError, ValueError):
    pass


class OpAttributeError(DynshapeError, ValueError):
    pass


class TableFormatError(DynshapeError, ValueError):
    """A parameter-table file or array that is corrupt, truncated or from another build."""


class ArgumentError(DynshapeError, TypeError):
    """Wrong number or kind of arguments for an op."""
