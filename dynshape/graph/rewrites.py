"""Rewrites that make real exports fast, on the IR, before the plan is built:

* ``Pow`` by a constant 2 or 3 becomes products of x;
* the Erf subgraph of GELU (``x * 0.5 * (1 + erf(x / sqrt 2))`` in either association, or
  with ``x * (1/sqrt 2)``) becomes one ``Gelu`` node, and so does its tanh form
  (``approximate="tanh"``, the cube as ``Pow(x, 3)``);
* ``BatchNormalization`` after a ``Conv`` whose weights are initializers is folded into the
  conv's weights and bias;
* ``MatMul`` + ``Add`` of a bias vector becomes one matmul with a bias epilogue, and a
  following ``Relu`` its activation; ``Conv`` + ``Relu`` likewise;
* chains of elementwise nodes become one dynshape fused sequence (``DsFused``).

A rewrite applies only where the intermediate values are read by nothing else and are not
graph outputs, so results are unchanged (up to rounding).
"""
import math

import numpy as np


class _Index:
    def __init__(self, graph):
        self.g = graph
        self.prod = graph.producers()
        self.cons = graph.consumers()
        self.outs = {v.name for v in graph.outputs}

    def const(self, name):
        """The constant value of ``name`` (an initializer or a Constant node), or None."""
        if name in self.g.initializers:
            return self.g.initializers[name]
        p = self.prod.get(name)
        if p is not None and p.op == "Constant" and "value" in p.attrs:
            return np.asarray(p.attrs["value"])
        return None

    def only_reader(self, name):
        """The single node reading ``name`` (None if several, none, or a graph output)."""
        readers = self.cons.get(name, [])
        return readers[0] if len(readers) == 1 and name not in self.outs else None

    def other(self, node, name):
        a, b = node.inputs[:2]
        return b if a == name else a if b == name else None


def _near(v, target):
    return v is not None and v.size == 1 and abs(float(v.reshape(())) - target) < 1e-4


def _gelu_tail(ix, x, inner):
    """The nodes computing ``0.5 * x * (1 + inner)`` from the node ``inner``, in either
    association: (their output, [nodes]) or None."""
    add = ix.only_reader(inner.outputs[0])
    if add is None or add.op != "Add" or not _near(ix.const(ix.other(add, inner.outputs[0])), 1):
        return None
    m1 = ix.only_reader(add.outputs[0])
    if m1 is None or m1.op != "Mul":
        return None
    o1 = ix.other(m1, add.outputs[0])
    if o1 == x:                                      # (x * (1 + inner)) * 0.5
        m2 = ix.only_reader(m1.outputs[0])
        if m2 is None or m2.op != "Mul" or not _near(ix.const(ix.other(m2, m1.outputs[0])),
                                                     0.5):
            return None
        return m2.outputs[0], [add, m1, m2]
    h = ix.prod.get(o1)                              # (x * 0.5) * (1 + inner)
    if h is None or h.op != "Mul" or ix.other(h, x) is None or \
            not _near(ix.const(ix.other(h, x)), 0.5) or ix.only_reader(o1) is not m1:
        return None
    return m1.outputs[0], [add, h, m1]


def _const_operand(ix, node, target):
    """The other operand of a binary ``node`` one of whose operands is the constant
    ``target``, or None."""
    a, b = node.inputs[:2]
    if _near(ix.const(b), target):
        return a
    if _near(ix.const(a), target):
        return b
    return None


def _erf_gelu(ix, e):
    """(x, the nodes of x / sqrt 2 (or x * (1 / sqrt 2)) and the Erf) of an Erf node."""
    d = ix.prod.get(e.inputs[0])
    x = None
    if d is not None and d.op == "Div" and _near(ix.const(d.inputs[1]), math.sqrt(2)):
        x = d.inputs[0]
    elif d is not None and d.op == "Mul":
        x = _const_operand(ix, d, 1 / math.sqrt(2))
    return None if x is None else (x, [d, e])


