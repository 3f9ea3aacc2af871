"""The CUDA target on the plane families (unary, binary, copy) under the simulator: device
arrays in and out, against NumPy, through the same executors and tables as the CPU."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dynshape
from dynshape import testing
from dynshape.errors import DeviceError, DtypeError
from oracles import BINARY_REF, RTOL, UNARY_REF, check

from cudasim import cuda_settings

@pytest.mark.parametrize("op", sorted(UNARY_REF))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_ops_match_numpy(cuda, op, dtype):
    x = (np.random.default_rng(1).standard_normal((7, 45)) * 3).astype(dtype)
    if op in ("log", "sqrt"):
        x = np.abs(x) + 0.1
    got = dynshape.run(op, cuda.to_device(x))
    assert type(got).__name__ == "FakeCUDAArray" or hasattr(got, "__cuda_array_interface__")
    with np.errstate(all="ignore"):
        check(op, got.copy_to_host(), UNARY_REF[op](x))


@cuda_settings
@given(st.sampled_from(["relu", "abs", "neg", "tanh", "exp"]),
       st.sampled_from([np.float32, np.float64, np.int32, np.int64]),
       testing.shapes(max_rank=4, max_side=9), st.data())
def test_unary_any_view_matches_numpy(cuda, op, dtype, shape, data):
    if op in ("tanh", "exp") and np.dtype(dtype).kind == "i":
        dtype = np.float32
    steps = tuple(slice(None, None, data.draw(st.sampled_from([1, 2, -1]))) for _ in shape)
    base = np.random.default_rng(data.draw(st.integers(0, 99))).standard_normal(
        tuple(2 * n for n in shape)) * 3
    base = base.astype(dtype)
    x = base[steps][tuple(slice(0, n) for n in shape)]
    d = cuda.to_device(base)[steps][tuple(slice(0, n) for n in shape)] if shape \
        else cuda.to_device(base)
    got = dynshape.run(op, d)
    with np.errstate(all="ignore"):
        check(op, got.copy_to_host(), UNARY_REF[op](x))


@cuda_settings
@given(st.sampled_from(sorted(BINARY_REF)), st.sampled_from([np.float32, np.int64]),
       st.sampled_from([((5, 33), (33,)), ((4, 1, 6), (3, 1)), ((2, 3, 4), (2, 3, 4)),
                        ((1,), (9, 1)), ((), (5,))]), st.integers(0, 99))
def test_binary_broadcast_matches_numpy(cuda, op, dtype, shapes, seed):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shapes[0]) * 4).astype(dtype)
    b = (rng.standard_normal(shapes[1]) * 4).astype(dtype)
    if op == "pow":
        a = np.abs(a) + (1 if np.dtype(dtype).kind == "f" else 0)
        b = np.abs(b) % 4
    if op in ("div", "pow") and np.dtype(dtype).kind == "i":
        return                  # refused on the device (test_host_work_..._is_refused)
    got = dynshape.run(op, cuda.to_device(a), cuda.to_device(b)).copy_to_host()
    with np.errstate(all="ignore"):
        want = BINARY_REF[op](a, b)
    if got.dtype.kind == "f" and op in ("pow", "div"):
        np.testing.assert_allclose(got, want, rtol=RTOL[got.dtype])
    else:
        np.testing.assert_array_equal(got, want)


def test_python_scalars_and_out_view(cuda):
    x = np.arange(-12, 12, dtype=np.float32).reshape(4, 6)
    d = cuda.to_device(x)
    np.testing.assert_array_equal(dynshape.run("mul", d, 0.5).copy_to_host(), x * 0.5)
    out = cuda.to_device(np.full((8, 6), 7, np.float32))
    res = dynshape.run("relu", d, out=out[::2])
    host = out.copy_to_host()
    np.testing.assert_array_equal(host[::2], np.maximum(x, 0))
    np.testing.assert_array_equal(host[1::2], 7)           # nothing written outside out
    np.testing.assert_array_equal(res.copy_to_host(), np.maximum(x, 0))


@pytest.mark.parametrize("shape", [(37, 45), (3, 64, 33), (1, 1), (70, 2)])
def test_transpose_through_shared_memory(cuda, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got = dynshape.run("transpose", cuda.to_device(x)).copy_to_host()
    np.testing.assert_array_equal(got, x.T)
    t = dynshape.last_table()
    assert t.target == "cuda"


def test_tables_use_cuda_kernels_and_cover_the_plane(cuda):
    from dynshape_kernels.catalog import CATALOG
    x = cuda.to_device(np.ones((19, 300), np.float64))
    dynshape.run("sigmoid", x)
    t = dynshape.last_table()
    assert t.target == "cuda"
    kinds = {CATALOG[int(k)] for k in t.entries[:, 0]}
    assert all(k.target == "cuda" and k.op == "sigmoid" and k.dtype == "float64" for k in kinds)
    assert t.shape == (1, 19 * 300)                  # contiguous: one long row
    testing.check_coverage(t, t.shape, catalog=CATALOG.on("cuda"))
    t2 = dynshape.explain("sigmoid", cuda.to_device(np.ones((19, 300)))[:, ::2])
    testing.check_coverage(t2, t2.shape, catalog=CATALOG.on("cuda"))
    e = dynshape.explain("sigmoid", (19, 300), dtype="float64", target="cuda")
    assert e.target == "cuda" and "cost model" in e.describe()


def test_mixed_host_and_device_operands_are_refused(cuda):
    d = cuda.to_device(np.ones(5, np.float32))
    with pytest.raises(DeviceError, match="input 1 is a host array"):
        dynshape.run("add", d, np.ones(5, np.float32))
    with pytest.raises(DeviceError, match="out is a host array"):
        dynshape.run("relu", d, out=np.empty(5, np.float32))
    with pytest.raises(DtypeError, match="CUDA array among host operands"):
        dynshape.ops.as_array(d, "x")


def test_host_work_on_device_arrays_is_refused_not_done(cuda):
    # integer input to a float-only op would be converted on the host: refused by name
    d = cuda.to_device(np.arange(6, dtype=np.int32))
    with pytest.raises(DeviceError, match="astype of a device array"):
        dynshape.run("exp", d)
    with pytest.raises(DeviceError, match="integer powers of device arrays"):
        dynshape.run("pow", d, d)
    with pytest.raises(DeviceError, match="input 0 has dtype int32 and the result float64"):
        dynshape.run("div", d, d)
    with pytest.raises(DeviceError, match="input 1 has dtype float64 and the result float64"
                       "|input 0 has dtype int32"):
        dynshape.run("add", d, cuda.to_device(np.ones(6)))
    # a partial overlap of out and an input would copy the input on the host
    x = cuda.to_device(np.arange(8, dtype=np.float32))
    with pytest.raises(DeviceError, match="copy of a device array"):
        dynshape.run("relu", x[:6], out=x[2:])



def test_a_family_without_cuda_kernels_is_refused_first(cuda, monkeypatch):
    import dynshape_kernels.catalog as catalog
    monkeypatch.setattr(catalog, "CUDA_FAMILIES",
                        tuple(f for f in catalog.CUDA_FAMILIES if f != "conv"))
    with pytest.raises(DeviceError, match="no 'conv' kernels"):
        dynshape.run("conv2d", cuda.to_device(np.ones((1, 1, 3, 3))),
                     cuda.to_device(np.ones((1, 1, 2, 2))))


def test_tables_are_uploaded_once_per_bucket(cuda):
    from dynshape.cuda.target import BRIDGE
    x = np.random.default_rng(0).standard_normal((6, 100)).astype(np.float32)
    dynshape.run("tanh", cuda.to_device(x))
    before = BRIDGE.uploads
    for _ in range(3):
        dynshape.run("tanh", cuda.to_device(x))
    assert BRIDGE.uploads == before                         # same layout: nothing uploaded
    dynshape.run("tanh", cuda.to_device(x[:, :99].copy()))  # same bucket, new shape
    assert BRIDGE.uploads == before + 1                     # its common area only


def test_launch_geometry_without_a_device():
    from dynshape_kernels.abi.cuda_tiles import CUDA_ELEMENTWISE_TILES, CUDA_THREADS
    from dynshape_kernels.cuda.drivers import MAX_GRID_Y, launch_geometry
    sq = max(t[0] for t in CUDA_ELEMENTWISE_TILES)
    grid, block, shared = launch_geometry("unary", "float64", 17, 3)
    assert grid == (17, 3) and block == (CUDA_THREADS,)
    assert shared == sq * (sq + 1) * 8
    grid, _, shared = launch_geometry("binary", "float32", 2, 10 ** 6)
    assert grid == (2, MAX_GRID_Y) and shared == 0


def test_plain_import_and_cpu_runs_import_no_cuda_module():
    import subprocess
    import sys
    code = ("import sys, numpy as np, dynshape; dynshape.run('relu', np.ones(3, np.float32));"
            "bad = [m for m in sys.modules if m.startswith(('numba.cuda', 'numba_cuda', 'cupy',"
            " 'dynshape.cuda', 'dynshape_kernels.cuda'))]; print(bad); assert not bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_warm_loads_every_cuda_kernel_before_first_use(cuda):
    from dynshape.cuda import target
    done = target.warm(["unary", "fused"], ["float64"])
    assert done == [("unary", "float64"), ("fused", "float64")]
    assert set(done) <= set(target.DRIVERS.loaded())
    n = len(target.DRIVERS.loaded())
    dynshape.run("exp", cuda.to_device(np.ones(7)))       # already loaded: nothing new
    assert len(target.DRIVERS.loaded()) == n


def test_command_line_explains_cuda_tables_without_a_device():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "dynshape", "explain", "matmul", "512x64",
                        "64x300", "--target", "cuda", "--optimized"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "on cuda" in r.stdout and "one block each" in r.stdout
    assert "in 4 blocks of 16" in r.stdout


def test_relu_of_minus_inf_is_zero_and_nan_propagates(cuda):
    x = np.array([-np.inf, np.inf, np.nan, -0.0, -3.0], np.float32)
    got = dynshape.run("relu", cuda.to_device(x)).copy_to_host()
    np.testing.assert_array_equal(got, np.maximum(x, 0))
    assert np.signbit(got[3])                                   # -0.0 stays -0.0
