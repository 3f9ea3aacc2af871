"""The worked examples of seeds 000, 001 and 002, as written there."""
import pytest

import dynshape
from dynshape.errors import ArgumentError
from dynshape.partitioning import graph as G
from dynshape.partitioning.serial import Budget, cut_edges, fuse, split, targets

pytest.importorskip("networkx")


def _groups(p):
    return [(set(s.nodes) - {n for n in s.nodes if str(n).startswith("output:")}, s.device)
            for s in p.submodels]


def _chain(edges, unsupported=(), names=None):
    names = names or sorted({n for e in edges for n in e})
    nodes = [(n, n, [f"{u}" for u, v in edges if v == n], [n]) for n in names]
    return G.from_nodes(nodes, lambda name, op: {"host"} if name in unsupported
                        else {"cpu", "host"})


def test_000_fig8():
    g = _chain([("a", "b"), ("b", "c"), ("c", "d"), ("e", "d")], unsupported="b")
    assert _groups(dynshape.partition(g, "depth")) == [({"a"}, "cpu"), ({"b"}, "host"),
                                                       ({"c", "d", "e"}, "cpu")]


def test_000_fig9():
    g = _chain([("m", "n"), ("q", "n")], unsupported="q", names=["m", "n", "q"])
    p = dynshape.partition(g, "depth")
    assert sorted(map(sorted, (s for s, _ in _groups(p)))) == [["m", "n"], ["q"]]
    assert len(p.submodels) == 2 < 3                       # per-node placement gives 3


def test_000_refuses_a_ring():
    g = _chain([("x", "y"), ("y", "z"), ("x", "w"), ("w", "z")], unsupported="y",
               names=["x", "y", "w", "z"])
    groups = [s for s, _ in _groups(dynshape.partition(g, "depth"))]
    assert {"x", "w", "z"} not in groups and {"y"} in groups


def test_000_groups_consecutive_unsupported_nodes():
    g = _chain([("a", "b"), ("b", "c"), ("c", "d")], unsupported="bc")
    p = dynshape.partition(g, "depth", group_unsupported=True)
    assert ({"b", "c"}, "host") in _groups(p)
    assert ({"b"}, "host") in _groups(dynshape.partition(g, "depth"))


FIG7 = [("A", "B"), ("A", "C"), ("B", "D"), ("C", "D"), ("D", "E"), ("D", "F"), ("E", "G"),
        ("F", "G")]


def test_001_fig7_8_under_each_policy():
    g = _chain(FIG7, unsupported="D")
    p = dynshape.partition(g, "typed", policy="S1331")
    assert _groups(p) == [({"A", "B", "C"}, "cpu"), ({"D"}, "host"), ({"E", "F", "G"}, "cpu")]
    g.nodes["A"]["compute"] = 0          # A computes nothing: {A,B,C} 2 compute nodes, {E,F,G} 3
    assert [d for _, d in _groups(dynshape.partition(g, "typed", policy="S1332"))] == \
        ["host", "host", "cpu"]
    assert [d for _, d in _groups(dynshape.partition(g, "typed", policy="S1333",
                                                     threshold=3))] == ["host", "host", "host"]
    assert [d for _, d in _groups(dynshape.partition(g, "typed", policy="S1333",
                                                     threshold=2))] == ["host", "host", "cpu"]
    assert [d for _, d in _groups(dynshape.partition(g, "typed", policy="S1333",
                                                     threshold=1))] == ["cpu", "host", "cpu"]
    assert [d for _, d in _groups(dynshape.partition(g, "typed", policy="S1334",
                                                     threshold=3))] == ["host", "host", "cpu"]
    types = [s.info["type"] for s in dynshape.partition(g, "typed", policy="S1331").submodels]
    assert types == [1, 2, 1]