def _tanh_gelu(ix, t):
    """(x, the nodes of sqrt(2/pi) * (x + 0.044715 * x ** 3) and the Tanh) of a Tanh node
    (the cube as ``Pow(x, 3)``: exported tanh-GELU, before :func:`pow_products`)."""
    m = ix.prod.get(t.inputs[0])
    s = _const_operand(ix, m, math.sqrt(2 / math.pi)) if m is not None and m.op == "Mul" \
        else None
    a = ix.prod.get(s) if s is not None else None
    if a is None or a.op != "Add":
        return None
    for x, k in (a.inputs[:2], a.inputs[1::-1]):
        kn = ix.prod.get(k)
        c = _const_operand(ix, kn, 0.044715) if kn is not None and kn.op == "Mul" else None
        pn = ix.prod.get(c) if c is not None else None
        if pn is not None and pn.op == "Pow" and pn.inputs[0] == x and \
                _near(ix.const(pn.inputs[1]), 3):
            return x, [pn, kn, a, m, t]
    return None


def fuse_gelu(graph):
    """GELU subgraphs into one ``Gelu`` node: ``0.5 * x * (1 + erf(x / sqrt 2))`` and the
    tanh form ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x ** 3)))``
    (``approximate="tanh"``), each in either association of the outer products."""
    ix = _Index(graph)
    drop, n_done = set(), 0
    for e in list(graph.nodes):
        if e.name in drop:
            continue
        head = _erf_gelu(ix, e) if e.op == "Erf" else _tanh_gelu(ix, e) if e.op == "Tanh" \
            else None
        tail = _gelu_tail(ix, head[0], e) if head is not None else None
        if tail is None:
            continue
        x, first = head
        out, dead = tail[0], first + tail[1]
        # every intermediate value is read by the next node only (x by several)
        if any(ix.only_reader(n.outputs[0]) is None for n in dead[:-1]):
            continue
        drop.update(n.name for n in dead)
        last = dead[-1]
        last.op, last.inputs = "Gelu", [x]
        last.attrs = {"approximate": "none" if e.op == "Erf" else "tanh"}
        last.outputs = [out]
        drop.discard(last.name)
        n_done += 1
    graph.nodes = [n for n in graph.nodes if n.name not in drop]
    return n_done


def fold_batch_norm(graph):
    ix = _Index(graph)
    drop, n_done = set(), 0
    for bn in list(graph.nodes):
        if bn.op != "BatchNormalization" or len(bn.outputs) > 1 and any(bn.outputs[1:]):
            continue
        c = ix.prod.get(bn.inputs[0])
        if c is None or c.op != "Conv" or ix.only_reader(c.outputs[0]) is not bn:
            continue
        params = [ix.const(i) for i in bn.inputs[1:5]]
        w = graph.initializers.get(c.inputs[1])
        if w is None or any(p is None for p in params) or \
                len(ix.cons.get(c.inputs[1], [])) != 1:
            continue
        scale, beta, mean, var = (p.astype(np.float64) for p in params)
        a = scale / np.sqrt(var + bn.attrs.get("epsilon", 1e-5))
        b0 = graph.initializers.get(c.inputs[2]) if len(c.inputs) > 2 and c.inputs[2] else None
        b0 = np.zeros(w.shape[0]) if b0 is None else b0.astype(np.float64)
        wname, bname = c.inputs[1] + "_bnfold", c.name + "_bnfold_bias"
        graph.initializers[wname] = (w * a.reshape(-1, *([1] * (w.ndim - 1)))).astype(w.dtype)
        graph.initializers[bname] = ((b0 - mean) * a + beta).astype(w.dtype)
        c.inputs = [c.inputs[0], wname, bname]
        c.outputs = [bn.outputs[0]]
        drop.add(bn.name)
        n_done += 1
    graph.nodes = [n for n in graph.nodes if n.name not in drop]
    return n_done


