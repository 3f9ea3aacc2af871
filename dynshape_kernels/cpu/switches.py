"""The CPU op switches, generated from the op vocabulary and the scalar expressions of
``scalar_ops`` (one expression per op; nothing here names an op).

A switch takes an op code and runs that op: on scalars (``unary_scalar``, ``binary_scalar``)
or as a loop over a row (``map_contig``, ``map_inplace``, ``zip_*``). In the loops the op
switch sits outside the element loop, so each op's loop is branch-free and vectorizes. The
in-place loops read and write ONE array: called with the same array twice, the two-array
loops would take LLVM's scalar fallback after its run-time alias check (measured 12x slower
for exp, 5x for relu).

Each switch is generated twice, for floating and for integer element types (the integer one
leaves out the float-only ops, which the op specs never send to integer kernels), and
selected by the element type at compile time. All run under NumPy's error model (x/0 gives
inf or nan). ``generated_source(integer)`` shows the generated code.
"""
import math

from numba import types
from numba.extending import overload

from . import mathfuncs
from .scalar_ops import BINARY_SCALARS, UNARY_SCALARS, int_pow, relu, vmax, vmin
from ..abi.switch_source import binary_cases, switch_source, unary_cases

#: unary switches: name -> (parameters, load of the element ``v``, store of the result);
#: no load: ``v`` is a parameter and the switch returns the result
UNARY_SWITCHES = {
    "unary_scalar": ("code, v, a0, a1", None, None),
    "map_contig": ("code, xv, ov, n, a0, a1", "xv[i]", "ov[i]"),
    "map_inplace": ("code, buf, n, a0, a1", "buf[i]", "buf[i]"),
}

#: binary switches: name -> (parameters, load of ``a``, load of ``b``, store); a missing
#: load names a scalar parameter; no store: the switch returns the result
BINARY_SWITCHES = {
    "binary_scalar": ("code, a, b", None, None, None),
    "zip_contig": ("code, av, bv, ov, n", "av[i]", "bv[i]", "ov[i]"),
    "zip_scalar_b": ("code, av, b, ov, n", "av[i]", None, "ov[i]"),
    "zip_scalar_a": ("code, a, bv, ov, n", None, "bv[i]", "ov[i]"),
    "zip_right": ("code, buf, bv, n", "buf[i]", "bv[i]", "buf[i]"),
    "zip_left": ("code, av, buf, n", "av[i]", "buf[i]", "buf[i]"),
    "zip_right_scalar": ("code, buf, b, n", "buf[i]", None, "buf[i]"),
    "zip_left_scalar": ("code, a, buf, n", None, "buf[i]", "buf[i]"),
}


def _unary_body(load, store):
    def body(expr):
        if store is None:
            return [f"return {expr}"]
        if expr == "v" and load == store:
            return ["return"]                       # the identity in place: nothing to do
        return ["for i in range(n):", f"    v = {load}", f"    {store} = {expr}"]
    return body


def _binary_body(load_a, load_b, store):
    def body(expr):
        if store is None:
            return [f"return {expr}"]
        loads = [f"    {name} = {ld}" for name, ld in (("a", load_a), ("b", load_b)) if ld]
        return ["for i in range(n):", *loads, f"    {store} = {expr}"]
    return body


def generated_source(integer):
    """The Python source of every CPU switch for one kind of element type."""
    unary = unary_cases(UNARY_SCALARS, integer, "CPU")
    binary = binary_cases(BINARY_SCALARS, integer, "CPU")
    parts = [switch_source(name, params, unary, _unary_body(load, store))
             for name, (params, load, store) in UNARY_SWITCHES.items()]
    parts += [switch_source(name, params, binary, _binary_body(la, lb, store))
              for name, (params, la, lb, store) in BINARY_SWITCHES.items()]
    return "\n\n".join(parts)


def _compile_switches(integer):
    ns = {"math": math, "mathfuncs": mathfuncs, "int_pow": int_pow, "relu": relu,
          "vmax": vmax, "vmin": vmin}
    kind = "integer" if integer else "float"
    exec(compile(generated_source(integer), f"<dynshape cpu switches ({kind})>", "exec"), ns)
    return ns


_IMPLS = {False: _compile_switches(False), True: _compile_switches(True)}


def _is_integer(t):
    """Whether the element type of a switch's first operand (array or scalar) is integer."""
    return isinstance(t.dtype if isinstance(t, types.Array) else t, types.Integer)


def _declare(name, params):
    """The public stub ``name`` and its overload, which picks the generated implementation
    for the first operand's element type."""
    ns = {"_pick": lambda t: _IMPLS[_is_integer(t)][name]}
    first = params.split(", ")[1]
    exec(f"def {name}({params}):\n    '''Generated op switch (see the module).'''\n\n"
         f"def typer({params}):\n    return _pick({first})\n", ns)
    overload(ns[name], jit_options={"error_model": "numpy"})(ns["typer"])
    return ns[name]


for _name, _spec in {**UNARY_SWITCHES, **BINARY_SWITCHES}.items():
    globals()[_name] = _declare(_name, _spec[0])

__all__ = sorted({**UNARY_SWITCHES, **BINARY_SWITCHES})
