"""Bad input: a clear error naming what was wrong and what is accepted; nothing written."""
import numpy as np
import pytest

import dynshape
from dynshape import (ArgumentError, DtypeError, OpAttributeError, ShapeError,
                      UnknownOpError)


def test_unknown_op_lists_known_ops():
    with pytest.raises(UnknownOpError) as e:
        dynshape.run("relux", np.ones(3))
    assert "relu" in str(e.value) and "add" in str(e.value)


@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.int8, np.uint32, np.complex64,
                                   np.bool_])
def test_unsupported_dtype(dtype):
    # int16/uint16 are the kernels' half-precision carriers, never accepted as themselves
    with pytest.raises(DtypeError,
                       match="accepted: float32, float64, int32, int64, float16, bfloat16"):
        dynshape.run("exp", np.ones(3, dtype))


def test_reciprocal_of_ints_is_refused():
    with pytest.raises(DtypeError, match="float32, float64"):
        dynshape.run("reciprocal", np.ones(3, np.int32))


def test_shapes_that_do_not_broadcast():
    with pytest.raises(ShapeError, match=r"\(3, 4\) and \(5,\)"):
        dynshape.run("add", np.ones((3, 4)), np.ones(5))


@pytest.mark.parametrize("out", [np.zeros((3, 5)), np.zeros((3, 4), np.float32),
                                 np.zeros((4, 3)).T.T[:3, :3]])
def test_bad_out_is_refused_and_not_written(out):
    before = out.copy()
    with pytest.raises((ShapeError, DtypeError)):
        dynshape.run("add", np.ones((3, 4)), np.ones(4), out=out)
    np.testing.assert_array_equal(out, before)


def test_read_only_out():
    out = np.zeros(3)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        dynshape.run("neg", np.ones(3), out=out)


def test_unknown_and_bad_attributes():
    with pytest.raises(OpAttributeError, match="accepted: alpha"):
        dynshape.run("leaky_relu", np.ones(3), beta=2)
    with pytest.raises(OpAttributeError, match="accepted: none"):
        dynshape.run("relu", np.ones(3), alpha=2)
    with pytest.raises(OpAttributeError, match="'none' or 'tanh'"):
        dynshape.run("gelu", np.ones(3), approximate="erf")
    with pytest.raises(OpAttributeError, match="real number"):
        dynshape.run("leaky_relu", np.ones(3), alpha="x")
    with pytest.raises(OpAttributeError, match="not an integer"):
        dynshape.run("clip", np.ones(3, np.int32), min=0.5)
    with pytest.raises(OpAttributeError, match="bad axes"):
        dynshape.run("transpose", np.ones((2, 3)), axes=(0, 0))


def test_wrong_number_of_inputs():
    with pytest.raises(ArgumentError, match="takes 2 input arrays, got 1"):
        dynshape.run("add", np.ones(3))
    with pytest.raises(ArgumentError, match="takes 1 input array, got 2"):
        dynshape.run("relu", np.ones(3), np.ones(3))


def test_negative_integer_powers():
    with pytest.raises(ValueError, match="negative integer powers"):
        dynshape.run("pow", np.arange(3), np.array([1, -1, 2]))


def test_explain_shape_arguments():
    with pytest.raises(ArgumentError, match="negative dimension"):
        dynshape.explain("relu", (3, -1))
    assert dynshape.explain("relu", (0, 4)) is None