def gemm_to_matmul(graph):
    """Gemm with constant B (alpha = beta = 1, transA = 0) and a constant bias vector C (or
    none): a MatMul of B laid out once as K x N (transposed now when transB) with the bias
    epilogue: the layer's call then replays with nothing to transpose or check."""
    ix = _Index(graph)
    n_done = 0
    for n in graph.nodes:
        a = n.attrs
        if n.op != "Gemm" or a.get("alpha", 1.0) != 1.0 or a.get("transA", 0):
            continue
        w = graph.initializers.get(n.inputs[1])
        c = ix.const(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
        if w is None or w.ndim != 2 or len(ix.cons.get(n.inputs[1], [])) != 1:
            continue
        if len(n.inputs) > 2 and n.inputs[2] and (c is None or a.get("beta", 1.0) != 1.0):
            continue
        if c is not None and not (c.ndim == 1 or c.ndim == 2 and c.shape[0] == 1):
            continue
        wname = n.inputs[1] + "_kn"
        graph.initializers[wname] = np.ascontiguousarray(w.T if a.get("transB", 0) else w)
        n.op, n.inputs, n.attrs = "MatMul", [n.inputs[0], wname], {}
        if c is not None:
            n.attrs["_bias"] = np.ascontiguousarray(c.reshape(-1))
        n_done += 1
    return n_done


def epilogues(graph):
    """MatMul + Add(bias vector) [+ Relu] and Conv + Relu into one kernel call."""
    ix = _Index(graph)
    drop, n_done = set(), 0
    for n in list(graph.nodes):
        if n.op not in ("MatMul", "Conv") or n.name in drop:
            continue
        out = n.outputs[0]
        nxt = ix.only_reader(out)
        if n.op == "MatMul" and nxt is not None and nxt.op == "Add" and "_bias" not in n.attrs:
            bias = ix.const(ix.other(nxt, out))
            if bias is not None and bias.ndim == 1:
                n.attrs = dict(n.attrs, _bias=bias)
                n.outputs = [nxt.outputs[0]]
                drop.add(nxt.name)
                out = nxt.outputs[0]
                n_done += 1
                ix = _Index(graph)
                nxt = ix.only_reader(out)
        if nxt is not None and nxt.op == "Relu":
            n.attrs = dict(n.attrs, _activation="relu")
            n.outputs = [nxt.outputs[0]]
            drop.add(nxt.name)
            n_done += 1
        graph.nodes = [m for m in graph.nodes if m.name not in drop]
        ix = _Index(graph)
    return n_done


def prune(graph):
    """Drop nodes whose outputs nothing reads and that are not graph outputs (constants a
    rewrite left unused), repeatedly."""
    dropped = 0
    while True:
        ix = _Index(graph)
        dead = [n for n in graph.nodes
                if not any(o in ix.cons or o in ix.outs for o in n.outputs if o)]
        if not dead:
            return dropped
        names = {n.name for n in dead}
        graph.nodes = [n for n in graph.nodes if n.name not in names]
        dropped += len(dead)


def _fresh(name, taken):
    """``name``, suffixed until it is in no use; recorded as taken."""
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def pow_products(graph):
    """``Pow`` by a constant float exponent 2 or 3 becomes products: ``Mul(x, x)`` (the
    variance in exported LayerNorm and RMSNorm subgraphs: the correctly rounded square) and
    ``Mul(Mul(x, x), x)`` (the cube of exported tanh-GELU, as ONNX Runtime and PyTorch
    compute it). A general power costs an exp and a log per element."""
    ix = _Index(graph)
    n = 0
    nodes = []
    taken = set(ix.prod) | set(graph.initializers) | {v.name for v in graph.inputs} | \
        {nd.name for nd in graph.nodes}
    for node in graph.nodes:
        c = ix.const(node.inputs[1]) if node.op == "Pow" and len(node.inputs) == 2 else None
        e = float(c.reshape(())) if c is not None and c.size == 1 and c.dtype.kind == "f" \
            else None
        if e == 2:
            node.op = "Mul"
            node.inputs = [node.inputs[0], node.inputs[0]]
            n += 1
        elif e == 3:
            x = node.inputs[0]
            sq = _fresh(node.outputs[0] + "_square", taken)
            nodes.append(type(node)(_fresh(node.name + "_square", taken), "Mul", [x, x], [sq]))
            node.op = "Mul"
            node.inputs = [sq, x]
            n += 1
        nodes.append(node)
    graph.nodes[:] = nodes
    return n


def rewrite(graph):
    """Apply every rewrite; returns {rewrite: count}."""
    # GELU first: its tanh form is matched with its cube still a Pow
    return {"gelu": fuse_gelu(graph), "pow_products": pow_products(graph),
            "batch_norm_folded": fold_batch_norm(graph),
            "gemm_to_matmul": gemm_to_matmul(graph),
            "epilogues": epilogues(graph), "fused_chains": fuse_chains(graph),
            "pruned": prune(graph)}


#: ONNX unary op -> the fused step (dynshape op name) it becomes
_CHAIN_UNARY = {"Relu": "relu", "Abs": "abs", "Neg": "neg", "Exp": "exp", "Log": "log",
                "Sqrt": "sqrt", "Sigmoid": "sigmoid", "Tanh": "tanh", "Reciprocal": "reciprocal"}
_CHAIN_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}


