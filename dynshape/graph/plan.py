"""A plan: the graph resolved once into a flat list of steps over numbered value slots, run
without per-node look-ups (seed 003's kernel graph, CPU reading: "a precomputed execution
plan run without per-kernel Python dispatch").

Steps that read only constants are folded when the plan is built. Steps that read only
constants and the inputs' *shapes* (Shape, and the shape arithmetic after it: Gather,
Concat, Unsqueeze, ...) run once per input shape: their results are kept per shape (a
bounded number of shapes, least recently used dropped) and later runs with that shape run
only the other steps.

Each step is (function, input slots, output slots, slots dead after it). Initializers sit in
their slots for good; every other slot is released as soon as its last reader has run, so a
run holds only the live intermediates (liveness). Kernel calls inside the steps go through
``dynshape.run``, whose replay path calls the recorded driver directly for a layout seen
before: a repeated shape costs no op-spec validation, no table look-up, no compilation.
"""
from collections import OrderedDict

from dynshape.graph.lowering import device, lower

#: input shapes whose shape-arithmetic results a plan keeps
MAX_SHAPES = 64


class Plan:
    """``placement``: node name -> device ("cpu" or "host") from a partition (default: each
    node on its own device); the steps then run in the partition's order."""

    def __init__(self, graph, placement=None):
        slot = {}
        for name in list(graph.initializers) + [v.name for v in graph.inputs]:
            slot.setdefault(name, len(slot))
        for n in graph.nodes:
            for o in n.outputs:
                if o:
                    slot.setdefault(o, len(slot))
        self.slot = slot
        self.n_slots = len(slot)
        self.base = [None] * self.n_slots
        for name, arr in graph.initializers.items():
            self.base[slot[name]] = arr
        keep = set(graph.initializers) | {v.name for v in graph.outputs}
        last = {}
        for k, n in enumerate(graph.nodes):
            for i in n.inputs:
                if i:
                    last[i] = k
        self.steps = []
        self.nodes = graph.nodes
        for k, n in enumerate(graph.nodes):
            dead = tuple(slot[i] for i in set(n.inputs) if i and last.get(i) == k
                         and i not in keep)
            on = placement.get(n.name) if placement else None
            self.steps.append((lower(n, on), tuple(slot[i] if i else -1 for i in n.inputs),
                               tuple(slot[o] if o else -1 for o in n.outputs), dead))
        self.inputs = [slot[v.name] for v in graph.inputs]
        self.outputs = {v.name: slot[v.name] for v in graph.outputs}
        self.devices = [(placement or {}).get(n.name) or device(n) for n in graph.nodes]
        # constant steps (fold now) and shape steps (once per input shape)
        const = {slot[n] for n in graph.initializers}
        shaped = set()
        self.kind = []
        for n, (_, ins, outs, _) in zip(graph.nodes, self.steps):
            real = [i for i in ins if i >= 0]
            if all(i in const for i in real) and n.op != "Dropout":
                const.update(o for o in outs if o >= 0)
                self.kind.append("const")
            elif n.op == "Shape" or (real and all(i in const or i in shaped for i in real)):
                shaped.update(o for o in outs if o >= 0)
                self.kind.append("shape")
            else:
                self.kind.append("data")
        self._fold()
        self._per_shape = OrderedDict()

    def _fold(self):
        """Run the constant steps now; their outputs join the base slots."""
        slots = self.base
        for kind, (fn, ins, outs, _) in zip(self.kind, self.steps):
            if kind == "const":
                for o, r in zip(outs, fn([slots[i] if i >= 0 else None for i in ins])):
                    if o >= 0:
                        slots[o] = r
        self.base = slots
    def run(self, feeds, trace=None):
        """Run on ``feeds`` (arrays in the order of the graph's inputs); returns the slots.
        ``trace(k, outputs)`` is called after step k when given (explain: every step runs)."""
        key = tuple(a.shape for a in feeds)
        known = self._per_shape.get(key) if trace is None else None
        if known is not None:
            self._per_shape.move_to_end(key)
            slots, steps = known[0].copy(), known[1]
        else:
            slots = self.base.copy()
            steps = [(k, st) for k, st in enumerate(self.steps) if self.kind[k] != "const"]
        for i, a in zip(self.inputs, feeds):
            slots[i] = a
        learn = known is None and trace is None
        shape_vals = {}
        for k, (fn, ins, outs, dead) in steps:
            res = fn([slots[i] if i >= 0 else None for i in ins])
            for o, r in zip(outs, res):
                if o >= 0:
                    slots[o] = r
                    if learn and self.kind[k] == "shape":
                        shape_vals[o] = r
            for d in dead:
                slots[d] = None
            if trace is not None:
                trace(k, res)
        if learn:
            self._remember(key, shape_vals)
        return slots

    def _remember(self, key, shape_vals):
        """Keep the shape steps' results for input shapes ``key``."""
        base = self.base.copy()
        for o, v in shape_vals.items():
            base[o] = v
        data = [(k, st) for k, st in enumerate(self.steps) if self.kind[k] == "data"]
        self._per_shape[key] = (base, data)
        if len(self._per_shape) > MAX_SHAPES:
            self._per_shape.popitem(last=False)
