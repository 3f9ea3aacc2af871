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


# ---- the kernels' op switches are generated from the vocabulary ------------------------------
def _branches(source, name):
    """Op codes of the branches of generated function ``name`` (the else is the last op)."""
    import re
    body = source.split(f"def {name}(")[1].split("\ndef ")[0]
    return [int(c) for c in re.findall(r"code == (\d+):", body)], "    else:" in body


@pytest.mark.parametrize("kind", ["float", "integer", "float16", "bfloat16"])
def test_every_cpu_and_cuda_switch_has_one_branch_per_op(kind):
    from dynshape_kernels.abi.vocabulary import FLOAT_ONLY_BINARY
    from dynshape_kernels.cpu import switches
    from dynshape_kernels.cuda import scalars
    assert set(switches.KINDS) == {"float", "integer", "float16", "bfloat16"}
    integer = kind == "integer"
    unary = [i for i, u in enumerate(UNARY) if not (integer and u.float_only)]
    binary = [i for i, b in enumerate(BINARY_OPS) if not (integer and b in FLOAT_ONLY_BINARY)]
    cpu = switches.generated_source(kind)
    cuda = scalars.generated_source(kind)
    load, narrow = switches.KINDS[kind]
    if load:           # the half kinds widen their operands and round every result, both targets
        for source in (cpu, cuda):
            assert f"{load}(" in source and f"{narrow}(" in source, kind
    for source, names in ((cpu, switches.UNARY_SWITCHES), (cuda, ["unary_op"])):
        for name in names:
            codes, has_else = _branches(source, name)
            assert has_else and codes == unary[:-1], name
    for source, names in ((cpu, switches.BINARY_SWITCHES), (cuda, ["binary_op"])):
        for name in names:
            codes, has_else = _branches(source, name)
            assert has_else and codes == binary[:-1], name


def test_an_op_without_a_scalar_expression_is_refused_by_name():
    from dynshape_kernels.abi.switch_source import binary_cases, unary_cases
    from dynshape_kernels.cpu.scalar_ops import BINARY_SCALARS, UNARY_SCALARS
    partial = {k: v for k, v in UNARY_SCALARS.items() if k != "gelu"}
    with pytest.raises(KeyError, match="unary ops without a CPU scalar expression.*gelu"):
        unary_cases(partial, False, "CPU")
    partial = {k: v for k, v in BINARY_SCALARS.items() if k != "pow"}
    with pytest.raises(KeyError, match="binary ops without a CPU scalar expression.*pow"):
        binary_cases(partial, True, "CPU")


def test_generated_switches_compute_every_op_like_the_scalar_expression():
    """Each generated loop runs the op its code names (checked against the scalar switch on
    the same values, in float32 and int64)."""
    from numba import njit
    from dynshape_kernels.cpu import switches

    @njit
    def loops(code, x, y, o1, o2, o3, a0, a1):
        n = x.size
        switches.map_contig(code, x, o1, n, a0, a1)
        o2[:] = x
        switches.map_inplace(code, o2, n, a0, a1)
        for i in range(n):
            o3[i] = switches.unary_scalar(code, x[i], a0, a1)

    @njit
    def zips(code, x, y, out):
        n = x.size
        switches.zip_contig(code, x, y, out[0], n)
        switches.zip_scalar_b(code, x, y[0], out[1], n)
        switches.zip_scalar_a(code, x[0], y, out[2], n)
        out[3][:] = x
        switches.zip_right(code, out[3], y, n)
        out[4][:] = y
        switches.zip_left(code, x, out[4], n)
        out[5][:] = x
        switches.zip_right_scalar(code, out[5], y[0], n)
        out[6][:] = y
        switches.zip_left_scalar(code, x[0], out[6], n)
        for i in range(n):
            out[7][i] = switches.binary_scalar(code, x[i], y[i])
            out[8][i] = switches.binary_scalar(code, x[i], y[0])
            out[9][i] = switches.binary_scalar(code, x[0], y[i])

    rng = np.random.default_rng(3)
    for dt in (np.float32, np.int64):
        x = (rng.standard_normal(19) * 3).astype(dt)
        y = (np.abs(rng.standard_normal(19)) * 3 + 1).astype(dt)
        for code, u in enumerate(UNARY):
            if np.dtype(dt).kind == "i" and u.float_only:
                continue
            o1, o2, o3 = (np.empty_like(x) for _ in range(3))
            loops(code, x, y, o1, o2, o3, dt(-1), dt(2))
            np.testing.assert_array_equal(o1, o3, err_msg=u.name)
            np.testing.assert_array_equal(o2, o3, err_msg=u.name)
        for code, b in enumerate(BINARY_OPS):
            if np.dtype(dt).kind == "i" and b == "div":
                continue
            out = np.empty((10, x.size), dt)
            zips(code, x, y, out)
            for k in (0, 3, 4):
                np.testing.assert_array_equal(out[k], out[7], err_msg=b)
            for k in (1, 5):
                np.testing.assert_array_equal(out[k], out[8], err_msg=b)
            for k in (2, 6):
                np.testing.assert_array_equal(out[k], out[9], err_msg=b)
            ref = {"add": x + y, "sub": x - y, "mul": x * y, "maximum": np.maximum(x, y),
                   "minimum": np.minimum(x, y)}.get(b)
            if ref is not None:
                np.testing.assert_array_equal(out[7], ref.astype(dt), err_msg=b)
