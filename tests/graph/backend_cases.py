"""The ONNX backend node test cases shipped in the onnx wheel, run through load_onnx: for
every case whose op types dynshape claims, the result against the case's expected outputs."""
import warnings
from collections import defaultdict

import numpy as np

import dynshape
from dynshape.errors import DynshapeError


def _array(a):
    from onnx import numpy_helper
    return numpy_helper.to_array(a) if hasattr(a, "data_type") else np.asarray(a)


def claimed_cases():
    """(op type, case) of every backend node case made only of claimed op types."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases
        cases = collect_testcases()
    sup = set(dynshape.onnx_supported_ops())
    out = []
    for c in cases:
        if c.model is None:
            continue
        ops = [n.op_type for n in c.model.graph.node]
        if set(ops) <= sup:
            out.append((ops[-1], c))
    return out


def run_case(c):
    """"pass", "refused: ..." (a DynshapeError naming what is not supported) or
    "FAIL: ..." (a wrong result or any other exception)."""
    try:
        m = dynshape.load_onnx(c.model)
        for inputs, outputs in c.data_sets:
            feed = {i.name: _array(a) for i, a in zip(m.get_inputs(), inputs)}
            got = m.run(None, feed)
            for g, e in zip(got, outputs):
                e = _array(e)
                if g.shape != e.shape or g.dtype != e.dtype:
                    return f"FAIL: shape/dtype {g.shape} {g.dtype} vs {e.shape} {e.dtype}"
                if e.dtype.kind in "fc":
                    ok = np.allclose(g, e, rtol=max(c.rtol, 1e-5), atol=max(c.atol, 1e-6),
                                     equal_nan=True)
                else:
                    ok = np.array_equal(g, e)
                if not ok:
                    return "FAIL: values differ"
        return "pass"
    except DynshapeError as exc:
        return f"refused: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    except Exception as exc:
        return f"FAIL: {type(exc).__name__}: {str(exc)[:160]}"


def report(results):
    """{op: (passed, refused, failed)} and printable lines."""
    per = defaultdict(lambda: [0, 0, 0])
    for op, _, r in results:
        per[op][0 if r == "pass" else 1 if r.startswith("refused") else 2] += 1
    lines = [f"{op:22s} {p}/{p + r + f} pass, {r} refused, {f} failed"
             for op, (p, r, f) in sorted(per.items())]
    return per, lines
