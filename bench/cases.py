"""The op cases of the core benchmark: shapes, the peers' formulations (NumPy, PyTorch, ONNX
Runtime; NumPy's and the references are in core_numpy.py), and one builder per case.

A builder returns a :class:`Built`: for one size, callables returning each implementation's
result (dynshape, NumPy, torch and ORT, each ``out=`` and allocating), the
reference they are verified against, and the bytes an ideal kernel moves. PyTorch and ONNX
Runtime are optional (``torch`` / ``ort`` are None when absent or disabled).
"""
from dataclasses import dataclass, field

import numpy as np

import dynshape
from bench.core_numpy import (EPS, REF_UNARY, TOL, np_gelu, np_layer_norm, np_sigmoid,
                               np_softmax, ref_layer_norm, ref_softmax)
from bench.harness import peers as harness_peers


# odd shapes at ~1e3, ~1e6 and ~3e7 elements (1000003, 517x1531 and 3x255x257 scaled to size)
SIZES = ("small", "medium", "large")
S1 = {"small": (1003,), "medium": (1000003,), "large": (30000001,)}
S2 = {"small": (19, 53), "medium": (581, 1723), "large": (3187, 9431)}
S3 = {"small": (3, 17, 19), "medium": (15, 255, 257), "large": (457, 255, 257)}
SOFTMAX = {"small": (7, 143), "medium": (77, 30522), "large": (983, 30522)}
LAYER_NORM = {"small": (3, 333), "medium": (4096, 768), "large": (39063, 768)}
# a bias row added to many short rows (an MLP's hidden width over a batch of tokens)
SHORT_ROWS = {"small": (64, 77), "medium": (20000, 77), "large": (400000, 77)}

# ---- optional peers (set by use(); None when absent or disabled) -------------------------
torch = F = ort = helper = TensorProto = None
_peers = None


def use(peers):
    """Take the peers loaded by the harness (bench.harness.peers.load)."""
    global torch, F, ort, helper, TensorProto, _peers
    _peers = peers
    torch, ort = peers.torch, peers.ort
    F = peers.F
    if ort:
        helper, TensorProto = peers.onnx.helper, peers.onnx.TensorProto


def ort_session(nodes, inputs, outputs, inits=(), opset=20):
    return harness_peers.ort_session(_peers, nodes, inputs, outputs, inits, opset)


def _add_ort(impls, notes, make_session, feeds, out):
    """ONNX Runtime in both forms from one session: ``ort`` (IOBinding into ``out``) and
    ``ort_alloc`` (sess.run); a session that cannot be built is a note, not fatal."""
    try:
        sess = make_session()
        impls["ort"] = harness_peers.ort_out(sess, feeds, out)
        impls["ort_alloc"] = harness_peers.ort_alloc(sess, feeds)
    except Exception as exc:
        notes["ort"] = f"n/a ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})"


# ---- cases ----------------------------------------------------------------------------------
@dataclass
class Built:
    """One case at one size: the implementations (name -> callable returning the result),
    the float64 reference, and the bytes an ideal implementation moves."""
    shape: str
    ref: np.ndarray
    tol: tuple
    nbytes: int
    impls: dict
    notes: dict = field(default_factory=dict)
    keep: list = field(default_factory=list)      # buffers that must outlive the closures
    bound: np.ndarray = None                      # atol + rtol*|ref|, built on first use


@dataclass
class Case:
    label: str
    family: str          # elementwise | reduction | rowwise
    op: str              # dynshape op name (availability check)
    shapes: dict
    build: object        # (size, rng) -> Built


def _t(a):
    return torch.from_numpy(a)


