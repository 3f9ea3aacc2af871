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
#: and ``attrs.size == LOOKUP_SIZE``. LOOKUP_OPS[format] are the kernel ops read from tables.
#: A table read is one scalar load (~0.32-0.34 ns per element on one core in cache) against
#: the computed half kernels' 0.42-1.36 ns (float16/bfloat16: exp 0.42/0.54, log 0.60/0.73,
#: sigmoid 0.69/0.78, tanh 0.54/0.67, silu 0.68/0.81, gelu 1.10/1.19, gelu_tanh 1.20/1.36).
#: On large arrays what a table read costs depends on how much of the table the data touch:
#: bfloat16's 128 mantissas per binade keep normal-distributed data within ~10 KiB of it (L1),
#: float16's 1,024 within ~70 KiB (L2), where only the costly ops still gain.
#: relu, abs, neg, leaky_relu, clip, reciprocal (0.14-0.33 ns) and sqrt stay computed.
LOOKUP_BASE = 2
LOOKUP_SIZE = LOOKUP_BASE + (1 << 16) // 2
LOOKUP_OPS = {"bfloat16": frozenset({"exp", "log", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh"}),
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
