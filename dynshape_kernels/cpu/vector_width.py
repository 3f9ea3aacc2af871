"""``wide_vectors()``: the calling kernel's loops vectorize with the target's widest vectors.

LLVM tunes its code for Intel's AVX-512 CPUs (Skylake-SP to Sapphire Rapids, and the CPU
names a hypervisor reports for them, such as rocketlake) to prefer 256-bit vectors: loops
are vectorized on ymm registers although zmm ones exist. For AMD's (znver4) it prefers
512 bits. ``wide_vectors()`` as a kernel function's first statement gives that function
LLVM's ``"prefer-vector-width"="512"`` attribute when Numba generates code for an AVX-512F
target (``WIDE``); elsewhere it emits nothing. It computes nothing and changes no result:
the same operations run on more lanes at once.

Measured on an Intel AVX-512 host that LLVM names rocketlake, 2 threads, float32, same
process, old and new builds alternating: over 3e7 elements gelu 22.1-23.5 -> 11.6-11.9 ms
(torch 9.7-10.1), tanh 12.4-16.4 -> 10.6-11.1, sigmoid 11.9-12.8 -> 10.1-10.7, silu 17 ->
10.5, log 19 -> 10.4, exp 9.7-10.1 -> 9.0-9.3; softmax over 77 x 30522 0.72 -> 0.65 ms.
The memory-bound loops gained most: on ymm the same gelu loop ran at 15 or 23 ms depending
only on the loop around it, on zmm at 10.6-11.3 either way. Cheap ops keep LLVM's choice:
marked, relu's loop ran 7% slower over 3e7 elements (zmm loads that cross cache lines), and
sums gained nothing (over 15 x 255 x 257, axis 1, 8% slower), so neither is marked.
"""
from numba import types
from numba.extending import intrinsic

#: the function attribute that asks LLVM's vectorizers for 512-bit vectors
ATTRIBUTE = '"prefer-vector-width"="512"'


def target_has_avx512f():
    """True if Numba generates code for a CPU with AVX-512F (its codegen key, which honours
    ``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES``; a kernel package's machine is part of it)."""
    try:
        from numba.core.registry import cpu_target
        features = cpu_target.target_context.codegen().magic_tuple()[2]
    except Exception:  # pragma: no cover - codegen not available
        return False
    return "+avx512f" in features.split(",")


#: True if kernels marked with ``wide_vectors()`` get 512-bit vectors: the target has
#: AVX-512F. (No switch turns it off: Numba's cache would keep serving the code built
#: under the other setting.)
WIDE = target_has_avx512f()


@intrinsic
def wide_vectors(typingctx):
    """Mark the calling function for 512-bit vectorization (``WIDE``); nothing otherwise."""
    def codegen(context, builder, sig, args):
        if WIDE:
            # a string attribute, which llvmlite's checked ``add`` does not know
            set.add(builder.function.attributes, ATTRIBUTE)
        return context.get_dummy_value()
    return types.none(), codegen
