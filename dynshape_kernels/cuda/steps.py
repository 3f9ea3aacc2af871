"""Step programs on the device: the one CUDA interpreter of ``abi.step_program`` (the CPU's is
``cpu.steps.apply_steps``).

:func:`make_steps` gives, per kind of dtype, a device function
``run_steps(prog, first, last, pattrs, v, sgeo, outer, r, c, s0, s1, s2, s3)`` that applies
the steps ``prog[first:last]`` to ONE element value ``v`` in registers and returns it. The
element sits at (row ``r``, column ``c``) of outer index ``outer``, so side input ``k``
contributes ``sk[sgeo[k, 0] + outer*sgeo[k, 1] + r*sgeo[k, 2] + c*sgeo[k, 3]]`` (the
``apply_steps`` geometry: offset, outer, row, column stride, in elements, any sign, 0 =
broadcast). Every caller maps its own indices onto that geometry: the fused kernel (a plane
element of an outer index, offsets from the common area), the matmul epilogue (output row and
column of a flattened batch: the executor's ``sgeo`` as it is) and the conv epilogue (output
channel as the outer index, output row and column, the image folded into the offset).

``v`` is an element as stored: the carrier of a half-precision format, whose every step
widens, computes in float32 and rounds to the format (the switches of its kind), exactly as
the ops one by one; constants (``pattrs`` in the computed type) are rounded to the format
where a step uses them, as on the CPU.
"""
from numba import cuda

from ..abi.step_program import (G_COL, G_OFF, G_OUTER, G_ROW, K_CONST_L, K_CONST_R, K_SIDE_L,
                                K_SIDE_R, K_UNARY, P_ATTR, P_CODE, P_KIND, P_SIDE)
from .half import access
from .scalars import switches

_built = {}


def make_steps(nbtype, kind):
    """The step interpreter for elements of Numba type ``nbtype`` (the carrier for a half
    kind) of kind ``kind`` (``abi.switch_source.KINDS``); one device function per pair."""
    key = (str(nbtype), kind)
    hit = _built.get(key)
    if hit is not None:
        return hit
    unary_op, binary_op = switches(kind)
    constant = access(kind, nbtype).store      # a half element's constant: rounded, its bits

    @cuda.jit(device=True, inline=True)
    def run_steps(prog, first, last, pattrs, v, sgeo, outer, r, c, s0, s1, s2, s3):
        for s in range(first, last):
            kind_ = prog[s, P_KIND]
            code = prog[s, P_CODE]
            if kind_ == K_UNARY:
                a = prog[s, P_ATTR]
                v = unary_op(code, v, pattrs[a], pattrs[a + 1])
            elif kind_ == K_CONST_R:
                v = binary_op(code, v, constant(pattrs[prog[s, P_ATTR]]))
            elif kind_ == K_CONST_L:
                v = binary_op(code, constant(pattrs[prog[s, P_ATTR]]), v)
            else:
                k = prog[s, P_SIDE]
                so = (sgeo[k, G_OFF] + outer * sgeo[k, G_OUTER] + r * sgeo[k, G_ROW]
                      + c * sgeo[k, G_COL])
                if k == 0:
                    w = s0[so]
                elif k == 1:
                    w = s1[so]
                elif k == 2:
                    w = s2[so]
                else:
                    w = s3[so]
                if kind_ == K_SIDE_R:
                    v = binary_op(code, v, w)
                elif kind_ == K_SIDE_L:
                    v = binary_op(code, w, v)
        return v

    _built[key] = run_steps
    return run_steps


__all__ = ["make_steps"]
