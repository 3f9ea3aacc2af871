"""The graph the methods read: a ``networkx.DiGraph`` whose nodes carry

* ``op``: the op type (str);
* ``devices``: the set of devices that can run the node ("cpu": dynshape's kernels,
  "cuda", "host": NumPy);
* ``compute``: a cost number (> 0 for nodes that compute);
* ``bytes``: the bytes of the node's output;
* ``order``: the node's index in the model's execution order;
* ``kind``: "output" for a data output node (a graph output, no computation), else "op";

and whose edges carry ``bytes`` (what crosses them). :func:`from_model` builds it from a
``dynshape.load_onnx`` model, :func:`from_nodes` from a plain list of nodes.
"""
from dynshape.errors import ArgumentError

OP, DEVICES, COMPUTE, BYTES, ORDER, KIND = "op", "devices", "compute", "bytes", "order", "kind"


def nx():
    from dynshape.extras import require
    return require("networkx", "partitioning")


def from_nodes(nodes, support=None, outputs=()):
    """A graph from ``nodes``: (name, op, inputs, outputs) tuples in execution order (inputs
    and outputs are value names). ``support``: {op: set of devices} or a callable
    ``(name, op) -> set`` (default: every node on "cpu"). ``outputs``: value names that are
    graph outputs (each gets a data output node)."""
    g = nx().DiGraph()
    producer = {}
    for k, (name, op, ins, outs) in enumerate(nodes):
        dev = support(name, op) if callable(support) else (support or {}).get(op, {"cpu"})
        g.add_node(name, op=op, devices=set(dev), compute=1, bytes=1, order=k, kind="op")
        for o in outs:
            producer[o] = name
    for name, op, ins, outs in nodes:
        for i in ins:
            if i in producer:
                g.add_edge(producer[i], name, bytes=1)
    for k, v in enumerate(outputs):
        if v not in producer:
            raise ArgumentError(f"graph output {v!r} is produced by no node")
        name = f"output:{v}"
        g.add_node(name, op="Output", devices={"cpu", "cuda", "host"}, compute=0, bytes=1,
                   order=len(nodes) + k, kind="output")
        g.add_edge(producer[v], name, bytes=1)
    return g


def from_model(model, support=None, shapes=None):
    """The graph of a ``dynshape.load_onnx`` model. ``support``: {op type: set of devices}
    overriding the defaults (dynshape.graph.lowering.supports). ``shapes``: input shapes
    (dict name -> shape) to measure each node's output bytes and compute (the model runs
    once on zeros); without them every node counts 1."""
    import numpy as np

    from dynshape.graph.lowering import supports
    graph = model.graph
    sizes = {}
    if shapes is not None:
        nodes = model.plan.nodes

        def trace(k, res):
            nb = sum(int(np.asarray(r).nbytes) for r in res)
            sizes[nodes[k].name] = (max(nb // 4, 1), max(nb, 1))
        model.plan.run(model._feeds(model._zeros(shapes)), trace)

    def devs(n):
        return set(support[n.op]) if support and n.op in support else supports(n)
    g = graph.to_networkx(devs, lambda n: sizes.get(n.name, (1, 1)))
    for k, n in enumerate(graph.nodes):
        g.nodes[n.name].update(order=k, kind="op")
    prod = graph.producers()
    for k, v in enumerate(graph.outputs):
        name = f"output:{v.name}"
        g.add_node(name, op="Output", devices={"cpu", "cuda", "host"}, compute=0,
                   bytes=1, order=len(graph.nodes) + k, kind="output")
        if v.name in prod:
            g.add_edge(prod[v.name].name, name, bytes=g.nodes[prod[v.name].name]["bytes"])
    return g


def check(g):
    """Refuse a cyclic graph and nodes no device can run."""
    if not nx().is_directed_acyclic_graph(g):
        cyc = nx().find_cycle(g)
        raise ArgumentError(f"the graph has a cycle: {' -> '.join(str(u) for u, _ in cyc)}")
    bad = [n for n, d in g.nodes(data=True) if not d.get(DEVICES)]
    if bad:
        raise ArgumentError(f"no device supports node(s) {', '.join(map(str, bad[:8]))}")


def execution_order(g):
    """Nodes in a topological order that follows the model's order where it can."""
    return list(nx().lexicographical_topological_sort(g, key=lambda n: g.nodes[n].get(ORDER, 0)))


def quotient_acyclic(g, key):
    """Whether contracting every group (``key``: node -> group, nodes missing stand alone)
    leaves the graph acyclic: no path leaves a group and comes back, also through others."""
    q = nx().DiGraph()
    q.add_edges_from((key.get(u, ("n", u)), key.get(v, ("n", v))) for u, v in g.edges
                     if key.get(u, ("n", u)) != key.get(v, ("n", v)))
    return nx().is_directed_acyclic_graph(q)


def common_devices(g, members):
    """The devices every node of ``members`` supports."""
    return set.intersection(*(set(g.nodes[n][DEVICES]) for n in members))


def device_for(g, members, prefer):
    """``prefer`` when every member supports it, else "host", else any common device, else
    None."""
    common = common_devices(g, members)
    for d in (prefer, "host"):
        if d in common:
            return d
    return sorted(common)[0] if common else None
