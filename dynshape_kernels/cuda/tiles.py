"""Table decoding on the device, shared by every CUDA kernel (the same rules as the CPU
drivers: a table can never make a kernel touch memory outside its operands)."""
from numba import cuda

from ..abi.common_area import C_NDOUTER, C_OPS, C_OSHAPE, OP_BLOCK, OP_OFF, OP_OSTR
from ..abi.tail_mode import ANCHOR_END


@cuda.jit(device=True, inline=True)
def resolve(off, anchor, size, t):
    """(offset, valid length) of an entry in one dimension; valid 0 means do nothing."""
    o = size - off if anchor == ANCHOR_END else off
    if o < 0 or o >= size:
        return 0, 0
    v = size - o
    return o, (v if v < t else t)


@cuda.jit(device=True, inline=True)
def outer_offset(common, op, oi):
    """Element offset of outer (batch) index ``oi`` for operand ``op``."""
    base = C_OPS + op * OP_BLOCK
    off = common[base + OP_OFF]
    for k in range(common[C_NDOUTER] - 1, -1, -1):
        s = common[C_OSHAPE + k]
        off += (oi % s) * common[base + OP_OSTR + k]
        oi //= s
    return off
