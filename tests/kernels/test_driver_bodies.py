"""The drivers are compiled with ``parallel=True``, which turns ``np.zeros`` and the other
array constructors that fill memory into parallel loops: in a driver's own body each would
wake the thread pool and join it on every call (~2 us: a fused relu over 8 elements took 3.2
us against the unary driver's 0.7). Their bodies allocate with ``np.empty`` and zero through
``cpu.serial_zeros``; the only parallel loops are their ``prange`` loops."""
import ast
import inspect
import textwrap

import numpy as np
import pytest

from dynshape_kernels import drivers
from dynshape_kernels.cpu import serial_zeros

FILLING = {"zeros", "ones", "full", "arange", "linspace", "zeros_like", "ones_like",
           "full_like", "eye", "identity"}


@pytest.mark.parametrize("family", sorted(drivers._DRIVERS))
def test_driver_bodies_fill_no_array(family):
    fn = drivers._resolve(family)[0]
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    filling = [f"line {n.lineno}: np.{n.func.attr}" for n in ast.walk(tree)
               if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in FILLING and isinstance(n.func.value, ast.Name)
               and n.func.value.id in ("np", "numpy")]
    assert not filling, f"{fn.__name__}: {filling} (a parallel loop per call: serial_zeros)"


@pytest.mark.parametrize("n", [0, 1, 17])
@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.float64])
def test_serial_zeros_are_zeros(n, dtype):
    a = serial_zeros.zeros(n, dtype)
    assert a.dtype == dtype and a.shape == (n,) and not a.any()
