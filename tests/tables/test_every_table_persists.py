"""Every family's table is a ParamTable behind the same cache: conv2d and fused tables are
saved, loaded in a new process instead of being built, and (conv2d) swapped in the
background like the plane families' tables."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np

import dynshape
from dynshape.runtime import config

CONV = dict(pads=(1, 1, 1, 1))
CHAIN = [("add", "b"), "relu", ("mul", 0.5)]


def _calls():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 16, 29, 31)).astype(np.float32)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    v = rng.standard_normal((37, 300)).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32)
    return x, w, v, b


def test_conv_and_fused_tables_are_saved_and_loaded_in_a_new_process(tmp_path):
    x, w, v, b = _calls()
    dynshape.clear_cache()
    dynshape.set_table_dir(tmp_path)
    try:
        tc = dynshape.warmup("conv2d", x, w, **CONV)
        tf = dynshape.warmup(dynshape.fuse(CHAIN), v, b=b)
        assert isinstance(tc, dynshape.ParamTable) and isinstance(tf, dynshape.ParamTable)
        assert dynshape.cache_stats()["tables_saved"] >= 2
        files = list(tmp_path.rglob("*.npz"))
        assert len(files) >= 2
        loaded = [dynshape.ParamTable.load(str(f)) for f in files]
        assert {t.family for t in loaded} >= {"conv", "fused"}
        for t in loaded:                        # the same table, from disk
            same = tc if t.family == "conv" else tf
            np.testing.assert_array_equal(t.entries, same.entries)
            assert t.meta == json.loads(json.dumps(same.meta))
    finally:
        dynshape.set_table_dir(None)
        dynshape.clear_cache()
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "v.npy", v)
    np.save(tmp_path / "b.npy", b)
    code = textwrap.dedent(f"""
        import json, numpy as np, dynshape
        d = {str(tmp_path)!r}
        x, w, v, b = (np.load(f"{{d}}/{{n}}.npy") for n in "xwvb")
        dynshape.set_policy("optimized")
        y = dynshape.run("conv2d", x, w, pads=(1, 1, 1, 1))
        z = dynshape.fuse({CHAIN!r})(v, b=b)
        s = dynshape.cache_stats()
        np.save(f"{{d}}/y.npy", y)
        np.save(f"{{d}}/z.npy", z)
        print(json.dumps(s))
    """)
    env = dict(os.environ, DYNSHAPE_TABLE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    stats = json.loads(r.stdout.strip().splitlines()[-1])
    assert stats["tables_loaded"] == 2 and stats["tables_built"] == 0, stats
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"),
                                  dynshape.run("conv2d", x, w, **CONV))
    np.testing.assert_array_equal(np.load(tmp_path / "z.npy"), dynshape.fuse(CHAIN)(v, b=b))


def test_conv_tables_are_optimized_in_the_background():
    x, w, _, _ = _calls()
    dynshape.clear_cache()
    dynshape.set_policy("background")
    first = dynshape.explain("conv2d", x, w, **CONV)
    assert first.variant == "simplified"
    dynshape.wait_optimized()
    assert config.cache.stats()["optimized_swaps"] >= 1
    y = dynshape.run("conv2d", x, w, **CONV)
    assert dynshape.last_table().variant == "optimized"
    dynshape.set_policy("optimized")
    np.testing.assert_allclose(y, dynshape.run("conv2d", x.astype(np.float64),
                                               w.astype(np.float64), **CONV), rtol=1e-4,
                               atol=1e-4)
