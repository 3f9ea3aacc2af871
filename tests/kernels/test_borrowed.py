"""``borrowed``: a driver's operands without reference counts. The borrowed array is the
caller's memory (reads, views and writes land there), its meminfo is null (so Numba's
reference counting on it is a null test, not an atomic), tuples of arrays are taken member
by member, and arrays a function allocates itself keep their meminfo (and are freed)."""
import numpy as np
import pytest
from llvmlite import ir
from numba import njit, types
from numba.core.errors import TypingError
from numba.extending import intrinsic

from dynshape_kernels.cpu.borrowed import borrowed, hold


@intrinsic
def _meminfo_address(typingctx, arr):
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, value=args[0])
        return builder.ptrtoint(ary.meminfo, ir.IntType(64))
    return types.int64(arr), codegen


@njit
def _views_and_writes(x, o):
    x, o = borrowed((x, o))
    total = 0.0
    for r in range(x.shape[0] - 1):
        row = x[r:r + 2]               # views of a borrowed array
        total += row[0] + row[1]
    o[1:4] = x[:3] * 2.0               # writes through a borrowed view
    scratch = np.empty(8, dtype=o.dtype)   # allocated here: counted, freed at return
    scratch[:] = 1.0
    return total + scratch.sum(), _meminfo_address(x), _meminfo_address(o), \
        _meminfo_address(scratch)


def test_borrowed_arrays_are_the_callers_memory_without_a_meminfo():
    x = np.arange(10, dtype=np.float64)
    o = np.zeros(6, dtype=np.float64)
    total, mx, mo, ms = _views_and_writes(x, o)
    assert total == sum(x[r] + x[r + 1] for r in range(9)) + 8.0
    np.testing.assert_array_equal(o, [0, 0, 2, 4, 0, 0])
    assert mx == 0 and mo == 0         # reference counting on them is a null test
    assert ms != 0                     # the function's own array keeps its meminfo


@njit
def _nested(t):
    (a, (b, c)) = borrowed(t)
    return _meminfo_address(a) + _meminfo_address(b) + _meminfo_address(c), a[0] + b[0] + c[0]


def test_tuples_are_borrowed_member_by_member():
    a, b, c = (np.full(3, v, np.float32) for v in (1, 2, 4))
    assert _nested((a, (b, c))) == (0, 7.0)


def test_only_arrays_and_tuples_of_arrays_are_taken():
    @njit
    def scalar(v):
        return borrowed(v)

    with pytest.raises(TypingError):
        scalar(1.0)


def _scratch_then_other_allocations(held):
    """A function that fills a borrowed scratch, allocates and fills arrays of its size
    (which take the scratch's memory once it is freed), then reads the scratch back; its
    owner held to the end or not."""
    def f(n):
        scratch = np.empty(n)
        s = borrowed(scratch)
        for i in range(n):
            s[i] = i
        for k in range(4):
            other = np.empty(n)
            for i in range(n):
                other[i] = -1.0
            s[0] += other[1] - other[2]
        good = 0
        for i in range(n):
            good += s[i] == i
        if held:
            hold(scratch)
        return good
    return njit(f)


def test_hold_keeps_the_owner_of_a_borrowed_scratch_alive():
    """Numba frees a variable right after its last use, the ``borrowed`` call: the owner
    must be held past the borrowed array's last use (reading freed memory that another
    allocation took is what crashed the rowwise streaming path before ``hold``)."""
    assert _scratch_then_other_allocations(True)(1000) == 1000
    with pytest.raises(TypingError):
        njit(lambda v: hold(v))(1.0)
