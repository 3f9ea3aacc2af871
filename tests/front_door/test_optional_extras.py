"""A plain install (no extras) runs `import dynshape`, the demo, every op and every command
that needs no optional package: tried in a subprocess where importing an optional package
fails, so that a top-level import of an extra fails this suite and not a user."""
import subprocess
import sys
import textwrap

OPTIONAL = ("hypothesis", "matplotlib", "onnx", "onnxruntime", "torch", "cupy", "mpmath",
            "pytest", "dask", "distributed", "networkx", "ml_dtypes", "onnxscript", "numba_cuda",
            "cuda")

BLOCKER = textwrap.dedent(f"""
    import importlib.abc, sys
    BLOCKED = {OPTIONAL!r}
    class _Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"No module named {{name!r}} (blocked by the test)")
            return None
    sys.meta_path.insert(0, _Blocker())
    for m in list(sys.modules):
        if m.split(".")[0] in BLOCKED:
            del sys.modules[m]
""")


def _python(code, timeout=900):
    r = subprocess.run([sys.executable, "-c", BLOCKER + textwrap.dedent(code)],
                       capture_output=True, text=True, timeout=timeout)
    return r


def test_import_and_every_op_family_without_extras():
    r = _python("""
        import numpy as np, sys
        import dynshape
        x = np.random.rand(33, 70).astype(np.float32)
        np.testing.assert_allclose(dynshape.run("relu", x - 0.5), np.maximum(x - 0.5, 0))
        assert abs(dynshape.run("sum", x, axis=1) - x.sum(1)).max() < 1e-4
        dynshape.run("softmax", x)
        dynshape.run("matmul", x, x.T)
        dynshape.fuse([("add", "b"), "relu"])(x, b=x[0])
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not loaded, loaded
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_demo_runs_without_extras():
    r = _python("""
        import sys
        from dynshape.demo import main
        compiles = main()
        assert compiles == 0, compiles
        assert not [m for m in sys.modules if m.split(".")[0] in BLOCKED]
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "all results matched NumPy" in r.stdout
    assert "Numba compilations while running" in r.stdout


def test_commands_without_extras():
    r = _python("""
        from dynshape.cli import main
        for argv in (["ops"], ["catalog"], ["explain", "relu", "517x1531"],
                     ["explain", "softmax", "77x301"]):
            assert main(argv) == 0, argv
    """)
    assert r.returncode == 0, r.stderr[-3000:]


def test_missing_extra_is_one_line_naming_the_extra():
    r = _python("""
        import dynshape
        from dynshape import testing
        testing.count_compilations           # needs nothing optional
        try:
            testing.shapes()
        except dynshape.MissingExtraError as exc:
            print("ERR", exc)
        from dynshape.cli import main
        raise SystemExit(main(["explain", "relu", "40x50", "--png", "out.png"]))
    """)
    err_line = next(ln for ln in r.stdout.splitlines() if ln.startswith("ERR"))
    assert "hypothesis" in err_line and "pip install 'dynshape[test]'" in err_line
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()
    assert len(last) == 1 and "matplotlib" in last[0] and "plot" in last[0], r.stderr
