"""Every ONNX backend node test case (shipped in the onnx wheel) of every op type
``onnx_supported_ops()`` claims: each passes, or is refused with a DynshapeError that names
the unsupported configuration (3-D pooling, training mode, exotic casts, ...)."""
import pytest

from backend_cases import claimed_cases, report, run_case

pytest.importorskip("onnx")


def test_every_claimed_case_passes_or_is_refused_clearly(capsys):
    results = [(op, c.name, run_case(c)) for op, c in claimed_cases()]
    per, lines = report(results)
    with capsys.disabled():
        print("\nONNX backend node cases of the claimed op types (pass / all):")
        print("\n".join("  " + line for line in lines))
    failed = [(name, r) for _, name, r in results if r.startswith("FAIL")]
    assert not failed, failed
    passed = sum(p for p, _, _ in per.values())
    assert passed >= 0.88 * len(results), f"only {passed} of {len(results)} pass"
    known = ("3-D", "Indices output", "training mode", "Cast to", "AveragePool with dilations",
             "dtype uint8", "dtype int8")
    odd = [(name, r) for _, name, r in results
           if r.startswith("refused") and not any(k in r for k in known)]
    assert not odd, odd
    # every claimed op type has cases, and most of each passes
    import dynshape
    for op in dynshape.onnx_supported_ops():
        if op in per:
            p, r, f = per[op]
            assert p > 0, f"{op}: no case passes"
