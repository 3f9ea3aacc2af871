"""Epilogue activations (``activation=`` of matmul, gemm and conv2d): any public unary op of
the vocabulary, by name or as ``(name, {attributes})``, resolved through that op's own spec
(the same attribute schema and checks as ``run(name, x, **attributes)``)."""
import numpy as np
from dynshape_kernels.abi.vocabulary import UNARY, UNARY_OPS

from dynshape import ops
from dynshape.errors import OpAttributeError


def names(with_attributes=True):
    """The activation names an epilogue accepts (all public unary ops, or those whose kernel
    reads no attributes)."""
    return tuple(u.name for u in UNARY if u.public and (with_attributes or not u.attrs))


def resolve(op, act, with_attributes=True):
    """``(kernel op code, a0, a1)`` of activation ``act`` for op ``op``; None -> None.

    The matmul epilogue applies kernels that read no attributes (``with_attributes=False``);
    conv2d's applies any unary kernel with its two attribute values."""
    if act is None or act == "none":
        return None
    attrs = {}
    if isinstance(act, (tuple, list)) and len(act) == 2 and isinstance(act[1], dict):
        act, attrs = act
    accepted = names(with_attributes)
    if not isinstance(act, str) or act not in accepted:
        raise OpAttributeError(f"{op}: unknown activation {act!r}; accepted: None, a name or "
                               f"(name, {{attributes}}); accepted names: {', '.join(accepted)}")
    spec = ops.get(act)
    try:
        merged = spec.check_attrs(attrs)
        kop = spec.kernel_op(merged)
        a = spec.op_attrs(merged, np.dtype(np.float64)) if spec.attrs else np.zeros(2)
    except OpAttributeError as exc:
        raise OpAttributeError(f"{op}: activation {act!r} takes the attributes "
                               f"{', '.join(sorted(spec.attrs)) or 'none'}: {exc}") from None
    return UNARY_OPS.index(kop), float(a[0]), float(a[1])
