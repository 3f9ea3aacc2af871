"""Every error on bad input is a DynshapeError subclass naming what was wrong and what is
accepted (and, where NumPy raises ValueError or TypeError, also an instance of that)."""
import numpy as np
import pytest

import dynshape
from dynshape import errors


def test_every_error_class_is_a_dynshape_error():
    classes = [v for v in vars(errors).values() if isinstance(v, type)
               and issubclass(v, Exception)]
    assert len(classes) >= 12
    for c in classes:
        assert issubclass(c, dynshape.DynshapeError), c
        assert getattr(dynshape, c.__name__) is c, f"{c.__name__} is not exported"


def test_read_only_out():
    x = np.ones((4, 5), np.float32)
    out = np.empty_like(x)
    out.flags.writeable = False
    with pytest.raises(dynshape.OutputError, match="read-only.*writeable") as e:
        dynshape.run("relu", x, out=out)
    assert isinstance(e.value, ValueError)
    with pytest.raises(dynshape.OutputError, match="read-only"):
        dynshape.run("sum", x, axis=1, out=np.empty(4, np.float32)[::-1].copy()
                     if False else _readonly(np.empty(4, np.float32)))


def _readonly(a):
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
def test_reduction_over_zero_size_axis(op):
    x = np.ones((3, 0), np.float32)
    with pytest.raises(dynshape.EmptyReductionError, match="size 0|no identity") as e:
        dynshape.run(op, x, axis=1)
    assert isinstance(e.value, ValueError) and "accepted" in str(e.value)
    with pytest.raises(ValueError):          # NumPy agrees that this is an error
        getattr(np, op)(x, axis=1)


def test_sum_over_zero_size_axis_is_fine():
    np.testing.assert_array_equal(dynshape.run("sum", np.ones((3, 0), np.float32), axis=1),
                                  np.zeros(3, np.float32))


def test_integer_negative_power():
    a = np.arange(6, dtype=np.int64)
    with pytest.raises(dynshape.DomainError, match="negative integer powers.*accepted"):
        dynshape.run("pow", a, np.full(6, -1, np.int64))
    with pytest.raises(dynshape.DomainError, match="negative integer powers"):
        dynshape.fuse([("pow", -2)])(a)


@pytest.mark.parametrize("call, match", [
    (lambda: dynshape.set_policy("optimised"), "unknown table policy 'optimised'.*optimized"),
    (lambda: dynshape.set_cache_limit(0), "cache limit.*>= 1"),
    (lambda: dynshape.set_cache_limit(2.5), "cache limit"),
    (lambda: dynshape.warm(["nope"]), "unknown kernel family 'nope'.*unary"),
    (lambda: dynshape.warm(["rowwise"], ["int8"]), "int8.*accepted"),
])
def test_settings(call, match):
    with pytest.raises(dynshape.SettingError, match=match):
        call()


def test_explain_unknown_dtype():
    with pytest.raises(dynshape.DtypeError, match="unknown dtype 'bogus'.*float32"):
        dynshape.explain("relu", (3, 4), dtype="bogus")