def _step(ix, node, running):
    """(fused step, side value name or None) for ``node`` applied to the running value, or
    None when the node cannot join a chain."""
    if node.op in _CHAIN_UNARY:
        return _CHAIN_UNARY[node.op], None
    if node.op in ("Softmax", "LogSoftmax") and node.attrs.get("axis", -1) == -1:
        return ("softmax" if node.op == "Softmax" else "log_softmax"), None
    if node.op == "Gelu":
        return ("gelu", {"approximate": node.attrs.get("approximate", "none")}), None
    if node.op == "LeakyRelu":
        return ("leaky_relu", {"alpha": float(node.attrs.get("alpha", 0.01))}), None
    if node.op in _CHAIN_BINARY and len(node.inputs) == 2:
        a, b = node.inputs
        other = b if a == running else a if b == running else None
        if other is None or a == b:
            return None
        c = ix.const(other)
        name = _CHAIN_BINARY[node.op]
        if c is not None and c.size == 1 and c.dtype.kind == "f":
            v = float(c.reshape(()))
            return ((name, v) if a == running else (name, v, "_")), None
        side = "s_" + other.replace(".", "_").replace("/", "_").replace(":", "_")
        return ((name, side) if a == running else (name, side, "_")), other
    return None


def fuse_chains(graph):
    """Chains of two or more elementwise nodes (each intermediate read by the next node
    only) into one ``DsFused`` node running a dynshape fused sequence: one pass over the
    data, no intermediate tensors."""
    from dynshape.fusion.run import fuse
    ix = _Index(graph)
    used, n_done, new_nodes = set(), 0, {}
    for n in graph.nodes:
        if n.name in used or not n.inputs or not n.outputs:
            continue
        first = _step(ix, n, n.inputs[0])
        if first is None or n.op in ("Softmax", "LogSoftmax"):
            continue
        chain, steps, sides = [n], [first[0]], [first[1]] if first[1] else []
        cur = n
        while cur.op not in ("Softmax", "LogSoftmax"):      # a row-wise op ends a chain
            nxt = ix.only_reader(cur.outputs[0])
            if nxt is None or nxt.name in used:
                break
            st = _step(ix, nxt, cur.outputs[0])
            if st is None:
                break
            chain.append(nxt)
            steps.append(st[0])
            if st[1] is not None:
                sides.append(st[1])
            cur = nxt
        if len(chain) < 2:
            continue
        names = []
        for s in steps:
            if isinstance(s, tuple) and len(s) >= 2 and isinstance(s[1], str) and \
                    s[1].startswith("s_") and s[1] not in names:
                names.append(s[1])
        side_values = []
        for nm in names:
            side_values.append(next(o for o in sides
                                    if "s_" + o.replace(".", "_").replace("/", "_")
                                    .replace(":", "_") == nm))
        try:
            f = fuse(steps)
        except Exception:
            continue
        used.update(c.name for c in chain)
        consts = {i: ix.const(i) for c in chain for i in c.inputs
                  if i and i != chain[0].inputs[0] and i not in side_values
                  and ix.const(i) is not None}
        # placed where the chain ends: every side input exists by then
        new_nodes[chain[-1].name] = type(n)(chain[-1].name + "_fused", "DsFused",
                                           [chain[0].inputs[0]] + side_values,
                                           [chain[-1].outputs[0]],
                                           {"_fused": f, "_sides": names, "_chain": list(chain),
                                            "_side_values": side_values, "_consts": consts})
        n_done += 1
    out = []
    for n in graph.nodes:
        if n.name in new_nodes:
            out.append(new_nodes[n.name])
        elif n.name not in used:
            out.append(n)
    graph.nodes = out
    return n_done