def unary_case(op, shapes):
    np_fns = {"relu": lambda x, o, s: np.maximum(x, 0, out=o),
              "exp": lambda x, o, s: np.exp(x, out=o),
              "tanh": lambda x, o, s: np.tanh(x, out=o),
              "sigmoid": lambda x, o, s: np_sigmoid(x, o),
              "gelu": lambda x, o, s: np_gelu(x, o, s)}
    t_out = {"relu": lambda t, o: torch.clamp_min(t, 0, out=o),
             "exp": lambda t, o: torch.exp(t, out=o), "tanh": lambda t, o: torch.tanh(t, out=o),
             "sigmoid": lambda t, o: torch.sigmoid(t, out=o),
             "gelu": lambda t, o: torch._C._nn.gelu(t, out=o)}
    t_alloc = {"relu": torch.relu, "exp": torch.exp, "tanh": torch.tanh,
               "sigmoid": torch.sigmoid, "gelu": F.gelu} if torch else {}
    onnx_op = {"relu": "Relu", "exp": "Exp", "tanh": "Tanh", "sigmoid": "Sigmoid",
               "gelu": "Gelu"}[op]

    def build(size, rng):
        shape = shapes[size]
        x = rng.standard_normal(shape, dtype=np.float32) * np.float32(3)
        o = [np.empty_like(x) for _ in range(4)]
        scratch = [np.empty_like(x), np.empty_like(x)] if op == "gelu" else None
        impls, notes = {}, {}
        impls["ds_out"] = lambda: dynshape.run(op, x, out=o[0])
        impls["ds_alloc"] = lambda: dynshape.run(op, x)
        impls["numpy"] = lambda: np_fns[op](x, o[1], scratch)
        impls["numpy_alloc"] = lambda: np_fns[op](
            x, np.empty_like(x), [np.empty_like(x), np.empty_like(x)] if op == "gelu" else None)
        if torch:
            tx, to = _t(x), _t(o[2])
            impls["torch_out"] = lambda: t_out[op](tx, to)
            impls["torch_alloc"] = lambda: t_alloc[op](tx)
        if ort:
            _add_ort(impls, notes, lambda: ort_session(
                [helper.make_node(onnx_op, ["x"], ["y"])], [("x", shape)], [("y", shape)]),
                     {"x": x}, o[3])
        return Built(str(shape), REF_UNARY[op](x), TOL[op], 2 * x.nbytes, impls, notes,
                     [x, o, scratch])
    return Case(f"unary {op}", "elementwise", op, shapes, build)


def binary_case(op, shapes):
    np_f = {"add": np.add, "mul": np.multiply}[op]
    onnx_op = {"add": "Add", "mul": "Mul"}[op]

    def build(size, rng):
        shape = shapes[size]
        a = rng.standard_normal(shape, dtype=np.float32)
        b = rng.standard_normal(shape, dtype=np.float32)
        o = [np.empty_like(a) for _ in range(4)]
        impls, notes = {}, {}
        impls["ds_out"] = lambda: dynshape.run(op, a, b, out=o[0])
        impls["ds_alloc"] = lambda: dynshape.run(op, a, b)
        impls["numpy"] = lambda: np_f(a, b, out=o[1])
        impls["numpy_alloc"] = lambda: np_f(a, b)
        if torch:
            ta, tb, to = _t(a), _t(b), _t(o[2])
            tf = {"add": torch.add, "mul": torch.mul}[op]
            impls["torch_out"] = lambda: tf(ta, tb, out=to)
            impls["torch_alloc"] = lambda: tf(ta, tb)
        if ort:
            _add_ort(impls, notes, lambda: ort_session(
                [helper.make_node(onnx_op, ["a", "b"], ["y"])], [("a", shape), ("b", shape)],
                [("y", shape)]),
                     {"a": a, "b": b}, o[3])
        ref = np_f(a.astype(np.float64), b)
        return Built(str(shape), ref, TOL[op], 3 * a.nbytes, impls, notes, [a, b, o])
    return Case(f"binary {op}", "elementwise", op, shapes, build)


