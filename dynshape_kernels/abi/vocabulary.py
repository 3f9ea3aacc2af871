"""The op vocabulary: every op the kernels know, by family, with its code and properties.

Op codes are part of the catalog (kernel id = family base + op index * slots + slot) and of
step programs: append, never renumber. This table is the one place an elementwise op is
declared: the op specs, the fusion steps, the ``activation=`` epilogues and the kernels' op
switches are all generated from it. Adding a unary op is one row here plus its scalar
expression for each target (``dynshape_kernels.cpu.scalar_ops.UNARY_SCALARS`` and
``dynshape_kernels.cuda.scalars.UNARY_EXPR``): every switch is generated from those
(``abi.switch_source``).
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class UnaryOp:
    """A unary kernel op.

    ``ints``: what integer inputs do: "same" (computed in the integer type), "float64"
    (converted first, as NumPy's transcendental ufuncs do) or "refuse".
    ``attrs``: the attributes the kernel reads (a0, a1) with their defaults, in order.
    ``public``: callable by that name through ``run`` (False for kernel variants selected by
    another op's attribute, like gelu_tanh, and for copy's identity).
    """
    name: str
    ints: str = "same"
    attrs: tuple = ()
    public: bool = True

    @property
    def float_only(self):
        return self.ints != "same"


#: unary kernel ops in op-code order
UNARY = (
    UnaryOp("relu"),
    UnaryOp("abs"),
    UnaryOp("neg"),
    UnaryOp("exp", "float64"),
    UnaryOp("log", "float64"),
    UnaryOp("sqrt", "float64"),
    UnaryOp("reciprocal", "refuse"),
    UnaryOp("sigmoid", "float64"),
    UnaryOp("tanh", "float64"),
    UnaryOp("gelu", "float64"),
    UnaryOp("gelu_tanh", "float64", public=False),
    UnaryOp("silu", "float64"),
    UnaryOp("leaky_relu", "float64", (("alpha", 0.01),)),
    UnaryOp("clip", "same", (("min", None), ("max", None))),
    UnaryOp("copy", public=False),
)
UNARY_BY_NAME = {u.name: u for u in UNARY}
UNARY_OPS = tuple(u.name for u in UNARY)
#: ops that only exist for floating point (integer inputs are converted or refused)
FLOAT_ONLY_UNARY = frozenset(u.name for u in UNARY if u.float_only)
(RELU, ABS, NEG, EXP, LOG, SQRT, RECIPROCAL, SIGMOID, TANH, GELU, GELU_TANH, SILU,
 LEAKY_RELU, CLIP, IDENTITY) = range(len(UNARY))

#: binary kernel ops in op-code order (NumPy broadcasting and promotion)
BINARY_OPS = ("add", "sub", "mul", "div", "pow", "maximum", "minimum")
ADD, SUB, MUL, DIV, POW, MAXIMUM, MINIMUM = range(len(BINARY_OPS))
#: binary ops integer kernels never run (the op specs and fusion programs promote or refuse
#: them: true division of integers gives float64)
FLOAT_ONLY_BINARY = frozenset({"div"})

REDUCE_OPS = ("sum", "mean", "max", "min", "argmax", "argmin")
SUM, MEAN, MAX, MIN, ARGMAX, ARGMIN = range(len(REDUCE_OPS))

ROWWISE_OPS = ("softmax", "log_softmax", "layer_norm", "rms_norm")
SOFTMAX, LOG_SOFTMAX, LAYER_NORM, RMS_NORM = range(len(ROWWISE_OPS))

POOL_OPS = ("max_pool2d", "avg_pool2d")
MAX_POOL, AVG_POOL = range(len(POOL_OPS))

CONV_OPS = ("conv2d",)
MATMUL_OPS = ("matmul",)


def activations(with_attributes=True):
    """The unary ops an epilogue can apply (``activation=``): every public unary op, or only
    those without attributes (the matmul epilogue reads no attributes)."""
    return tuple(u.name for u in UNARY if u.public and (with_attributes or not u.attrs))
