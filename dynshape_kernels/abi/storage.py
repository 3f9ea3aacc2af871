"""Storage formats: the half-precision dtypes and how kernels hold them (no Numba import).

float16 (IEEE binary16, NumPy's) and bfloat16 (``ml_dtypes.bfloat16``, the top half of a
float32) are *storage* formats: a kernel loads an element, converts it to float32 in
registers, computes in float32, and rounds the result to the storage format (round to
nearest even) when it stores it. Numba has no CPU type for either, so kernels see their
bits through an integer *carrier* of the same size, and the carrier tells the kernel which
format it holds: ``uint16`` carries float16, ``int16`` carries bfloat16 (the library has no
int16 or uint16 arithmetic of its own, so the carriers are unambiguous). Op attributes of a
half-precision call (leaky_relu's alpha, clip's bounds) are given in float32.

Promotion follows NumPy's ``result_type`` (with ml_dtypes registered): float16 with
float16 stays float16, bfloat16 with float32 gives float32, float16 with bfloat16 gives
float32, a Python scalar is weak (it takes the array's format).
"""

#: storage format -> integer carrier the kernels see
CARRIERS = {"float16": "uint16", "bfloat16": "int16"}
#: storage format -> the dtype a kernel computes (and reads attributes) in
COMPUTE = {"float16": "float32", "bfloat16": "float32"}
HALF_DTYPES = tuple(CARRIERS)

#: Lookup tables (``cpu/lookup.py``): a unary op on a half-precision format has one result per
#: carrier value, so the CPU unary driver can read it from a table instead of computing it.
#: The table rides in the op's float32 attribute array after the two attributes: the bytes of
#: ``attrs[LOOKUP_BASE:]`` are 65,536 carriers (uint16), the result for every input carrier,
#: and ``attrs.size == LOOKUP_SIZE``. LOOKUP_OPS[format] are the kernel ops read from tables:
#: those a table read beats on a large array (3000 x 10000, 2 threads, quiet machine; table
#: read / computed, ms): bfloat16 gelu 7.1/17.6, tanh 7.1/9.2, log 7.1/10.1, sigmoid
#: 7.1/10.9, silu 7.1/11.5 (exp 7.1/7.0 stays computed); float16 gelu 8.9/15.9, sigmoid
#: 8.9/9.5, silu 8.8/9.5 (exp 5.5/5.5, tanh 7.3/7.3, log 7.9/7.9 stay computed). A read is a
#: scalar load, ~0.34 ns per element in cache; bfloat16's 128 mantissas per binade keep
#: normal-distributed data within ~10 KiB of its table, float16's 1,024 spread over ~70 KiB.
#: relu, abs, neg, leaky_relu, clip, reciprocal and sqrt stay computed (cheaper than a read).
LOOKUP_BASE = 2
LOOKUP_SIZE = LOOKUP_BASE + (1 << 16) // 2
LOOKUP_OPS = {"bfloat16": frozenset({"log", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh"}),
              "float16": frozenset({"sigmoid", "silu", "gelu", "gelu_tanh"})}


def carrier(dtype_name):
    """The carrier of a storage format, or the dtype itself for the other dtypes."""
    return CARRIERS.get(dtype_name, dtype_name)


def compute(dtype_name):
    """The dtype a kernel of ``dtype_name`` computes in."""
    return COMPUTE.get(dtype_name, dtype_name)


def carried_compute(kernel_dtype_name):
    """The dtype a kernel computes in for buffers it sees as ``kernel_dtype_name`` (a carrier
    gives its format's computed dtype, float32; any other dtype is its own)."""
    for fmt, c in CARRIERS.items():
        if c == kernel_dtype_name:
            return COMPUTE[fmt]
    return kernel_dtype_name
