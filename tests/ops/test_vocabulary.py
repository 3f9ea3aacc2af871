"""The op vocabulary is the one place an op is declared: every op in it is callable through
``run``, through ``fuse`` and as an ``activation=`` epilogue, and listed by ``describe_ops``."""
import numpy as np
import pytest
from dynshape_kernels.abi.vocabulary import BINARY_OPS, UNARY, UNARY_OPS, activations

import dynshape

PUBLIC = [u for u in UNARY if u.public]


def test_vocabulary_is_consistent():
    assert UNARY_OPS == tuple(u.name for u in UNARY)
    assert len(set(UNARY_OPS)) == len(UNARY_OPS)
    assert dynshape.CATALOG.families["unary"].ops == UNARY_OPS
    assert dynshape.CATALOG.families["binary"].ops == BINARY_OPS
    listed = {r["name"]: r for r in dynshape.describe_ops()}
    for u in PUBLIC:
        assert listed[u.name]["family"] == "unary"
        assert set(listed[u.name]["attributes"]) >= {a for a, _ in u.attrs}
        assert ("int32" in listed[u.name]["dtypes"]) == (u.ints != "refuse")
    for u in UNARY:
        if not u.public:            # kernel variants: not ops of the unary family
            assert listed.get(u.name, {}).get("family") != "unary"


@pytest.mark.parametrize("u", PUBLIC, ids=lambda u: u.name)
def test_every_unary_op_runs_fuses_and_activates(u):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 8, 9, 10)) * 0.5 + 1.0).astype(np.float32)
    ref = dynshape.run(u.name, x)
    np.testing.assert_array_equal(dynshape.fuse([u.name])(x), ref)
    w = rng.standard_normal((4, 8, 1, 1)).astype(np.float32)
    lin = dynshape.run("conv2d", x, w)
    np.testing.assert_array_equal(dynshape.run("conv2d", x, w, activation=u.name),
                                  dynshape.run(u.name, lin))
    a, b = x.reshape(-1, 10)[:40], rng.standard_normal((10, 12)).astype(np.float32)
    if u.name in activations(with_attributes=False):
        np.testing.assert_array_equal(dynshape.run("matmul", a, b, activation=u.name),
                                      dynshape.run(u.name, dynshape.run("matmul", a, b)))
    else:
        with pytest.raises(dynshape.OpAttributeError, match="unknown activation"):
            dynshape.run("matmul", a, b, activation=u.name)


@pytest.mark.parametrize("op", BINARY_OPS)
def test_every_binary_op_runs_and_fuses(op):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((17, 33)) + 3).astype(np.float32)
    y = (rng.standard_normal(33) + 2).astype(np.float32)
    np.testing.assert_array_equal(dynshape.fuse([(op, "y")])(x, y=y), dynshape.run(op, x, y))
