"""A model warmed up in one process with a table directory: a later process running the
same model on those shapes loads every table and builds none (and compiles nothing)."""
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import sys, warnings, numpy as np, dynshape
    from dynshape import testing
    warnings.simplefilter("ignore")
    dynshape.set_table_dir(sys.argv[1])
    m = dynshape.load_onnx(open(sys.argv[2], "rb").read())
    shapes = [{"x": (2, 9, 32)}, {"x": (3, 40, 32)}]
    if sys.argv[3] == "warm":
        m.warmup(shapes)
        dynshape.wait_optimized()
    else:
        with testing.count_compilations() as c:
            for s in shapes:
                m.run(None, {"x": np.ones(s["x"], np.float32)})
        st = dynshape.cache_stats()
        print(st["tables_built"], st["tables_loaded"], c.count)
""")


def test_a_later_process_loads_the_tables(exported, tmp_path):
    model = tmp_path / "encoder.onnx"
    model.write_bytes(exported["encoder"])
    tables = tmp_path / "tables"
    env = dict(os.environ)
    run = [sys.executable, "-c", SCRIPT, str(tables), str(model)]
    subprocess.run(run + ["warm"], check=True, env=env, capture_output=True)
    assert any(tables.rglob("*")), "warmup saved no table"
    out = subprocess.run(run + ["run"], check=True, env=env, capture_output=True, text=True)
    built, loaded, compiled = map(int, out.stdout.split()[-3:])
    assert built == 0 and loaded > 0 and compiled == 0, out.stdout
