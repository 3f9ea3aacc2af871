"""Method 002: split a graph into serial sub-graphs at output-feeding nodes, re-split what
exceeds a budget, optionally fuse neighbours back while they fit.

A *target node* feeds a data output node (a graph output, ``kind`` "output") and a compute
node that has outgoing edges; the edges from targets to such compute nodes are cut, and the
pieces (weakly connected once cut) form the chain, in execution order; a piece whose
nodes no single device runs is cut into consecutive runs that one device does. A piece over the
budget (``max_nodes``, ``max_compute``, ``max_bytes``: sums over its nodes) is split again
along its execution order into the fewest consecutive runs that fit. Fusion joins adjacent
pieces when the union fits: "greedy" (cur + next; a failure makes cur final, a success is
final and is not fused again) or "bidirectional" (a forward and a backward cursor at once).
"""
from dynshape.errors import ArgumentError
from dynshape.partitioning.graph import BYTES, COMPUTE, KIND, execution_order, nx

FUSIONS = (None, "greedy", "bidirectional")


class Budget:
    def __init__(self, max_nodes=None, max_compute=None, max_bytes=None):
        for k, v in (("max_nodes", max_nodes), ("max_compute", max_compute),
                     ("max_bytes", max_bytes)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or v <= 0):
                raise ArgumentError(f"{k} must be a positive number, got {v!r}")
        self.limits = (max_nodes, max_compute, max_bytes)

    def fits(self, g, nodes):
        ops = [n for n in nodes if g.nodes[n].get(KIND) != "output"]
        used = (len(ops), sum(g.nodes[n].get(COMPUTE, 0) for n in ops),
                sum(g.nodes[n].get(BYTES, 0) for n in ops))
        return all(lim is None or u <= lim for u, lim in zip(used, self.limits))


def targets(g):
    """The target nodes: an edge to a data output node and one to a compute node with
    outgoing edges."""
    out = []
    for n in g.nodes:
        succ = list(g.successors(n))
        feeds_output = any(g.nodes[s].get(KIND) == "output" or g.out_degree(s) == 0 and
                           g.nodes[s].get(COMPUTE, 1) == 0 for s in succ)
        feeds_more = any(g.nodes[s].get(KIND) != "output" and g.out_degree(s) > 0
                         for s in succ)
        if feeds_output and feeds_more:
            out.append(n)
    return out


def cut_edges(g, tgts):
    return [(t, s) for t in tgts for s in g.successors(t)
            if g.nodes[s].get(KIND) != "output" and g.out_degree(s) > 0]


def split(g):
    """The chain of pieces after cutting the target edges, in execution order."""
    order = execution_order(g)
    h = g.copy()
    h.remove_edges_from(cut_edges(g, targets(g)))
    pieces = [sorted(c, key=order.index) for c in nx().weakly_connected_components(h)]
    return sorted(pieces, key=lambda p: order.index(p[0]))


def resplit(g, pieces, budget):
    out = []
    for p in pieces:
        if budget.fits(g, p):
            out.append(p)
            continue
        run = []
        for n in p:
            if run and not budget.fits(g, run + [n]):
                out.append(run)
                run = []
            run.append(n)
        if run:
            out.append(run)
    return out


def fuse(g, pieces, budget, how):
    if how is None:
        return pieces
    if how == "greedy":
        out, i = [], 0
        while i < len(pieces):
            if i + 1 < len(pieces) and budget.fits(g, pieces[i] + pieces[i + 1]):
                out.append(pieces[i] + pieces[i + 1])
                i += 2
            else:
                out.append(pieces[i])
                i += 1
        return out
    front, back = [], []
    i, j = 0, len(pieces) - 1
    while i <= j:
        if i < j and budget.fits(g, pieces[i] + pieces[i + 1]):
            front.append(pieces[i] + pieces[i + 1])
            i += 2
        else:
            front.append(pieces[i])
            i += 1
        if i > j:
            break
        if j - 1 >= i and budget.fits(g, pieces[j - 1] + pieces[j]):
            back.insert(0, pieces[j - 1] + pieces[j])
            j -= 2
        else:
            back.insert(0, pieces[j])
            j -= 1
    return front + back


def by_device(g, pieces):
    """Each piece cut further into consecutive runs that one device runs whole (a graph
    whose nodes need different devices cannot be one sub-graph)."""
    from dynshape.partitioning.graph import DEVICES
    out = []
    for p in pieces:
        run, common = [], None
        for n in p:
            devs = set(g.nodes[n][DEVICES])
            if run and not (common & devs):
                out.append(run)
                run, common = [], None
            run.append(n)
            common = devs if common is None else common & devs
        out.append(run)
    return out


def serial_partition(g, fusion=None, **limits):
    """[nodes] in chain order: the sub-graphs of method 002."""
    if fusion not in FUSIONS:
        raise ArgumentError(f"unknown fusion {fusion!r}; accepted: greedy, bidirectional, None")
    budget = Budget(**limits)
    pieces = by_device(g, resplit(g, split(g), budget))
    return by_device(g, fuse(g, pieces, budget, fusion))
