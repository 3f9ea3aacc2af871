"""Method 001: classify nodes, merge them into typed sub-models, assign types by policy.

Labels: 1 for nodes the accelerator ("cpu": dynshape's kernels) supports, 2 otherwise.
Initial sub-models merge parent -> child pairs of one label, never into a ring (A -> B and
A -> C -> B: A and B merge only together with C). The merge check joins a sub-model whose
output node is a *specific* node with the sub-model of that node's consumer (the result is
type 2). Types by policy, compute = the number of compute nodes (``compute`` > 0):

* S1331: every label-1 sub-model is type 1, every label-2 one type 2;
* S1332: only the label-1 sub-model with the most compute is type 1;
* S1333: the label-1 sub-models whose compute exceeds ``threshold`` are type 1;
* S1334: the largest one plus all above ``threshold``.

Type 1 runs on the accelerator, type 2 on the fallback device ("host"). A type-2 sub-model
with a node the fallback cannot run stays on the accelerator (said in its note).
"""
from dynshape.errors import ArgumentError
from dynshape.partitioning.graph import (COMPUTE, DEVICES, KIND, common_devices, device_for,
                                         execution_order, quotient_acyclic)

POLICIES = ("S1331", "S1332", "S1333", "S1334")


def _merge_pass(g, groups, where, label):
    """One pass over the edges in execution order merging same-label groups without rings;
    returns whether anything merged."""
    merged = False
    for u, v in sorted(g.edges, key=lambda e: (where_order(g, e[0]), where_order(g, e[1]))):
        a, b = where[u], where[v]
        if a == b or label[u] != label[v]:
            continue
        if _merge(g, groups, where, a, b):
            merged = True
    return merged


def _merge(g, groups, where, a, b):
    """Merge group b into group a when one device runs the union and no ring appears."""
    union = groups[a] | groups[b]
    if not common_devices(g, union) or not _acyclic(g, where, a, b):
        return False
    groups[a] = union
    for n in groups[b]:
        where[n] = a
    del groups[b]
    return True


def _acyclic(g, where, a, b):
    """Whether merging groups a and b keeps the sub-model graph free of rings."""
    return quotient_acyclic(g, {n: (a if k == b else k) for n, k in where.items()})


def where_order(g, n):
    return g.nodes[n].get("order", 0)


def typed_partition(g, policy="S1331", threshold=0, specific=(), accel="cpu",
                    fallback="host"):
    """[(nodes, device, note)] in execution order: the sub-models of method 001."""
    if policy not in POLICIES:
        raise ArgumentError(f"unknown policy {policy!r}; accepted: {', '.join(POLICIES)}")
    order = execution_order(g)
    label = {n: 1 if accel in g.nodes[n][DEVICES] else 2 for n in g.nodes}
    for n in g.nodes:                       # data outputs follow their producer
        if g.nodes[n].get(KIND) == "output":
            preds = list(g.predecessors(n))
            if preds:
                label[n] = label[preds[0]]
    groups = {k: {n} for k, n in enumerate(order)}
    where = {n: k for k, n in enumerate(order)}
    while _merge_pass(g, groups, where, label):
        pass
    forced = set()
    specific = set(specific)
    changed = True
    while changed and specific:
        changed = False
        for gid, members in list(groups.items()):
            if gid not in groups:
                continue
            for n in members:
                if n not in specific and g.nodes[n].get("op") not in specific:
                    continue
                outside = [s for s in g.successors(n) if where[s] != gid]
                if not outside:
                    continue
                other = where[outside[0]]
                if not _merge(g, groups, where, gid, other):
                    continue
                forced.add(gid)
                forced.discard(other)
                changed = True
                break
    subs = sorted(groups.items(), key=lambda kv: min(order.index(n) for n in kv[1]))
    compute = {gid: sum(1 for n in m if g.nodes[n].get(COMPUTE, 0) > 0 and label[n] == 1)
               for gid, m in subs}
    ones = [gid for gid, m in subs if gid not in forced and all(label[n] == 1 for n in m)]
    largest = max(ones, key=lambda k: compute[k]) if ones else None
    if policy == "S1331":
        type1 = set(ones)
    elif policy == "S1332":
        type1 = {largest} if largest is not None else set()
    elif policy == "S1333":
        type1 = {k for k in ones if compute[k] > threshold}
    else:
        type1 = {k for k in ones if compute[k] > threshold} | ({largest} if largest is not
                                                                 None else set())
    out = []
    for gid, m in subs:
        nodes = sorted(m, key=order.index)
        note = ""
        if gid in type1:
            dev = accel
        elif all(fallback in g.nodes[n][DEVICES] for n in nodes):
            dev = fallback
        else:
            dev = device_for(g, nodes, accel)
            note = f"type 2, but {fallback} cannot run every node: on {dev}"
        out.append((nodes, dev, note, 1 if gid in type1 else 2, compute[gid]))
    return out