def test_001_ring_rule():
    """A -> B and A -> C -> B: A and B merge only together with C."""
    g = _chain([("A", "B"), ("A", "C"), ("C", "B")])
    assert _groups(dynshape.partition(g, "typed")) == [({"A", "B", "C"}, "cpu")]
    g = _chain([("A", "B"), ("A", "C"), ("C", "B")], unsupported="C")
    groups = [s for s, _ in _groups(dynshape.partition(g, "typed"))]
    assert {"A", "B"} not in groups and len(groups) == 3


def test_001_fig12_13_specific_node():
    g = _chain([("A", "B"), ("B", "C")], unsupported="C")
    assert [s for s, _ in _groups(dynshape.partition(g, "typed"))] == [{"A", "B"}, {"C"}]
    p = dynshape.partition(g, "typed", specific=["B"])
    assert [s for s, _ in _groups(p)] == [{"A", "B", "C"}]
    assert p.submodels[0].info["type"] == 2


def _fig2():
    edges = [(1, 2), (2, 3), (2, 4), (4, 5), (4, 6), (6, 7), (6, 8), (8, 9)]
    g = G.nx().DiGraph()
    for n in range(1, 10):
        g.add_node(n, op="Op", devices={"cpu"}, compute=1, bytes=1, order=n,
                   kind="output" if n in (3, 5, 7) else "op")
    g.add_edges_from(edges, bytes=1)
    return g


def test_002_fig2():
    g = _fig2()
    assert sorted(targets(g)) == [2, 4, 6]
    assert sorted(cut_edges(g, targets(g))) == [(2, 4), (4, 6), (6, 8)]
    assert [set(p) for p in split(g)] == [{1, 2, 3}, {4, 5}, {6, 7}, {8, 9}]
    p = dynshape.partition(g, "serial")
    assert [set(s.nodes) for s in p.submodels] == [{1, 2, 3}, {4, 5}, {6, 7}, {8, 9}]


class _Fits(Budget):
    """A budget that accepts exactly the listed unions."""
    def __init__(self, ok):
        super().__init__()
        self.ok = [set(u) for u in ok]

    def fits(self, g, nodes):
        return len(set(nodes)) == 1 or set(nodes) in self.ok


def test_002_greedy_fusion():
    pieces = [["S1"], ["S2"], ["S3"], ["S4"]]
    # S1+S2 fails: S1 final, S2+S3 tried next and succeeds (final), then S4 alone
    assert fuse(None, pieces, _Fits([{"S2", "S3"}]), "greedy") == [["S1"], ["S2", "S3"],
                                                                    ["S4"]]
    pieces = [["H"], ["I"], ["J"], ["K"]]
    assert fuse(None, pieces, _Fits([{"H", "I"}, {"J", "K"}, {"I", "J"}]), "greedy") == \
        [["H", "I"], ["J", "K"]]


def test_002_bidirectional_fusion():
    pieces = [[c] for c in "HIJKLM"]
    ok = [set("HI"), set("LM"), set("JK")]
    assert fuse(None, pieces, _Fits(ok), "bidirectional") == [["H", "I"], ["J", "K"],
                                                              ["L", "M"]]


def test_002_budget_resplits():
    g = _fig2()
    p = dynshape.partition(g, "serial", max_nodes=1)
    assert all(len([n for n in s.nodes if g.nodes[n]["kind"] != "output"]) <= 1
               for s in p.submodels)


def test_bad_options():
    g = _fig2()
    with pytest.raises(ArgumentError, match="unknown partition method"):
        dynshape.partition(g, "random")
    with pytest.raises(ArgumentError, match="takes no option"):
        dynshape.partition(g, "depth", policy="S1331")
    with pytest.raises(ArgumentError, match="unknown policy"):
        dynshape.partition(g, "typed", policy="S9")
    with pytest.raises(ArgumentError, match="positive number"):
        dynshape.partition(g, "serial", max_nodes=0)
    g.add_edge(9, 1)
    with pytest.raises(ArgumentError, match="cycle"):
        dynshape.partition(g, "depth")
