"""Real models exported from PyTorch with dynamic axes, run at several shapes against ONNX
Runtime, with zero Numba compilations after the first shape."""
import math

import numpy as np
import pytest

import dynshape
from dynshape import testing

ort = pytest.importorskip("onnxruntime")

SHAPES = {
    "mlp": [{"x": (3, 64)}, {"x": (17, 64)}, {"x": (1, 64)}],
    "cnn": [{"img": (1, 3, 20, 24)}, {"img": (2, 3, 33, 17)}, {"img": (1, 3, 8, 9)}],
    "resnet": [{"img": (1, 3, 16, 16)}, {"img": (3, 3, 23, 19)}],
    "encoder": [{"x": (2, 7, 32)}, {"x": (3, 13, 32)}, {"x": (1, 50, 32)}],
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_model_matches_onnxruntime_at_every_shape(exported, name):
    data = exported[name]
    m = dynshape.load_onnx(data)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for k, shapes in enumerate(SHAPES[name]):
        rng = np.random.default_rng(k)
        feed = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
        with testing.count_compilations() as c:
            got = m.run(None, feed)
        if k > 0:
            assert c.count == 0, f"{name} compiled {c.count} function(s) at a new shape"
        ref = sess.run(None, feed)
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            assert g.shape == r.shape and g.dtype == r.dtype
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


def test_rewrites_apply_and_change_nothing(exported):
    for name in ("mlp", "encoder", "resnet"):
        data = exported[name]
        fast, plain = dynshape.load_onnx(data), dynshape.load_onnx(data, optimize=False)
        assert len(fast.graph.nodes) < len(plain.graph.nodes)
        feed = {a.name: np.random.default_rng(1).standard_normal(
            [3 if isinstance(d, str) else d for d in a.shape]).astype(np.float32)
            for a in fast.get_inputs()}
        for f, p in zip(fast.run(None, feed), plain.run(None, feed)):
            np.testing.assert_allclose(f, p, rtol=1e-5, atol=1e-5)
    assert dynshape.load_onnx(exported["mlp"]).rewrites["gelu"] == 1
    assert dynshape.load_onnx(exported["encoder"]).rewrites["gelu"] == 2
    assert "Erf" not in {n.op for n in dynshape.load_onnx(exported["encoder"]).graph.nodes}


def test_interface_follows_onnxruntime(exported):
    data = exported["encoder"]
    m = dynshape.load_onnx(data)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for mine, theirs in ((m.get_inputs(), sess.get_inputs()), (m.get_outputs(), sess.get_outputs())):
        assert [(a.name, a.type, a.shape) for a in mine] == \
            [(a.name, a.type, a.shape) for a in theirs]
    x = np.random.default_rng(0).standard_normal((2, 5, 32)).astype(np.float32)
    (y,) = m.run(["y"], {"x": x})
    assert y.shape == (2, 5, 32)


def test_run_batch_splits_back_exactly(exported):
    m = dynshape.load_onnx(exported["encoder"])
    rng = np.random.default_rng(2)
    reqs = [{"x": rng.standard_normal((b, t, 32)).astype(np.float32)}
            for b, t in ((1, 9), (2, 9), (1, 4), (3, 9))]
    outs = m.run_batch(None, reqs)
    for req, out in zip(reqs, outs):
        np.testing.assert_allclose(out[0], m.run(None, req)[0], rtol=1e-5, atol=1e-6)


def test_explain_lists_every_step(exported):
    m = dynshape.load_onnx(exported["cnn"])
    text = m.explain({"img": (1, 3, 20, 24)})
    assert text.startswith("plan:") and "Conv" in text and "cpu" in text
    assert len(text.splitlines()) == len(m.plan.steps) + 1


def test_plan_releases_every_intermediate_after_its_last_reader(exported):
    m = dynshape.load_onnx(exported["encoder"])
    plan, g = m.plan, m.graph
    kept = {plan.slot[n] for n in g.initializers} | set(plan.outputs.values())
    produced = {o for step in plan.steps for o in step[2] if o >= 0}
    read = {i for step in plan.steps for i in step[1] if i >= 0}
    released = [d for step in plan.steps for d in step[3]]
    assert len(released) == len(set(released)), "a slot is released twice"
    assert set(released) == (produced | set(plan.inputs)) & read - kept
    for k, (_, ins, _, dead) in enumerate(plan.steps):       # released only after its
        for d in dead:                                        # last reader
            assert d in ins and all(d not in s[1] for s in plan.steps[k + 1:])


def test_elementwise_chains_become_one_fused_sequence():
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    b = np.random.default_rng(0).standard_normal(16).astype(np.float32)
    nodes = [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Mul", ["r", "half"], ["m"]),
             helper.make_node("Softmax", ["m"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 16])],
                          [numpy_helper.from_array(b, "b"),
                           numpy_helper.from_array(np.array(0.5, np.float32), "half")])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    m = dynshape.load_onnx(data)
    assert m.rewrites["fused_chains"] == 1 and [n.op for n in m.graph.nodes] == ["DsFused"]
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for n in (1, 5, 300):
        x = np.random.default_rng(n).standard_normal((n, 16)).astype(np.float32)
        np.testing.assert_allclose(m.run(None, {"x": x})[0], sess.run(None, {"x": x})[0],
                                   rtol=1e-5, atol=1e-6)


