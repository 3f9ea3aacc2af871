"""Method 000: partition by depth, dependency and device support.

Depths in topological order; take the first node (in execution order) not yet placed; an
unsupported node forms a sub-model of its own (or, with ``group_unsupported``, with the
consecutive unsupported nodes after it); a supported node grows by its neighbours that are
unplaced, supported and continuous (depth +- 1 from the neighbour they touch, or uniquely
depended on: the only consumer or the only producer). The grown set is contracted and
depths recomputed before the next pick. A merge that would create a path leaving the
sub-model and coming back is refused (the seed has no such guard).
"""
from dynshape.partitioning.graph import DEVICES, device_for, execution_order, nx, quotient_acyclic


def _acyclic(g, assign, members):
    """Whether placing ``members`` as one group (beside the groups placed) keeps the
    sub-model graph free of rings."""
    key = dict(assign)
    key.update({n: "new" for n in members})
    return quotient_acyclic(g, key)


def _depths(q):
    d = {}
    for n in nx().topological_sort(q):
        preds = list(q.predecessors(n))
        d[n] = 1 + max(d[p] for p in preds) if preds else 0
    return d


def _quotient(g, groups, assign):
    """The graph with each placed group contracted to one node (named by its group id)."""
    q = nx().DiGraph()
    key = {n: ("g", assign[n]) if n in assign else n for n in g.nodes}
    q.add_nodes_from(set(key.values()))
    for u, v in g.edges:
        if key[u] != key[v]:
            q.add_edge(key[u], key[v])
    return q, key


def depth_partition(g, accel="cpu", group_unsupported=False):
    """[(nodes, device)] in execution order: the sub-models of method 000."""
    order = execution_order(g)
    assign, groups = {}, []
    for start in order:
        if start in assign:
            continue
        q, key = _quotient(g, groups, assign)
        depth = _depths(q)
        if accel not in g.nodes[start][DEVICES]:
            members = [start]
            if group_unsupported:
                for n in order[order.index(start) + 1:]:
                    if n in assign or accel in g.nodes[n][DEVICES]:
                        break
                    if not _acyclic(g, assign, members + [n]):
                        break
                    members.append(n)
            for n in members:
                assign[n] = len(groups)
            groups.append(members)
            continue
        members = [start]
        changed = True
        while changed:
            changed = False
            for m in list(members):
                for t in list(g.predecessors(m)) + list(g.successors(m)):
                    if t in assign or t in members or accel not in g.nodes[t][DEVICES]:
                        continue
                    continuous = abs(depth[key[t]] - depth[key[m]]) == 1
                    unique = list(g.successors(t)) == [m] or list(g.predecessors(t)) == [m]
                    if not (continuous or unique) or not _acyclic(g, assign, members + [t]):
                        continue
                    members.append(t)
                    changed = True
        for n in members:
            assign[n] = len(groups)
        groups.append(members)
    return [(sorted(m, key=order.index), device_for(g, m, accel)) for m in groups]
