"""The garbage collector's thresholds while drivers compile (``dynshape_kernels.compile_gc``):
raised inside the outermost block, whatever the nesting, threads or errors, and put back
after it; ``drivers.get`` and ``Link.ensure`` compile inside such a block."""
import gc
import threading

import pytest
from numba import njit, types
from numba.core import event

from dynshape_kernels import compile_gc, drivers
from dynshape_kernels.compile_gc import THRESHOLDS, during_compile
from dynshape_kernels.cpu import address_link

CUSTOM = (1234, 5, 6)


@pytest.fixture
def custom_thresholds():
    """The test's own thresholds before each block (the caller's, to be put back)."""
    before = gc.get_threshold()
    gc.set_threshold(*CUSTOM)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def test_thresholds_are_raised_inside_and_put_back_after(custom_thresholds):
    assert THRESHOLDS[0] > 700 and gc.get_threshold() == CUSTOM
    with during_compile():
        assert gc.get_threshold() == THRESHOLDS
        with during_compile():
            assert gc.get_threshold() == THRESHOLDS
        assert gc.get_threshold() == THRESHOLDS      # only the outermost block restores
    assert gc.get_threshold() == CUSTOM
    with pytest.raises(ValueError), during_compile():
        raise ValueError("a compile error")
    assert gc.get_threshold() == CUSTOM and compile_gc._depth == 0


def test_overlapping_blocks_of_two_threads_restore_once_both_end(custom_thresholds):
    inside, release, seen = threading.Event(), threading.Event(), []

    def other():
        with during_compile():
            inside.set()
            release.wait(10)
            seen.append(gc.get_threshold())

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    with during_compile():
        pass
    assert gc.get_threshold() == THRESHOLDS          # the other thread is still inside
    release.set()
    t.join(10)
    assert seen == [THRESHOLDS] and gc.get_threshold() == CUSTOM


class _FakeDispatcher:
    """Stands in for ``njit(...)(py_func)`` in ``drivers.get``: records the thresholds when
    asked to compile, compiles nothing."""
    def __init__(self, record):
        self.record = record
        self.overloads = {}

    def compile(self, sig):
        self.record.append(gc.get_threshold())

    def disable_compile(self):
        pass


def test_a_driver_compiles_under_the_raised_thresholds(custom_thresholds, monkeypatch):
    record = []
    monkeypatch.setattr(drivers, "njit", lambda **opts: (lambda fn: _FakeDispatcher(record)))
    mod = type("M", (), {"gc_driver": staticmethod(lambda x: None),
                         "gc_signature": staticmethod(lambda dt: (types.float64[::1],))})
    drivers.register("gc_probe", mod, "gc_driver", "gc_signature", dtypes=("float64",))
    try:
        drivers.get("gc_probe", "float64")
    finally:
        drivers._DRIVERS.pop("gc_probe", None)
        drivers._resolved.pop("gc_probe", None)
        drivers._loaded.pop(("gc_probe", "float64"), None)
    assert record == [THRESHOLDS] and gc.get_threshold() == CUSTOM


def test_a_function_reached_by_address_compiles_under_the_raised_thresholds(
        custom_thresholds):
    @njit(error_model="numpy")
    def gc_linked(x):
        x[0] = 1.0

    seen = []

    class Listener(event.Listener):
        def on_start(self, ev):
            if ev.data["dispatcher"].py_func is gc_linked.py_func:
                seen.append(gc.get_threshold())

        def on_end(self, ev):
            pass

    link = address_link.Link("test.gc_linked", lambda: gc_linked,
                             lambda dt: (types.float64[::1],), ("float64",))
    try:
        with event.install_listener("numba:compile", Listener()):
            assert link.ensure("float64")
    finally:
        address_link.LINKS.remove(link)
    assert seen == [THRESHOLDS] and gc.get_threshold() == CUSTOM
