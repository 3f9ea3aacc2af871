"""Counting Numba compilations: the run path must compile nothing once kernels are loaded."""
import contextlib


class CompileCounter:
    """Counts Numba compilations (cache loads are not compilations)."""

    def __init__(self):
        self.count = 0
        self.functions = []


@contextlib.contextmanager
def count_compilations():
    """``with count_compilations() as c: ...`` then ``c.count`` is the number of compiles."""
    from numba.core import event

    counter = CompileCounter()

    class _Listener(event.Listener):
        def on_start(self, ev):
            counter.count += 1
            counter.functions.append(str(ev.data.get("dispatcher", "?")))

        def on_end(self, ev):
            pass

    with event.install_listener("numba:compile", _Listener()):
        yield counter
