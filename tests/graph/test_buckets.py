"""Seed 003's worked examples: the kernel graph's valid orders, scale selection for one
input and for a batch of requests, the fallback above the largest scale, padding a 30x30
input to a 50x50 scale and cropping back."""
import numpy as np
import pytest

import dynshape
from dynshape.graph import buckets
from dynshape.graph.ir import Graph, Node, Value


def test_fig2_valid_orders():
    nx = pytest.importorskip("networkx")
    g = Graph([Node("K1", "MatMul", ["a", "b"], ["m"]), Node("K2", "Add", ["m", "c"], ["s"]),
               Node("K3", "Mul", ["m", "k"], ["p"]), Node("K4", "Conv", ["s", "p"], ["y"])],
              [Value(n) for n in "abck"], [Value("y")], {})
    orders = {tuple(o) for o in nx.all_topological_sorts(g.to_networkx())}
    assert orders == {("K1", "K2", "K3", "K4"), ("K1", "K3", "K2", "K4")}
    assert [n.name for n in g.sort().nodes][0] == "K1"


def test_scale_selection():
    scales = [48, 64, 80]
    assert buckets.select(scales, 50) == 64
    assert buckets.select_batch(scales, [12, 25, 18]) == 80       # 3 x 25 = 75
    assert buckets.select(scales, 81) is None                      # fallback
    assert buckets.scale_set(80_000_000, ratios=(1.0, 0.8, 0.6)) == [48_000_000, 64_000_000,
                                                                     80_000_000]
    assert buckets.scale_set(100, count=10) == list(range(10, 101, 10))


def test_padding_to_a_scale_and_cropping_back():
    """A 30x30 input padded to the 50x50 scale, run, cropped: the same as running 30x30
    (what dynshape does without padding)."""
    x = np.random.default_rng(0).standard_normal((30, 30)).astype(np.float32)
    padded = np.zeros((50, 50), np.float32)
    padded[:30, :30] = x
    np.testing.assert_allclose(dynshape.run("gelu", padded)[:30, :30], dynshape.run("gelu", x),
                               rtol=0, atol=0)
