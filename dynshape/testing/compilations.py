"""Counting Numba compilations: the run path must compile nothing once kernels are loaded."""
import contextlib


class CompileCounter:
    """Counts Numba compilations (cache loads are not compilations)."""

    def __init__(self):
        self.count = 0
        self.functions = []


def _listener(counter):
    """A Numba event listener that counts compilations into ``counter``."""
    from numba.core import event

    class _Listener(event.Listener):
        def on_start(self, ev):
            counter.count += 1
            counter.functions.append(str(ev.data.get("dispatcher", "?")))

        def on_end(self, ev):
            pass
    return _Listener()


@contextlib.contextmanager
def count_compilations():
    """``with count_compilations() as c: ...`` then ``c.count`` is the number of compiles."""
    from numba.core import event

    counter = CompileCounter()
    with event.install_listener("numba:compile", _listener(counter)):
        yield counter


_process_counter = None


def start_counting():
    """Count every Numba compilation of this process from now on (restarting the count):
    for processes a ``with`` block cannot wrap, such as Dask workers
    (``client.run(start_counting)``, then ``client.run(counted)``)."""
    from numba.core import event
    global _process_counter
    if _process_counter is None:
        counter = CompileCounter()
        event.register("numba:compile", _listener(counter))
        _process_counter = counter
    _process_counter.count = 0
    _process_counter.functions = []


def counted():
    """``(count, functions)`` compiled since :func:`start_counting` in this process."""
    if _process_counter is None:
        raise RuntimeError("start_counting() was not called in this process")
    return _process_counter.count, list(_process_counter.functions)