def power_case(e, shapes):
    """pow by one exponent for the whole array, a Python number as models' ``x ** 2`` and
    ``x ** 3`` pass it (squares and cubes run without exp and log: cpu.switches), or any
    other (exp(e log|x|) per element: cpu.powf)."""
    def build(size, rng):
        shape = shapes[size]
        x = rng.standard_normal(shape, dtype=np.float32)
        if e != int(e):
            x = np.abs(x)                          # a real power for every element
        o = [np.empty_like(x) for _ in range(4)]
        impls, notes = {}, {}
        impls["ds_out"] = lambda: dynshape.run("pow", x, e, out=o[0])
        impls["ds_alloc"] = lambda: dynshape.run("pow", x, e)
        impls["numpy"] = lambda: np.power(x, np.float32(e), out=o[1])
        impls["numpy_alloc"] = lambda: np.power(x, np.float32(e))
        if torch:
            tx, to = _t(x), _t(o[2])
            impls["torch_out"] = lambda: torch.pow(tx, e, out=to)
            impls["torch_alloc"] = lambda: torch.pow(tx, e)
        if ort:
            exponent = helper.make_tensor("e", TensorProto.FLOAT, [], [e])
            _add_ort(impls, notes, lambda: ort_session(
                [helper.make_node("Pow", ["a", "e"], ["y"])], [("a", shape)], [("y", shape)],
                [exponent]), {"a": x}, o[3])
        ref = np.power(x.astype(np.float64), e)
        return Built(f"{shape} ** {e:g}", ref, TOL["pow"], 2 * x.nbytes, impls, notes, [x, o])
    return Case(f"binary pow(x, {e:g})", "elementwise", "pow", shapes, build)


def transposed_copy_case(shapes):
    def build(size, rng):
        m, n = shapes[size]
        base = rng.standard_normal((n, m), dtype=np.float32)     # contiguous (n, m)
        at = base.T                                               # (m, n) view, strided
        o = [np.empty((m, n), np.float32) for _ in range(4)]
        impls, notes = {}, {}
        impls["ds_out"] = lambda: dynshape.run("copy", at, out=o[0])
        impls["ds_alloc"] = lambda: dynshape.run("copy", at)
        impls["numpy"] = lambda: (np.copyto(o[1], at), o[1])[1]
        impls["numpy_alloc"] = lambda: np.ascontiguousarray(at)
        if torch:
            tt, to = _t(base).T, _t(o[2])
            impls["torch_out"] = lambda: to.copy_(tt)
            impls["torch_alloc"] = lambda: tt.contiguous()
        if ort:
            _add_ort(impls, notes, lambda: ort_session(
                [helper.make_node("Transpose", ["a"], ["y"], perm=[1, 0])], [("a", (n, m))],
                [("y", (m, n))]),
                     {"a": base}, o[3])
        return Built(f"{(m, n)} = a.T", at.astype(np.float64), TOL["copy"], 2 * base.nbytes,
                     impls, notes, [base, o])
    return Case("transposed copy(a.T)", "elementwise", "copy", shapes, build)


def transposed_add_case(shapes):
    def build(size, rng):
        m, n = shapes[size]
        base = rng.standard_normal((n, m), dtype=np.float32)
        at = base.T
        b = rng.standard_normal((m, n), dtype=np.float32)
        o = [np.empty((m, n), np.float32) for _ in range(4)]
        impls, notes = {}, {}
        impls["ds_out"] = lambda: dynshape.run("add", at, b, out=o[0])
        impls["ds_alloc"] = lambda: dynshape.run("add", at, b)
        impls["numpy"] = lambda: np.add(at, b, out=o[1])
        impls["numpy_alloc"] = lambda: np.add(at, b)
        if torch:
            tt, tb, to = _t(base).T, _t(b), _t(o[2])
            impls["torch_out"] = lambda: torch.add(tt, tb, out=to)
            impls["torch_alloc"] = lambda: torch.add(tt, tb)
        if ort:   # ORT cannot take a strided input: Transpose + Add (two nodes)
            _add_ort(impls, notes, lambda: ort_session(
                [helper.make_node("Transpose", ["a"], ["at"], perm=[1, 0]),
                 helper.make_node("Add", ["at", "b"], ["y"])],
                [("a", (n, m)), ("b", (m, n))], [("y", (m, n))]),
                     {"a": base, "b": b}, o[3])
        ref = at.astype(np.float64) + b
        return Built(f"{(m, n)} a.T+b", ref, TOL["add"], 3 * b.nbytes, impls, notes,
                     [base, b, o])
    return Case("transposed add(a.T+b)", "elementwise", "add", shapes, build)


