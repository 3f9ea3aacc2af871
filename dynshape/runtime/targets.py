"""Targets: where static kernels run. A target is a name, a source of compiled drivers by
(family, dtype), and the array types it computes on.

The CPU target ("cpu") runs NumPy arrays through ``dynshape_kernels.drivers``. Another target
plugs in with :func:`register_target`: its kernel directory provides the drivers, and every
family's executor, table cache, planner and persisted tables work for it unchanged (the
target is part of every :class:`~dynshape.tables.key.TableKey`). ``run(..., target=NAME)``
selects a target explicitly; otherwise the arrays' type decides.
"""
import numpy as np
from dynshape_kernels import drivers as cpu_drivers

from dynshape.errors import SettingError


class Target:
    """``drivers``: an object with ``get(family, dtype)`` returning a compiled driver (no
    compilation once loaded), and optionally ``fill_on_demand(family, dtype)``, which loads
    what a driver calls only for launches with an epilogue program (see
    :meth:`epilogue_driver`). ``array_types``: the array classes this target computes on,
    used to pick the target of a call from its inputs."""

    def __init__(self, name, drivers, array_types=(np.ndarray,), description=""):
        self.name = name
        self.drivers = drivers
        self.array_types = tuple(array_types)
        self.description = description

    def driver(self, family, dtype):
        """The compiled driver of ``(family, dtype)`` (looked up on every call, so that
        tools and tests can wrap the drivers' ``get``)."""
        return self.drivers.get(family, dtype)

    def epilogue_driver(self, family, dtype):
        """:meth:`driver` for a launch that runs an epilogue program (a fused sequence's
        steps after a conv2d or matmul): what the driver calls only then (the CPU's step
        interpreter) is loaded, or compiled, first."""
        fill = getattr(self.drivers, "fill_on_demand", None)
        if fill is not None:
            fill(family, dtype)
        return self.drivers.get(family, dtype)

    def replay_driver(self, family, dtype):
        """The driver of ``(family, dtype)`` for a replay to call: fetched once through the
        target's ``drivers.get`` and reduced to its compiled entry point (no per-call type
        matching: a replay's arguments always have the types the driver was compiled for).
        A replay is valid only while ``drivers.get`` is the one it was recorded under
        (``runtime/replay.py`` checks it on every call): once a tool or test wraps ``get``,
        the next call takes the full path and records a replay that calls the wrapper."""
        return compiled_entry(self.drivers.get(family, dtype))

    def __repr__(self):
        return f"<Target {self.name}: {self.description}>"


def compiled_entry(disp):
    """The compiled entry point of a Numba dispatcher that holds exactly one signature (a
    driver: compiled for one signature, compiling disabled), else ``disp`` itself. Calling
    it skips the dispatcher's type matching, so it takes only arguments of the compiled
    types (read-only and alignment flags aside: the same data model); anything that is
    not such a dispatcher is called as it is."""
    overloads = getattr(disp, "overloads", None)
    if isinstance(overloads, dict) and len(overloads) == 1:
        entry = getattr(next(iter(overloads.values())), "entry_point", None)
        if callable(entry):
            return entry
    return disp


_TARGETS = {}


def register_target(target):
    """Make ``target`` available by its name (replacing a target of the same name)."""
    if not isinstance(target, Target):
        raise SettingError(f"register_target takes a dynshape Target, got {type(target).__name__}")
    _TARGETS[target.name] = target
    return target


#: built-in targets registered on first use: name -> module that registers it
LAZY_TARGETS = {"cuda": "dynshape.cuda.target"}


def get_target(name):
    """The registered target ``name`` (SettingError naming the known ones otherwise)."""
    try:
        return _TARGETS[name]
    except KeyError:
        if name in LAZY_TARGETS:
            import importlib
            importlib.import_module(LAZY_TARGETS[name])
            return _TARGETS[name]
        raise SettingError(f"unknown target {name!r}; known: {', '.join(sorted(_TARGETS))}") \
            from None


def known_targets():
    return sorted(set(_TARGETS) | set(LAZY_TARGETS))


CPU = register_target(Target("cpu", cpu_drivers, (np.ndarray,),
                             "Numba CPU kernels, one prange driver per family and dtype"))
