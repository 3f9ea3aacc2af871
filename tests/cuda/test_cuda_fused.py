"""Fused elementwise chains on the CUDA target (simulator): one launch per call, against the
same chain computed step by step with NumPy; strided device views, broadcast side inputs
on the device, constants on either side, out= views; host operands refused (chains with a
row-wise or reduction tail: test_cuda_fused_tails, led by matmul/conv: test_cuda_fused_lead)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dynshape
from cudasim import cuda_settings
from dynshape.errors import DeviceError
from oracles import BINARY_REF, UNARY_REF

UNARY = ["relu", "abs", "neg", "tanh", "sigmoid", "exp"]
BINARY = ["add", "sub", "mul", "maximum", "minimum"]


@st.composite
def chains(draw):
    steps, ref = [], []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["unary", "const", "side"]))
        if kind == "unary":
            op = draw(st.sampled_from(UNARY))
            steps.append(op)
            ref.append(lambda v, s, op=op: UNARY_REF[op](v))
        elif kind == "const":
            op, c = draw(st.sampled_from(BINARY)), draw(st.sampled_from([0.5, -1.0, 2.0]))
            left = draw(st.booleans())
            steps.append((op, c, "_") if left else (op, c))
            ref.append(lambda v, s, op=op, c=c, left=left:
                       BINARY_REF[op](np.asarray(c, v.dtype), v) if left
                       else BINARY_REF[op](v, np.asarray(c, v.dtype)))
        else:
            op = draw(st.sampled_from(BINARY))
            steps.append((op, "b"))
            ref.append(lambda v, s, op=op: BINARY_REF[op](v, s))
    return steps, ref


@cuda_settings
@given(chains(), st.sampled_from([np.float32, np.float64]),
       st.sampled_from([(5, 17), (3, 4, 6), (40,)]), st.booleans(), st.integers(0, 99))
def test_chains_match_numpy(cuda, chain, dtype, shape, strided, seed):
    steps, ref = chain
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(tuple(2 * n for n in shape)).astype(dtype)
    sl = tuple(slice(None, None, -2) if strided else slice(0, n) for n in shape)
    x, d = base[sl], cuda.to_device(base)[sl]
    bshape = (1,) * (len(shape) - 1) + (shape[-1],)          # broadcast along the rows
    b = rng.standard_normal(bshape).astype(dtype)
    f = dynshape.fuse(steps)
    kw = {"b": cuda.to_device(b)} if "b" in f.side_names else {}
    got = f(d, **kw).copy_to_host()
    want = x.astype(np.float64)
    with np.errstate(all="ignore"):
        for r in ref:
            want = r(want, b.astype(np.float64))
    np.testing.assert_allclose(got, want.astype(dtype), rtol=4e-6 if dtype == np.float32
                               else 1e-12, atol=1e-6 if dtype == np.float32 else 1e-13)
    assert dynshape.last_table().target == "cuda"


def test_int_chain_and_out_view(cuda):
    x = np.arange(-10, 14, dtype=np.int32).reshape(4, 6)
    out = cuda.to_device(np.full((4, 12), 99, np.int32))
    f = dynshape.fuse(["abs", ("mul", 3), ("sub", "b")])
    f(cuda.to_device(x), b=cuda.to_device(np.arange(6, dtype=np.int32)), out=out[:, 1::2])
    host = out.copy_to_host()
    np.testing.assert_array_equal(host[:, 1::2], np.abs(x) * 3 - np.arange(6))
    np.testing.assert_array_equal(host[:, ::2], 99)


def test_host_operands_are_refused(cuda):
    x = cuda.to_device(np.ones((3, 4), np.float32))
    with pytest.raises(DeviceError, match="host array"):
        dynshape.fuse([("add", "b")])(x, b=np.ones(4, np.float32))
    with pytest.raises(DeviceError, match="host array"):
        dynshape.fuse([("add", "b"), "softmax"])(x, b=np.ones(4, np.float32))