def broadcast_case(shapes, name="broadcast add(NxM+M)"):
    def build(size, rng):
        m, n = shapes[size]
        a = rng.standard_normal((m, n), dtype=np.float32)
        r = rng.standard_normal(n, dtype=np.float32)
        o = [np.empty_like(a) for _ in range(4)]
        impls, notes = {}, {}
        impls["ds_out"] = lambda: dynshape.run("add", a, r, out=o[0])
        impls["ds_alloc"] = lambda: dynshape.run("add", a, r)
        impls["numpy"] = lambda: np.add(a, r, out=o[1])
        impls["numpy_alloc"] = lambda: np.add(a, r)
        if torch:
            ta, tr, to = _t(a), _t(r), _t(o[2])
            impls["torch_out"] = lambda: torch.add(ta, tr, out=to)
            impls["torch_alloc"] = lambda: torch.add(ta, tr)
        if ort:
            _add_ort(impls, notes, lambda: ort_session(
                [helper.make_node("Add", ["a", "r"], ["y"])], [("a", (m, n)), ("r", (n,))],
                [("y", (m, n))]),
                     {"a": a, "r": r}, o[3])
        ref = a.astype(np.float64) + r
        return Built(f"{(m, n)}+({n},)", ref, TOL["add"], 2 * a.nbytes + r.nbytes, impls,
                     notes, [a, r, o])
    return Case(name, "elementwise", "add", shapes, build)


def _resolve_call(op, args_list, ref, tol, notes):
    """Find how this build's ``op`` is called (attribute names are not fixed yet): the first
    convention whose result matches the reference. Returns (args, attrs) or None."""
    errors = []
    for args, attrs in args_list:
        try:
            res = np.asarray(dynshape.run(op, *args, **attrs))
            if res.shape != ref.shape:
                raise ValueError(f"result shape {res.shape}, expected {ref.shape}")
            np.testing.assert_allclose(res, ref, rtol=tol[0], atol=tol[1])
            notes["dynshape call"] = f"{op}({len(args)} arrays, {attrs})"
            return args, attrs
        except Exception as exc:
            errors.append(f"{attrs}: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:120]}")
    notes["dynshape call"] = "no call convention verified: " + " | ".join(errors)
    return None


