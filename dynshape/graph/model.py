"""``Model``: an ONNX model run by dynshape, with onnxruntime.InferenceSession's interface
(``run(output_names, input_feed)``, ``get_inputs()``, ``get_outputs()``)."""
from dataclasses import dataclass

import numpy as np

from dynshape.graph.errors import InputError
from dynshape.graph.plan import Plan
from dynshape.graph.rewrites import rewrite


@dataclass(frozen=True)
class NodeArg:
    """An input or output as onnxruntime describes it: name, type ('tensor(float)'), shape
    (ints, symbolic dim names, or None for unknown dims)."""
    name: str
    type: str
    shape: list


def _type_name(dtype):
    names = {"float32": "float", "float64": "double", "int64": "int64", "int32": "int32",
             "bool": "bool", "float16": "float16", "uint8": "uint8", "int8": "int8"}
    return f"tensor({names.get(str(dtype), str(dtype))})" if dtype is not None else "tensor(?)"


class Model:
    def __init__(self, graph, optimize=True):
        self.graph = graph
        self.rewrites = rewrite(graph) if optimize else {}
        self.plan = Plan(graph)
        self.partition = None
        self._in = {v.name: v for v in graph.inputs}

    def use_partition(self, partition):
        """Run as the sub-models of ``partition`` (see :func:`load_onnx`): nodes in the
        sub-models' order, each node on its sub-model's device; data moves only at the
        sub-model boundaries. Returns the Partition (also ``self.partition``)."""
        from dynshape.partitioning import Partition
        from dynshape.partitioning import partition as make
        if isinstance(partition, str):
            partition = make(self, partition)
        elif isinstance(partition, dict):
            opts = dict(partition)
            partition = make(self, opts.pop("method", "depth"), **opts)
        elif not isinstance(partition, Partition):
            raise InputError(f"partition must be a method name, a dict or a Partition, got "
                             f"{type(partition).__name__}")
        by_name = {n.name: n for n in self.graph.nodes}
        order = [by_name[n] for s in partition.submodels for n in s.nodes if n in by_name]
        if len(order) != len(self.graph.nodes):
            raise InputError("the partition does not cover this model's nodes (was it made "
                             "for another model?)")
        self.graph.nodes = order
        self.plan = Plan(self.graph, partition.placement())
        self.partition = partition
        return partition

    # ---- description ---------------------------------------------------------------------
    def get_inputs(self):
        return [NodeArg(v.name, _type_name(v.dtype), list(v.shape or [])) for v in
                self.graph.inputs]

    def get_outputs(self):
        return [NodeArg(v.name, _type_name(v.dtype), list(v.shape or [])) for v in
                self.graph.outputs]

    # ---- running -------------------------------------------------------------------------
    def _feeds(self, input_feed):
        if not isinstance(input_feed, dict):
            raise InputError(f"input_feed must be a dict name -> array, got "
                             f"{type(input_feed).__name__}")
        unknown = sorted(set(input_feed) - set(self._in))
        if unknown:
            raise InputError(f"unknown input(s) {', '.join(map(repr, unknown))}; the model's "
                             f"inputs: {', '.join(self._in)}")
        missing = [n for n in self._in if n not in input_feed]
        if missing:
            raise InputError(f"missing input(s) {', '.join(map(repr, missing))}")
        dims, feeds = {}, []
        for name, v in self._in.items():
            a = np.asarray(input_feed[name])
            if v.dtype is not None and a.dtype != v.dtype:
                raise InputError(f"input {name!r} has dtype {a.dtype}; the model expects "
                                 f"{v.dtype}")
            if v.shape is not None:
                if a.ndim != len(v.shape):
                    raise InputError(f"input {name!r} has rank {a.ndim} (shape {a.shape}); "
                                     f"the model expects rank {len(v.shape)} "
                                     f"({list(v.shape)})")
                for k, (d, n) in enumerate(zip(v.shape, a.shape)):
                    if isinstance(d, int) and d > 0 and d != n:
                        raise InputError(f"input {name!r} has size {n} on axis {k}; the "
                                         f"model fixes it to {d}")
                    if isinstance(d, str):
                        seen = dims.setdefault(d, (n, name))
                        if seen[0] != n:
                            raise InputError(f"symbolic dim {d!r} is {seen[0]} in input "
                                             f"{seen[1]!r} but {n} in input {name!r}")
            feeds.append(a)
        return feeds

    def run(self, output_names, input_feed, run_options=None):
        """Run the model; returns the outputs named (all when None) as a list of arrays."""
        names = list(self.plan.outputs) if output_names is None else list(output_names)
        bad = [n for n in names if n not in self.plan.outputs]
        if bad:
            raise InputError(f"unknown output(s) {', '.join(map(repr, bad))}; the model's "
                             f"outputs: {', '.join(self.plan.outputs)}")
        slots = self.plan.run(self._feeds(input_feed))
        return [_owned(slots[self.plan.outputs[n]]) for n in names]

    def run_batch(self, output_names, feeds_list):
        """Run several requests: those whose inputs agree on every dim but the first (the
        batch axis) are concatenated along it and run as one call, then split back; each
        request gets exactly its own rows (nothing is padded, so nothing leaks)."""
        groups = {}
        for k, feed in enumerate(feeds_list):
            self._feeds(feed)
            key = tuple((n, np.shape(feed[n])[1:]) for n in self._in)
            groups.setdefault(key, []).append(k)
        results = [None] * len(feeds_list)
        for idx in groups.values():
            sizes = [int(np.shape(feeds_list[k][next(iter(self._in))])[0]) for k in idx]
            joined = {n: np.concatenate([np.asarray(feeds_list[k][n]) for k in idx])
                      for n in self._in}
            outs = self.run(output_names, joined)
            cuts = np.cumsum(sizes)[:-1]
            total = sum(sizes)
            for o_i, o in enumerate(outs):
                if o.ndim == 0 or o.shape[0] != total:
                    raise InputError("run_batch needs every output to keep the batch axis "
                                     f"first (output {o_i} has shape {o.shape} for a batch "
                                     f"of {total}); run the requests one by one")
                for k, part in zip(idx, np.split(o, cuts)):
                    results[k] = (results[k] or []) + [part]
        return results

    def warmup(self, shapes):
        """Prepare the plan for ``shapes`` (dict name -> shape, or a list of such dicts): run
        once on zeros with every kernel's optimized table built now and, when a table
        directory is set (``dynshape.set_table_dir``), saved there, so that a later process
        loading the same model and directory builds no table (``cache_stats()``:
        ``tables_loaded``); the shape arithmetic of each shape is kept."""
        from dynshape.runtime import config
        for s in ([shapes] if isinstance(shapes, dict) else shapes):
            with config.policy_scope("warmup"):
                self.run(None, self._zeros(s))

    def _zeros(self, shapes):
        return {n: np.zeros(tuple(shapes[n]), dtype=v.dtype or np.float32)
                for n, v in self._in.items()}

    def explain(self, shapes):
        """The plan at ``shapes`` (dict name -> shape) as text: every step with its device,
        output shapes and, for kernel steps, the table it ran; the rewrites applied. The plan
        is run once on zeros to find the shapes."""
        from dynshape import api
        lines = [f"plan: {len(self.plan.steps)} steps ({self.plan.devices.count('cpu')} on "
                 f"dynshape kernels, {self.plan.devices.count('host')} on the host), "
                 f"{self.plan.n_slots} value slots; rewrites: "
                 + ", ".join(f"{k} {v}" for k, v in self.rewrites.items())]
        nodes = self.plan.nodes

        def trace(k, res):
            n = nodes[k]
            shapes_ = ", ".join("x".join(map(str, np.shape(r))) or "scalar" for r in res)
            line = f"  {k:3d} {self.plan.devices[k]:4s} {n.op:20s} {n.name}: -> {shapes_}"
            t = api.last_table() if self.plan.devices[k] == "cpu" else None
            if t is not None:
                line += f"  [{t.op} {t.dtype}, {len(t)} entries, {getattr(t, 'variant', '')}]"
            lines.append(line)
        self.plan.run(self._feeds(self._zeros(shapes)), trace)
        return "\n".join(lines)


def _owned(a):
    """A result the caller owns (never a view of a weight or another output)."""
    a = np.asarray(a)
    return a if a.flags.owndata and a.flags.writeable else np.array(a)