def test_shape_arithmetic_memo_stays_bounded_and_right(exported, monkeypatch):
    """The plan keeps the shape steps' results of at most MAX_SHAPES input shapes (oldest
    dropped first); a dropped shape is computed again, right."""
    from dynshape.graph import plan as plan_mod
    monkeypatch.setattr(plan_mod, "MAX_SHAPES", 4)
    data = exported["mlp"]
    m = dynshape.load_onnx(data)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    name = next(iter(SHAPES["mlp"][0]))
    feat = SHAPES["mlp"][0][name][-1]
    rng = np.random.default_rng(0)
    feeds = [{name: rng.standard_normal((b, feat)).astype(np.float32)} for b in range(1, 8)]
    for f in feeds:
        m.run(None, f)
        assert len(m.plan._per_shape) <= 4
    assert list(m.plan._per_shape) == [((b, feat),) for b in range(4, 8)]   # the newest 4
    for f in feeds[:2]:                         # dropped long ago: recomputed
        np.testing.assert_allclose(m.run(None, f)[0], sess.run(None, f)[0], rtol=1e-4,
                                   atol=1e-5)
    assert len(m.plan._per_shape) <= 4


def test_pow_by_two_and_three_become_products_and_other_powers_stay():
    """Pow by a constant 2 (exported variance subgraphs) runs as Mul(x, x), bit for bit the
    correctly rounded square; Pow by 3 (exported tanh-GELU) as Mul(Mul(x, x), x); Pow by 2.5
    stays a power. All agree with ONNX Runtime."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("Pow", ["x", "two"], ["p"]),
             helper.make_node("Pow", ["p", "three"], ["q"]),
             helper.make_node("Pow", ["q", "quarter"], ["y"])]
    g = helper.make_graph(nodes, "pow",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8]),
                           helper.make_tensor_value_info("p", TensorProto.FLOAT, ["n", 8])],
                          [numpy_helper.from_array(np.array(2.0, np.float32), "two"),
                           numpy_helper.from_array(np.array(3.0, np.float32), "three"),
                           numpy_helper.from_array(np.array(0.25, np.float32), "quarter")])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    m = dynshape.load_onnx(data)
    assert m.rewrites["pow_products"] == 2
    assert [n.op for n in m.graph.nodes] == ["Mul", "Mul", "Mul", "Pow"]
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    x = np.abs(np.random.default_rng(3).standard_normal((5, 8))).astype(np.float32) + 0.5
    y, p = m.run(None, {"x": x})
    np.testing.assert_array_equal(p, x * x)
    np.testing.assert_allclose(y, ((x * x) * (x * x) * (x * x)) ** np.float32(0.25),
                               rtol=3e-7, atol=0)
    for got, ref in zip((y, p), sess.run(None, {"x": x})):
        np.testing.assert_allclose(got, ref, rtol=3e-7, atol=0)


@pytest.mark.parametrize("form", ["x * 0.5 first", "x * inner first", "pow operands swapped"])
def test_tanh_gelu_subgraph_becomes_one_gelu_node(form):
    """The tanh form of GELU as exports write it (``0.5 * x * (1 + tanh(sqrt(2/pi) *
    (x + 0.044715 * pow(x, 3))))``, either association of the outer products, operands in
    either order) becomes one Gelu node (approximate="tanh") and agrees with ONNX Runtime
    running the subgraph; a graph whose intermediate is also an output is left alone."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    c = {"three": 3.0, "k": 0.044715, "r": math.sqrt(2 / math.pi), "one": 1.0, "half": 0.5}
    swap = form == "pow operands swapped"
    nodes = [helper.make_node("Pow", ["x", "three"], ["p"]),
             helper.make_node("Mul", ["p", "k"] if not swap else ["k", "p"], ["kp"]),
             helper.make_node("Add", ["x", "kp"] if not swap else ["kp", "x"], ["s"]),
             helper.make_node("Mul", ["r", "s"] if not swap else ["s", "r"], ["z"]),
             helper.make_node("Tanh", ["z"], ["t"]),
             helper.make_node("Add", ["t", "one"], ["a"])]
    if form == "x * 0.5 first":
        nodes += [helper.make_node("Mul", ["x", "half"], ["h"]),
                  helper.make_node("Mul", ["h", "a"], ["y"])]
    else:
        nodes += [helper.make_node("Mul", ["x", "a"], ["m"]),
                  helper.make_node("Mul", ["m", "half"], ["y"])]
    inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in c.items()]

    def build(outputs):
        g = helper.make_graph(nodes, "gelu_tanh",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["n", 8])
                               for o in outputs], inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]) \
            .SerializeToString()
    data = build(["y"])
    m = dynshape.load_onnx(data)
    assert m.rewrites["gelu"] == 1
    assert [(n.op, n.attrs) for n in m.graph.nodes] == [("Gelu", {"approximate": "tanh"})]
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    x = (np.random.default_rng(4).standard_normal((9, 8)) * 3).astype(np.float32)
    np.testing.assert_allclose(m.run(None, {"x": x})[0], sess.run(None, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)
    kept = dynshape.load_onnx(build(["y", "t"]))
    assert kept.rewrites["gelu"] == 0


def test_pow_by_three_names_its_square_apart_from_existing_values():
    """The square that Pow by 3 introduces takes a value name no other value has (here the
    graph already holds a value ``q_square``): both outputs stay right."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("Pow", ["x", "three"], ["q"], name="q"),
             helper.make_node("Relu", ["x"], ["q_square"], name="q_square")]
    g = helper.make_graph(nodes, "pow3",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                          [helper.make_tensor_value_info(v, TensorProto.FLOAT, ["n", 4])
                           for v in ("q", "q_square")],
                          [numpy_helper.from_array(np.array(3.0, np.float32), "three")])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    m = dynshape.load_onnx(data)
    assert m.rewrites["pow_products"] == 1
    names = [o for n in m.graph.nodes for o in n.outputs]
    assert len(names) == len(set(names)) and len({n.name for n in m.graph.nodes}) == 3
    x = np.random.default_rng(6).standard_normal((3, 4)).astype(np.float32)
    q, r = m.run(None, {"x": x})
    np.testing.assert_array_equal(q, (x * x) * x)
    np.testing.assert_array_equal(r, np.maximum(x, 0))
