"""Properties of every method over random DAGs with random support flags, and partitioned
runs of real models against whole-graph runs."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dynshape
from dynshape import testing

nx = pytest.importorskip("networkx")

METHODS = [("depth", {}), ("depth", {"group_unsupported": True}),
           ("typed", {"policy": "S1331"}), ("typed", {"policy": "S1332"}),
           ("typed", {"policy": "S1333", "threshold": 2}),
           ("typed", {"policy": "S1334", "threshold": 3}),
           ("serial", {}), ("serial", {"max_nodes": 3, "fusion": "greedy"}),
           ("serial", {"max_compute": 6, "fusion": "bidirectional"})]


def _evaluate(g, order):
    """A toy evaluator: each node's value is its id plus the sum of its inputs' values."""
    val = {}
    for n in order:
        val[n] = hash(str(n)) % 97 + sum(val[p] for p in g.predecessors(n))
    return val


@settings(max_examples=60, deadline=None)
@given(testing.dags(), st.sampled_from(METHODS))
def test_partition_properties(g, method):
    name, opts = method
    p = dynshape.partition(g, name, **opts)
    where = {}
    for s in p.submodels:
        for n in s.nodes:
            assert n not in where, "a node in two sub-models"
            where[n] = s.index
            assert s.device in g.nodes[n]["devices"], (n, s.device)
    assert set(where) == set(g.nodes), "every node in exactly one sub-model"
    q = nx.DiGraph()
    q.add_nodes_from(range(len(p.submodels)))
    q.add_edges_from((where[u], where[v]) for u, v in g.edges if where[u] != where[v])
    assert nx.is_directed_acyclic_graph(q), "the sub-model graph is acyclic"
    assert all(a < b for a, b in q.edges), "sub-models are numbered in an order they run in"
    if name == "depth":
        assert len(p.submodels) <= g.number_of_nodes()
    if name == "serial" and opts.get("max_nodes"):
        for s in p.submodels:
            ops = [n for n in s.nodes if g.nodes[n]["kind"] != "output"]
            assert len(ops) <= opts["max_nodes"]
    # running sub-model by sub-model gives what the whole graph gives
    whole = _evaluate(g, list(nx.topological_sort(g)))
    parts = _evaluate(g, [n for s in p.submodels for n in s.nodes])
    assert parts == whole


@pytest.mark.parametrize("method,opts", [("depth", {}), ("typed", {"policy": "S1332"}),
                                         ("serial", {"max_nodes": 20, "fusion": "greedy"})])
def test_partitioned_models_match_the_whole_run(exported, method, opts):
    for name, shape in (("encoder", (2, 9, 32)), ("cnn", (1, 3, 17, 19))):
        data = exported[name]
        whole = dynshape.load_onnx(data)
        # Relu and Softmax host-only: they run in NumPy in their own sub-models
        part = dynshape.load_onnx(data)
        p = dynshape.partition(part, method, support={"Relu": {"host"}, "Softmax": {"host"}},
                               **opts)
        part.use_partition(p)
        assert part.partition is p and len(p.submodels) > 1
        for node, dev in zip(part.plan.nodes, part.plan.devices):
            if node.op in ("Relu", "Softmax"):
                assert dev == "host"
        feed = {whole.get_inputs()[0].name:
                np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
        for a, b in zip(part.run(None, feed), whole.run(None, feed)):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        text = p.explain()
        assert text.startswith(f"partition ({method})") and "boundary" in text


def test_load_onnx_with_a_partition_and_a_picture(exported, tmp_path):
    pytest.importorskip("matplotlib")
    m = dynshape.load_onnx(exported["mlp"], partition={"method": "typed", "policy": "S1331"})
    x = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    np.testing.assert_allclose(m.run(None, {"x": x})[0],
                               dynshape.load_onnx(exported["mlp"]).run(None, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)
    path = m.partition.picture(str(tmp_path / "p.png"))
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
