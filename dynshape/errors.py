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


class OutputError(DynshapeError, ValueError):
    """An ``out=`` array that cannot receive the result (read-only, for example)."""


class EmptyReductionError(DynshapeError, ValueError):
    """A reduction with no identity (max, min, argmax, argmin) over a zero-size axis."""


class DomainError(DynshapeError, ValueError):
    """Input values outside an op's domain that NumPy also refuses (integers to negative
    integer powers)."""


class SettingError(DynshapeError, ValueError):
    """An unknown runtime setting: a table policy, a kernel family, a cache limit."""


class MissingExtraError(DynshapeError, ImportError):
    """A feature whose optional package is not installed; the message names the extra."""


class DeviceError(DynshapeError, ValueError):
    """Operands on different devices or mixed host and device arrays, a host operation asked
    of a device array, or a device call this build cannot run (the message says which)."""
