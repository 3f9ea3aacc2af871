"""Table decoding on the device, shared by every CUDA kernel (the same rules as the CPU
drivers: a table can never make a kernel touch memory outside its operands)."""
from numba import cuda

from ..abi.common_area import (C_IDBASE, C_M, C_N, C_NDOUTER, C_OPBASE, C_OPS, C_OSHAPE,
                               E_ANCH0, E_ANCH1, E_KID, E_OFF0, E_OFF1, OP_BLOCK, OP_OFF,
                               OP_OSTR, OP_SM, OP_SN)
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


@cuda.jit(device=True, inline=True)
def decode_entry(entries, e, common, t0s, t1s):
    """``(op code, slot, row offset, valid rows, column offset, valid columns, T0, T1)`` of entry
    ``e`` of a plane-style table: the kernel id decodes into (op, slot) exactly as on the
    CPU; ``t0s``/``t1s`` are the family's tile rows and columns by slot."""
    n_slots = len(t0s)
    kid = entries[e, E_KID] - common[C_IDBASE]
    code = kid // n_slots + common[C_OPBASE]
    slot = kid % n_slots
    t0 = 1
    t1 = 1
    for s in range(n_slots):
        if s == slot:
            t0 = t0s[s]
            t1 = t1s[s]
    r0, v0 = resolve(entries[e, E_OFF0], entries[e, E_ANCH0], common[C_M], t0)
    c0, v1 = resolve(entries[e, E_OFF1], entries[e, E_ANCH1], common[C_N], t1)
    return code, slot, r0, v0, c0, v1, t0, t1


@cuda.jit(device=True, inline=True)
def operand_strides(common, op):
    """(row stride, column stride) of operand ``op`` on the inner plane, in elements."""
    base = C_OPS + op * OP_BLOCK
    return common[base + OP_SM], common[base + OP_SN]
