"""Callees: helpers compiled without the CPython and C wrappers (they are only ever called
from compiled code), still safe and right when a test or tool calls one from Python."""
import importlib
import pkgutil

import numpy as np
import pytest
from numba import njit
from numba.core.registry import CPUDispatcher

import dynshape_kernels.cpu as cpu
from dynshape_kernels.cpu.callee import CalleeDispatcher, callee


@callee(error_model="numpy")
def _scaled_sum(x, k=2.0):
    if x.size == 0:
        raise ValueError("an empty row")
    return x.sum() * k, x[:1]


@njit
def _caller(x):
    return _scaled_sum(x)[0] + 1.0


def _wrapper_names(disp):
    return [cres.fndesc.llvm_cpython_wrapper_name for cres in disp.overloads.values()]


def test_compiled_callers_call_it_and_python_calls_go_through_a_proxy():
    x = np.arange(5.0)
    assert _caller(x) == 21.0
    total, head = _scaled_sum(x)
    assert total == 20.0 and head.tolist() == [0.0]
    assert _scaled_sum(x, 3.0)[0] == 30.0
    assert _scaled_sum(x, k=0.5)[0] == 5.0            # keywords bound in Python
    with pytest.raises(ValueError, match="an empty row"):
        _scaled_sum(x[:0])
    with pytest.raises(TypeError, match="_scaled_sum"):
        _scaled_sum(x, q=1.0)
    # the proxy compiled the callee's own overloads (shared with compiled callers)
    assert len(_scaled_sum.signatures) >= 2


def test_its_code_has_neither_wrapper():
    _caller(np.arange(3.0))
    for sig, name in zip(_scaled_sum.signatures, _wrapper_names(_scaled_sum)):
        llvm = _scaled_sum.inspect_llvm(sig)
        native = _scaled_sum.overloads[sig].fndesc.llvm_func_name
        assert f'@"{native}"' in llvm or f"@{native}" in llvm
        assert name not in llvm
        assert "cfunc." not in llvm

    @njit
    def plain(x):
        return x.sum()
    plain(np.arange(3.0))
    sig = plain.signatures[0]
    assert plain.overloads[sig].fndesc.llvm_cpython_wrapper_name in plain.inspect_llvm(sig)


def _kernel_dispatchers():
    for info in pkgutil.iter_modules(cpu.__path__):
        module = importlib.import_module(f"{cpu.__name__}.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and value.py_func.__module__ == module.__name__:
                yield f"{module.__name__}.{name}", value


def test_every_cached_kernel_helper_is_a_callee():
    """Each helper compiled on its own (every njit function of the CPU kernels that is not
    inlined at Numba's IR level) is a callee; the drivers are compiled by drivers.get."""
    found = dict(_kernel_dispatchers())
    assert len(found) > 100
    plain = [name for name, d in found.items()
             if d.targetoptions.get("inline", "never") != "always"
             and not isinstance(d, CalleeDispatcher)]
    assert plain == []
    callees = [d for d in found.values() if isinstance(d, CalleeDispatcher)]
    assert all(d.targetoptions.get("no_cpython_wrapper") and
               d.targetoptions.get("no_cfunc_wrapper") for d in callees)
