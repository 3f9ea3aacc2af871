"""A plan: the graph resolved once into a flat list of steps over numbered value slots, run
without per-node look-ups (seed 003's kernel graph, CPU reading: "a precomputed execution
plan run without per-kernel Python dispatch").

Each step is (function, input slots, output slots, slots dead after it). Initializers sit in
their slots for good; every other slot is released as soon as its last reader has run, so a
run holds only the live intermediates (liveness). Kernel calls inside the steps go through
``dynshape.run``, whose replay path calls the recorded driver directly for a layout seen
before: a repeated shape costs no op-spec validation, no table look-up, no compilation.
"""
from dynshape.graph.lowering import device, lower


class Plan:
    def __init__(self, graph):
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
            self.steps.append((lower(n), tuple(slot[i] if i else -1 for i in n.inputs),
                               tuple(slot[o] if o else -1 for o in n.outputs), dead))
        self.inputs = [slot[v.name] for v in graph.inputs]
        self.outputs = {v.name: slot[v.name] for v in graph.outputs}
        self.devices = [device(n) for n in graph.nodes]

    def run(self, feeds, trace=None):
        """Run on ``feeds`` (arrays in the order of the graph's inputs); returns the slots.
        ``trace(k, outputs)`` is called after step k when given (explain)."""
        slots = self.base.copy()
        for i, a in zip(self.inputs, feeds):
            slots[i] = a
        for k, (fn, ins, outs, dead) in enumerate(self.steps):
            res = fn([slots[i] if i >= 0 else None for i in ins])
            for o, r in zip(outs, res):
                if o >= 0:
                    slots[o] = r
            for d in dead:
                slots[d] = None
            if trace is not None:
                trace(k, res)
        return slots
