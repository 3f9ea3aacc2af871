"""The Executor: the one call path every family runs, top to bottom.

    empty result -> temporary out (strides no driver can address) -> operands -> memo ->
    geometry -> table key -> table (cache, store or combination) -> bind -> memo -> ONE
    driver call

A family subclasses :class:`Executor` and overrides only what differs: how its iteration
space is laid out (``geometry``), its key, how a table is built from a geometry (``build``),
what a call binds (``bind``) and how its driver is called (``call``). Nothing here runs per
tile: the driver loops over the table's entries in compiled code (invariant 1), and no
compilation happens once the target's drivers are loaded (invariant 2).
"""
import numpy as np

from dynshape_kernels.catalog import catalog_for

from dynshape.errors import DtypeError, SettingError
from dynshape.planning import cost_model
from dynshape.runtime import config
from dynshape.runtime.layout import element_strides
from dynshape.runtime.memo import Memo
from dynshape.runtime.targets import _TARGETS, get_target

#: the one exact-layout memo of every family
MEMO = Memo(config.cache)

_EXECUTORS = {}
#: the built-in executors by name: the module that defines each (imported on first use)
EXECUTOR_MODULES = {"plane": "dynshape.runtime.plane", "reduce": "dynshape.runtime.walk",
                    "rowwise": "dynshape.runtime.walk", "pool": "dynshape.runtime.pool",
                    "conv": "dynshape.runtime.conv", "matmul": "dynshape.runtime.matmul",
                    "fused": "dynshape.runtime.fused"}


def register_executor(executor):
    """Make ``executor`` (an Executor instance) run the op specs whose ``executor`` attribute
    is its ``name`` (the extension point for new families)."""
    _EXECUTORS[executor.name] = executor
    return executor


def executor_of(name):
    ex = _EXECUTORS.get(name)
    if ex is None and name in EXECUTOR_MODULES:
        import importlib
        importlib.import_module(EXECUTOR_MODULES[name])
        ex = _EXECUTORS.get(name)
    if ex is None:
        known = sorted(set(_EXECUTORS) | set(EXECUTOR_MODULES))
        raise SettingError(f"no executor {name!r}; known: {', '.join(known)}")
    return ex


def via_temporary_out(launch, run):
    """Run into a contiguous temporary and copy it to ``out`` (for an ``out`` whose byte
    strides are not whole elements, which no driver can address)."""
    out = launch.out
    launch.out = np.empty(out.shape, out.dtype)
    run(launch)
    np.copyto(out, launch.out)
    return launch.result


class Executor:
    """Template of one family's call path. ``name``: the spec's executor name; ``family``:
    the kernel family whose driver runs (None: the launch's own family)."""
    name = None
    family = None           # None: the launch's family (one executor for several families)
    #: whether the family's planner prices tables with the calibrated cost model; if not,
    #: ``model_note`` says what it uses
    calibrated = True
    model_note = ""

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls.has_operands = cls.operands is not Executor.operands

    # ---- the call path -----------------------------------------------------------------
    def run(self, launch):
        if launch.out.size == 0:
            return launch.result
        if self.has_operands:
            early = self.operands(launch)
            if early is not None:
                return early
        target = _TARGETS.get(launch.target) or get_target(launch.target)
        sig = self.signature(launch) if not config.warming() else None
        table, bound, key = MEMO.get(sig) if sig is not None else (None, None, None)
        if table is None:
            if element_strides(launch.out) is None:
                return via_temporary_out(launch, self.run)
            self.check_target_dtype(launch, target.name)
            geo = self.geometry(launch)
            key = self.key(launch, geo, target.name)
            table = self.lookup(launch, geo, key)
            bound = self.bind(launch, geo, table)
            if sig is not None:                  # geometry may have replaced operands
                MEMO.put(self.signature(launch), key, bound)
        family = self.family or launch.family
        if "steps" in launch.extra:      # an epilogue program: its interpreter on demand
            driver = target.epilogue_driver(family, launch.dtype)
        else:
            driver = target.driver(family, launch.dtype)
        self.call(driver, launch, table, bound)
        launch.ran = (key, table, bound)
        return launch.result

    def explain(self, launch):
        """The table a call would run (None for an empty result); nothing is computed."""
        if launch.out.size == 0:
            return None
        self.operands(launch, explain=True)
        self.check_target_dtype(launch, launch.target)
        geo = self.geometry(launch)
        return self.lookup(launch, geo, self.key(launch, geo, get_target(launch.target).name))

    def check_target_dtype(self, launch, target):
        """A DtypeError naming the family's accepted dtypes when the target's catalog has
        the family but not the dtype."""
        fam = catalog_for(target).families.get(self.family or launch.family)
        if fam is not None and launch.dtype not in fam.dtypes:
            raise DtypeError(f"{launch.op}: dtype {launch.dtype} is not supported on the "
                             f"{target} target; accepted there: {', '.join(fam.dtypes)}")

    def lookup(self, launch, geo, key):
        """The table of ``key``: cached, saved on disk or built, per the policy in force."""
        return config.cache.get_or_build(
            key, lambda variant: self._build(launch, geo, key, variant),
            policy=config.current_policy(), expect=key.expect())

    def _build(self, launch, geo, key, variant):
        table = self.build(launch, geo, key, variant)
        table.meta.setdefault("cost_model", cost_model.source_for(key.target)
                              if self.calibrated else self.model_note)
        return table

    # ---- hooks -------------------------------------------------------------------------
    def operands(self, launch, explain=False):
        """Runs on every call, before the memo: replace operands the driver cannot take as
        they are (copies), or end the call early by returning its result (e.g. after
        running it into a temporary). Keep it cheap. Default: nothing."""
        return None

    def signature(self, launch):
        """Hashable exact layout of the call (target included) for the memo, or None (no
        memo). Computed again after ``geometry`` on a miss, which may replace operands."""
        return None

    def geometry(self, launch):
        """The family's iteration space of this call (runs on a memo miss only; may replace
        operands that no driver can address, such as byte strides that are not whole
        elements)."""
        raise NotImplementedError

    def key(self, launch, geo, target):
        raise NotImplementedError

    def build(self, launch, geo, key, variant):
        """A new ParamTable for ``key`` ("simplified" or "optimized" combination)."""
        raise NotImplementedError

    def bind(self, launch, geo, table):
        """What the driver needs besides the table for this exact layout (memoized)."""
        raise NotImplementedError

    def call(self, driver, launch, table, bound):
        raise NotImplementedError

    def replay(self, launch, arrays, table, bound):
        """``go(arrays, out)``: this call again on other arrays of the same layout (see
        ``runtime/replay.py``), calling the driver with everything but the arrays' buffers
        fixed; it may return False to send a call down the full path. None (the default):
        no replay, every call takes the full path."""
        return None
