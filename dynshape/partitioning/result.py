"""A partition: sub-models in execution order, each with its nodes and device, the
boundaries between them (the bytes that cross), and the association network id ->
sub-models -> device that a run follows."""
from dataclasses import dataclass, field

from dynshape.partitioning.graph import BYTES, KIND


@dataclass
class Submodel:
    index: int
    nodes: list
    device: str
    note: str = ""
    info: dict = field(default_factory=dict)


@dataclass
class Partition:
    method: str
    network_id: str
    submodels: list
    boundaries: list          # (from sub-model, to sub-model, bytes)
    graph: object = field(repr=False, default=None)

    @classmethod
    def of(cls, g, method, network_id, groups):
        """``groups``: [(nodes, device, note, info)]; the sub-models are numbered in a
        topological order of the sub-model graph (ties: the model's order)."""
        from dynshape.partitioning.graph import execution_order, nx
        order = {n: k for k, n in enumerate(execution_order(g))}
        gid = {n: k for k, grp in enumerate(groups) for n in grp[0]}
        q = nx().DiGraph()
        q.add_nodes_from(range(len(groups)))
        q.add_edges_from((gid[u], gid[v]) for u, v in g.edges if gid[u] != gid[v])
        first = {k: min(order[n] for n in grp[0]) for k, grp in enumerate(groups)}
        seq = list(nx().lexicographical_topological_sort(q, key=lambda k: first[k]))
        subs = [Submodel(i, sorted(groups[k][0], key=order.get), *groups[k][1:])
                for i, k in enumerate(seq)]
        where = {n: s.index for s in subs for n in s.nodes}
        cross = {}
        for u, v, d in g.edges(data=True):
            a, b = where[u], where[v]
            if a != b and g.nodes[v].get(KIND) != "output":
                cross[(a, b)] = cross.get((a, b), 0) + d.get(BYTES, g.nodes[u].get(BYTES, 0))
        return cls(method, network_id, subs, [(a, b, n) for (a, b), n in sorted(cross.items())],
                   g)

    def association(self):
        """{network id: [(sub-model index, device), ...] in execution order}."""
        return {self.network_id: [(s.index, s.device) for s in self.submodels]}

    def placement(self):
        """node -> device."""
        return {n: s.device for s in self.submodels for n in s.nodes}

    def boundary_bytes(self):
        return sum(b for _, _, b in self.boundaries)

    def explain(self):
        lines = [f"partition ({self.method}) of {self.network_id}: {len(self.submodels)} "
                 f"sub-models, {len(self.boundaries)} boundaries, {self.boundary_bytes()} "
                 f"bytes crossing"]
        for s in self.submodels:
            ops = [n for n in s.nodes if not str(n).startswith("output:")]
            extra = "".join(f" {k}={v}" for k, v in s.info.items())
            lines.append(f"  {s.index:3d} {s.device:5s} {len(ops):4d} nodes{extra}"
                         f"{' (' + s.note + ')' if s.note else ''}: "
                         f"{', '.join(map(str, ops[:6]))}{' ...' if len(ops) > 6 else ''}")
        for a, b, n in self.boundaries:
            lines.append(f"  boundary {a} -> {b}: {n} bytes")
        return "\n".join(lines)

    def picture(self, path):
        """A PNG at ``path`` of the graph, nodes coloured by sub-model (the ``plot`` extra)."""
        from dynshape.extras import require
        require("matplotlib", "partition pictures")
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        from dynshape.partitioning.graph import nx
        g = self.graph
        where = {n: s.index for s in self.submodels for n in s.nodes}
        layers = {}
        for k, gen in enumerate(nx().topological_generations(g)):
            for n in gen:
                layers[n] = k
        nx().set_node_attributes(g, layers, "layer")
        pos = nx().multipartite_layout(g, subset_key="layer")
        fig = Figure(figsize=(10, 6))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        colours = [where[n] for n in g.nodes]
        nx().draw_networkx(g, pos, ax=ax, node_color=colours, cmap="tab20", node_size=300,
                           font_size=6, labels={n: g.nodes[n].get("op", n) for n in g.nodes})
        ax.set_title(f"{self.method}: {len(self.submodels)} sub-models")
        ax.set_axis_off()
        fig.savefig(path, format="png")
        return path