def reduction_case(shapes, name="reduce sum(axis=1)"):
    """sum over axis 1: a middle axis of 3-D shapes, the last axis of 2-D ones."""
    def build(size, rng):
        shape = shapes[size]
        x = rng.standard_normal(shape, dtype=np.float32)
        oshape = tuple(int(v) for v in np.delete(shape, 1))
        o = [np.empty(oshape, np.float32) for _ in range(4)]
        ref = x.astype(np.float64).sum(axis=1)
        impls, notes = {}, {}
        conv = _resolve_call("sum", [((x,), {"axis": 1, "keepdims": False}),
                                     ((x,), {"axis": 1}), ((x,), {"axis": (1,)}),
                                     ((x,), {"axes": (1,)}), ((x,), {"dim": 1})],
                             ref, TOL["sum"], notes)
        if conv:
            args, attrs = conv
            impls["ds_out"] = lambda: dynshape.run("sum", *args, out=o[0], **attrs)
            impls["ds_alloc"] = lambda: dynshape.run("sum", *args, **attrs)
        impls["numpy"] = lambda: np.sum(x, axis=1, out=o[1])
        impls["numpy_alloc"] = lambda: np.sum(x, axis=1)
        if torch:
            tx, to = _t(x), _t(o[2])
            impls["torch_out"] = lambda: torch.sum(tx, dim=1, out=to)
            impls["torch_alloc"] = lambda: torch.sum(tx, dim=1)
        if ort:
            _add_ort(impls, notes, lambda: ort_session(
                [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
                [("x", shape)], [("y", oshape)],
                [helper.make_tensor("axes", TensorProto.INT64, [1], [1])], opset=13),
                     {"x": x}, o[3])
        return Built(f"{shape} axis=1", ref, TOL["sum"], x.nbytes + o[0].nbytes, impls,
                     notes, [x, o])
    return Case(name, "reduction", "sum", shapes, build)


def softmax_case(shapes):
    def build(size, rng):
        shape = shapes[size]
        x = rng.standard_normal(shape, dtype=np.float32) * np.float32(2)
        o = [np.empty_like(x) for _ in range(4)]
        m = np.empty((shape[0], 1), np.float32)
        s = np.empty((shape[0], 1), np.float32)
        ref = ref_softmax(x)
        impls, notes = {}, {}
        conv = _resolve_call("softmax", [((x,), {"axis": -1}), ((x,), {"axis": 1}),
                                         ((x,), {}), ((x,), {"dim": -1})],
                             ref, TOL["softmax"], notes)
        if conv:
            args, attrs = conv
            impls["ds_out"] = lambda: dynshape.run("softmax", *args, out=o[0], **attrs)
            impls["ds_alloc"] = lambda: dynshape.run("softmax", *args, **attrs)
        impls["numpy"] = lambda: np_softmax(x, o[1], m, s)
        impls["numpy_alloc"] = lambda: np_softmax(x, np.empty_like(x), np.empty_like(m),
                                                  np.empty_like(s))
        if torch:
            tx, to = _t(x), _t(o[2])
            impls["torch_out"] = lambda: torch.softmax(tx, 1, out=to)
            impls["torch_alloc"] = lambda: torch.softmax(tx, 1)
        if ort:
            _add_ort(impls, notes, lambda: ort_session(
                [helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [("x", shape)],
                [("y", shape)], opset=13),
                     {"x": x}, o[3])
        return Built(f"{shape} rows", ref, TOL["softmax"], 2 * x.nbytes, impls, notes,
                     [x, o, m, s])
    return Case("softmax(rows)", "rowwise", "softmax", shapes, build)


def layer_norm_case(shapes):
    def build(size, rng):
        shape = shapes[size]
        h = shape[1]
        x = rng.standard_normal(shape, dtype=np.float32) * np.float32(2) + np.float32(0.5)
        w = rng.standard_normal(h, dtype=np.float32)
        b = rng.standard_normal(h, dtype=np.float32)
        o = [np.empty_like(x) for _ in range(4)]
        mu = np.empty((shape[0], 1), np.float32)
        var = np.empty((shape[0], 1), np.float32)
        tmp = np.empty_like(x)
        ref = ref_layer_norm(x, w, b)
        impls, notes = {}, {}
        conv = _resolve_call("layer_norm", [
            ((x, w, b), {"eps": EPS}), ((x, w, b), {"epsilon": EPS}),
            ((x, w, b), {"axis": -1, "eps": EPS}), ((x, w, b), {"axis": -1, "epsilon": EPS}),
            ((x, w, b), {})], ref, TOL["layer_norm"], notes)
        if conv:
            args, attrs = conv
            impls["ds_out"] = lambda: dynshape.run("layer_norm", *args, out=o[0], **attrs)
            impls["ds_alloc"] = lambda: dynshape.run("layer_norm", *args, **attrs)
        impls["numpy"] = lambda: np_layer_norm(x, w, b, o[1], mu, var, tmp)
        impls["numpy_alloc"] = lambda: np_layer_norm(x, w, b, np.empty_like(x), np.empty_like(mu),
                                                     np.empty_like(var), np.empty_like(x))
        if torch:
            tx, tw, tb = _t(x), _t(w), _t(b)
            notes["torch_out"] = "n/a (F.layer_norm has no out=)"
            impls["torch_alloc"] = lambda: F.layer_norm(tx, (h,), tw, tb, EPS)
        if ort:
            _add_ort(impls, notes, lambda: ort_session(
                [helper.make_node("LayerNormalization", ["x", "w", "b"], ["y"], axis=-1,
                                  epsilon=EPS)],
                [("x", shape), ("w", (h,)), ("b", (h,))], [("y", shape)], opset=17),
                     {"x": x, "w": w, "b": b}, o[3])
        return Built(f"{shape}", ref, TOL["layer_norm"], 2 * x.nbytes + 2 * w.nbytes, impls,
                     notes, [x, w, b, o, mu, var, tmp])
    return Case("layer_norm(last axis)", "rowwise", "layer_norm", shapes, build)


def all_cases():
    return [unary_case("relu", S1), unary_case("exp", S2), unary_case("tanh", S3),
            unary_case("gelu", S1), unary_case("sigmoid", S2),
            binary_case("add", S2), binary_case("mul", S3), power_case(2.0, S1),
            power_case(2.5, S1),
            transposed_copy_case(S2), transposed_add_case(S2), broadcast_case(S2),
            broadcast_case(SHORT_ROWS, "bias add(NxM+M), short rows"),
            reduction_case(S3), reduction_case(S2, "reduce sum(last axis)"),
            softmax_case(SOFTMAX), layer_norm_case(LAYER_NORM)]
