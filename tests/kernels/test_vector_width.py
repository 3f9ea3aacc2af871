"""512-bit vectors for compute-bound loops (``cpu.vector_width``, ``cpu.switches``): on an
AVX-512F target a function marked ``wide_vectors()`` vectorizes on zmm registers whatever
LLVM's tuning for the CPU prefers; the op switches put the loops of the ops that call a math
function in ``<switch>_wide`` (marked), the cheap ops' loops stay in the switch itself."""
import re

import numpy as np
import pytest
from numba import njit

from dynshape_kernels.abi.switch_source import binary_cases, unary_cases
from dynshape_kernels.abi.vocabulary import EXP, GELU, RELU
from dynshape_kernels.cpu import switches, vector_width
from dynshape_kernels.cpu.mathfuncs import gelu_erf
from dynshape_kernels.cpu.scalar_ops import BINARY_SCALARS, UNARY_SCALARS

needs_wide = pytest.mark.skipif(not vector_width.WIDE,
                                reason="code is not generated for an AVX-512F target")


def _vector_ops(asm, reg):
    """Lines of vector arithmetic (fused multiply-adds, multiplies) on registers ``reg``."""
    return re.findall(r"\bv(?:fmadd|fnmadd|fmsub|mul)\w*ps\s+[^\n]*%" + reg, asm)


@needs_wide
def test_marked_loop_uses_zmm():
    @njit(error_model="numpy")
    def marked(x, o):
        vector_width.wide_vectors()
        for i in range(x.size):
            o[i] = gelu_erf(x[i])

    x = np.linspace(-4, 4, 1000, dtype=np.float32)
    o = np.empty_like(x)
    marked(x, o)
    asm = marked.inspect_asm(marked.signatures[0])
    assert _vector_ops(asm, "zmm"), "the marked loop was not vectorized on zmm"
    assert vector_width.ATTRIBUTE in marked.inspect_llvm(marked.signatures[0])


def test_attribute_only_on_avx512_targets():
    """The mark is an attribute only where the target has AVX-512F; the function computes
    the same either way."""
    @njit(error_model="numpy")
    def marked(x, o):
        vector_width.wide_vectors()
        for i in range(x.size):
            o[i] = x[i] * 2

    x = np.arange(100, dtype=np.float32)
    o = np.empty_like(x)
    marked(x, o)
    np.testing.assert_array_equal(o, x * 2)
    llvm = marked.inspect_llvm(marked.signatures[0])
    assert (vector_width.ATTRIBUTE in llvm) == vector_width.WIDE


@pytest.mark.parametrize("kind", ["float", "float16", "bfloat16"])
def test_math_ops_loops_live_in_wide_switches(kind):
    src = switches.generated_source(kind)
    unary = unary_cases(UNARY_SCALARS, False, "CPU")
    binary = binary_cases(BINARY_SCALARS, False, "CPU")
    for name, cases in (("map_contig", unary), ("map_inplace", unary),
                        ("zip_contig", binary), ("zip_rows", binary)):
        heavy = {str(c) for c, expr in cases if "mathfuncs." in expr}
        plain = re.search(rf"\ndef {name}\(([^)]*)\):\n(.*?)(?=\ndef |\Z)", src, re.S)
        assert plain is not None, name
        body = plain.group(2)
        assert "wide_vectors()" not in body
        wide = re.search(rf"\ndef {name}_wide\(([^)]*)\):\n    wide_vectors\(\)\n", src)
        assert (wide is not None) == bool(heavy), name
        # each op that calls a math function is delegated, no other op is
        for m in re.finditer(r"code == (\d+):\n\s+(\S+)", body):
            assert m.group(2).startswith(f"{name}_wide(") == (m.group(1) in heavy), \
                (name, m.group(1))
    # the scalar switches hold no loop and are never split
    assert "def unary_scalar_wide" not in src and "def binary_scalar_wide" not in src


def test_integer_switches_have_no_wide_part():
    assert "_wide" not in switches.generated_source("integer")


@needs_wide
def test_switch_runs_math_ops_on_zmm_and_cheap_ops_as_before():
    """exp and gelu through ``map_contig`` run 512-bit loops and give the math functions'
    own results; relu's loop is outside the marked function."""
    @njit(error_model="numpy")
    def run(code, x, o):
        switches.map_contig(code, x, o, x.size, np.float32(0), np.float32(0))

    x = np.linspace(-6, 6, 4099, dtype=np.float32)
    for code, ref in ((EXP, np.exp(x.astype(np.float64))),
                      (GELU, None), (RELU, np.maximum(x, 0))):
        o = np.empty_like(x)
        run(code, x, o)
        if ref is not None:
            np.testing.assert_allclose(o, ref.astype(np.float32), rtol=4e-7)
    asm = run.inspect_asm(run.signatures[0])
    assert _vector_ops(asm, "zmm")
