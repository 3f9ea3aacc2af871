"""Bad models and bad inputs: clear errors, nothing half-built."""
import numpy as np
import pytest

import dynshape
from dynshape.graph import InputError, ModelError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _x(name="x", shape=("n", 4)):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def test_unsupported_op_types_are_listed_with_their_nodes():
    m = _model([helper.make_node("Relu", ["x"], ["a"], name="r"),
                helper.make_node("Hardmax", ["a"], ["b"], name="hm1"),
                helper.make_node("Det", ["b"], ["y"], name="det")], [_x()], [_x("y", ())])
    with pytest.raises(ModelError) as e:
        dynshape.load_onnx(m)
    assert "Hardmax (nodes hm1)" in str(e.value) and "Det (nodes det)" in str(e.value)


def test_truncated_and_missing_files(tmp_path):
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_x()], [_x("y")])
    data = m.SerializeToString()
    with pytest.raises(ModelError):
        dynshape.load_onnx(data[: len(data) // 2])
    with pytest.raises(ModelError, match="no ONNX model file"):
        dynshape.load_onnx(str(tmp_path / "none.onnx"))
    with pytest.raises(ModelError, match="path, bytes or an onnx.ModelProto"):
        dynshape.load_onnx(42)


def test_bad_inputs():
    m = dynshape.load_onnx(_model([helper.make_node("Add", ["x", "z"], ["y"])],
                                  [_x(), _x("z")], [_x("y")]))
    ok = np.ones((3, 4), np.float32)
    with pytest.raises(InputError, match="unknown input"):
        m.run(None, {"x": ok, "z": ok, "w": ok})
    with pytest.raises(InputError, match="missing input"):
        m.run(None, {"x": ok})
    with pytest.raises(InputError, match="dtype float64"):
        m.run(None, {"x": ok.astype(np.float64), "z": ok})
    with pytest.raises(InputError, match="rank 1"):
        m.run(None, {"x": np.ones(4, np.float32), "z": ok})
    with pytest.raises(InputError, match="fixes it to 4"):
        m.run(None, {"x": np.ones((3, 5), np.float32), "z": ok})
    with pytest.raises(InputError, match="symbolic dim 'n' is 3"):
        m.run(None, {"x": ok, "z": np.ones((2, 4), np.float32)})
    with pytest.raises(InputError, match="unknown output"):
        m.run(["nope"], {"x": ok, "z": ok})
    np.testing.assert_array_equal(m.run(None, {"x": ok, "z": ok})[0], 2 * ok)


def test_refused_configurations_are_named():
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2], name="p3")
    m = _model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4, 4])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 3, 3, 3])])
    with pytest.raises(ModelError, match=r"3-D MaxPool .*p3"):
        dynshape.load_onnx(m)


def test_split_sizes_that_do_not_add_up_are_named():
    """A Split whose ``split`` sizes do not cover the axis: the parts and the axis named (not
    parts silently cut short or a remainder made up)."""
    sizes = helper.make_tensor("s", TensorProto.INT64, [2], [1, 2])
    m = _model([helper.make_node("Split", ["x", "s"], ["a", "b"], axis=1, name="sp")],
               [_x()], [_x("a", ("n", 1)), _x("b", ("n", 2))], [sizes])
    model = dynshape.load_onnx(m.SerializeToString())
    with pytest.raises(ModelError, match=r"sizes \[1, 2\] do not add up to the 4 elements"):
        model.run(None, {"x": np.zeros((3, 4), np.float32)})
