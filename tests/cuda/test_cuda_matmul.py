"""matmul and gemm on the CUDA target (simulator) against NumPy: batched broadcasting,
strided and negative-stride device views, bias, alpha/beta, activations, K = 0; tables of
CUDA output tiles that cover every output once."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dynshape
from cudasim import cuda_settings

TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


@cuda_settings
@given(st.integers(1, 70), st.integers(0, 40), st.integers(1, 70),
       st.sampled_from([(), (2,), (2, 1)]), st.sampled_from([np.float32, np.float64]),
       st.booleans(), st.integers(0, 99))
def test_matmul_matches_numpy(cuda, M, K, N, batch, dtype, flip, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + (M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    da, db = cuda.to_device(a), cuda.to_device(b)
    if flip and K > 1:                       # negative and non-unit strides on the device
        da, a = da[..., ::-1], a[..., ::-1]
        db, b = db[::-1], b[::-1]
    got = dynshape.run("matmul", da, db).copy_to_host()
    np.testing.assert_allclose(got, a @ b, **TOL[dtype])
    t = dynshape.last_table()
    assert t.target == "cuda"
    t.validate()


@pytest.mark.parametrize("act", ["relu", "tanh", "gelu"])
def test_gemm_epilogue(cuda, act):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((33, 20)), rng.standard_normal((20, 47))
    c = rng.standard_normal((33, 47))
    got = dynshape.run("gemm", cuda.to_device(a), cuda.to_device(b), cuda.to_device(c),
                       alpha=0.5, beta=-2.0, activation=act).copy_to_host()
    ref = {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh,
           "gelu": lambda v: 0.5 * v * (1 + np.vectorize(__import__("math").erf)(v / 2 ** .5))}
    np.testing.assert_allclose(got, ref[act](0.5 * a @ b - 2.0 * c), rtol=1e-12, atol=1e-12)


def test_matmul_into_a_device_view_writes_nothing_else(cuda):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.ones((4, 5), np.float32)
    out = cuda.to_device(np.full((3, 10), -1, np.float32))
    dynshape.run("matmul", cuda.to_device(a), cuda.to_device(b), out=out[:, ::2])
    host = out.copy_to_host()
    np.testing.assert_array_equal(host[:, ::2], a @ b)
    np.testing.assert_array_equal(host[:, 1::2], -1)


def test_tiles_are_cuda_kernels_and_small_problems_pick_small_tiles(cuda):
    from dynshape_kernels.abi.cuda_tiles import CUDA_MATMUL_TILES
    dynshape.set_policy("optimized")
    dynshape.run("matmul", cuda.to_device(np.ones((20, 8), np.float32)),
                 cuda.to_device(np.ones((8, 20), np.float32)))
    t = dynshape.last_table()
    small = len(CUDA_MATMUL_TILES) - 1
    assert len(t.entries) == 1 and t.entries[0, 0] == small        # one block of small tiles
    t = dynshape.explain("matmul", (4096, 512), (512, 4096), target="cuda")
    assert (t.entries[:, 0] == 0).all()                              # large tiles
    from dynshape_kernels.catalog import CATALOG
    assert {CATALOG[int(k)].target for k in t.kernel_ids()} == {"cuda"}
    assert "output tiles, one block each" in t.describe()


def test_cuda_tables_are_saved_and_loaded_back(cuda, tmp_path):
    import glob
    import os

    from dynshape.runtime import config
    before = config.cache.store
    dynshape.clear_cache()
    dynshape.set_table_dir(tmp_path / "tables")
    try:
        x = cuda.to_device(np.ones((9, 40), np.float32))
        w = cuda.to_device(np.ones((40, 7), np.float32))
        dynshape.run("matmul", x, w)
        dynshape.run("tanh", x)
        dynshape.wait_optimized()
        files = glob.glob(os.path.join(str(tmp_path / "tables"), "*", "*.npz"))
        assert len(files) >= 2
        dynshape.clear_cache()                       # memory only: the files stay
        loaded = dynshape.cache_stats()["tables_loaded"]
        got = dynshape.run("matmul", x, w).copy_to_host()
        np.testing.assert_array_equal(got, np.full((9, 7), 40, np.float32))
        np.testing.assert_array_equal(dynshape.run("tanh", x).copy_to_host(),
                                      np.full((9, 40), np.tanh(np.float32(1))))
        assert dynshape.cache_stats()["tables_loaded"] == loaded + 2
        assert dynshape.last_table().target == "cuda"
    finally:
        dynshape.wait_optimized()
        config.cache.store = before
        dynshape.clear_cache()
