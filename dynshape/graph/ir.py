"""The graph IR: values (name, dtype, shape with symbolic dims), nodes (op type, inputs,
outputs, attributes) and initializers, in a topological order.

A dimension is an int, a str (a symbolic dim such as ``"batch"``) or None (unknown). The IR
knows nothing of ONNX's protobuf (the importer fills it) nor of how nodes run (the lowering
does): it is the structure that rewrites, plans and partitioning read.
"""
from dataclasses import dataclass, field


@dataclass
class Value:
    name: str
    dtype: object = None          # a NumPy dtype, or None when unknown
    shape: tuple = None           # dims: int, str (symbolic) or None; None: unknown rank

    def describe(self):
        dims = "?" if self.shape is None else "x".join(str(d) for d in self.shape) or "scalar"
        return f"{self.name}: {self.dtype} [{dims}]"


@dataclass
class Node:
    name: str
    op: str
    inputs: list                  # value names ("" for an omitted optional input)
    outputs: list
    attrs: dict = field(default_factory=dict)
    domain: str = ""

    def __repr__(self):
        return f"<{self.op} {self.name}: {self.inputs} -> {self.outputs}>"


@dataclass
class Graph:
    nodes: list                   # in a topological order
    inputs: list                  # Values fed at run time
    outputs: list                 # Values returned
    initializers: dict            # name -> NumPy array
    values: dict = field(default_factory=dict)    # name -> Value (what is known)
    opset: int = 0

    def producers(self):
        """value name -> the node that produces it."""
        return {o: n for n in self.nodes for o in n.outputs if o}

    def consumers(self):
        """value name -> the nodes that read it (in order)."""
        out = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    out.setdefault(i, []).append(n)
        return out

    def sort(self):
        """Put the nodes in a topological order (stable: the given order where it is one)."""
        known = set(self.initializers) | {v.name for v in self.inputs} | {""}
        done, order, pending = set(known), [], list(self.nodes)
        while pending:
            rest = []
            for n in pending:
                if all(i in done for i in n.inputs):
                    order.append(n)
                    done.update(n.outputs)
                else:
                    rest.append(n)
            if len(rest) == len(pending):
                missing = sorted({i for n in rest for i in n.inputs if i not in done})
                from dynshape.graph.errors import ModelError
                raise ModelError(f"the graph has a cycle or reads values nothing produces: "
                                 f"{', '.join(missing[:8])}")
            pending = rest
        self.nodes = order
        return self

    def to_networkx(self, devices=None, sizes=None):
        """A networkx.DiGraph of the nodes: node attributes ``op``, ``devices`` (the set of
        devices that can run it, from ``devices(node)``), ``compute`` and ``bytes`` (from
        ``sizes(node)``: (compute, output bytes), both 1 when unknown); edge attribute
        ``bytes`` (the producer's output bytes) and ``values`` (the value names)."""
        import networkx as nx
        g = nx.DiGraph()
        prod = self.producers()
        for n in self.nodes:
            compute, nbytes = sizes(n) if sizes else (1, 1)
            g.add_node(n.name, op=n.op, devices=set(devices(n)) if devices else {"host"},
                       compute=compute, bytes=nbytes)
        for n in self.nodes:
            for i in n.inputs:
                p = prod.get(i)
                if p is not None:
                    if g.has_edge(p.name, n.name):
                        g.edges[p.name, n.name]["values"].append(i)
                    else:
                        g.add_edge(p.name, n.name, bytes=g.nodes[p.name]["bytes"], values=[i])
        return g
