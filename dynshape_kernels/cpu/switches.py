"""The CPU op switches, generated from the op vocabulary and the scalar expressions of
``scalar_ops`` (one expression per op; nothing here names an op).

A switch takes an op code and runs that op: on scalars (``unary_scalar``, ``binary_scalar``)
or as a loop over a row (``map_contig``, ``map_inplace``, ``zip_*``) or over the rows of a
tile (``zip_rows``, ``zip_right_rows``, ``zip_left_rows``). In the loops the op
switch sits outside the element loop, so each op's loop is branch-free and vectorizes. The
in-place loops read and write ONE array: called with the same array twice, the two-array
loops would take LLVM's scalar fallback after its run-time alias check (measured 12x slower
for exp, 5x for relu).

Each switch is generated once per kind of element type (``KINDS``): floating, integer (which
leaves out the float-only ops, which the op specs never send to integer kernels), and the
half-precision storage formats, whose loads convert to float32 and whose stores round back
(``cpu.half``). The kind is selected by the element type at compile time. All run under
NumPy's error model (x/0 gives inf or nan). ``generated_source(kind)`` shows the code.
"""
import math

from numba import types
from numba.extending import overload

from . import mathfuncs
from .callee import callee
from .half import narrow16, narrowbf, widen16, widenbf
from .scalar_ops import (BINARY_SCALARS, UNARY_SCALARS, cube_pow, int_pow, relu, vmax,
                         vmin)
from .prefetch import prefetch_on
from .streaming import AHEAD_BYTES, stream_block
from .vector_width import wide_vectors
from ..abi.switch_source import KINDS, binary_cases, renamed, unary_cases
from ..abi.switch_source import switch_source as _switch_source
from ..abi.vocabulary import ADD, CLIP, IDENTITY, MUL, RELU, SUB

#: unary switches: name -> (parameters, the element ``v``: an array's load or a parameter,
#: the store of the result: an array element, or None to return it)
UNARY_SWITCHES = {
    "unary_scalar": ("code, v, a0, a1", "v", None),
    "map_contig": ("code, xv, ov, n, a0, a1", "xv[i]", "ov[i]"),
    "map_inplace": ("code, buf, n, a0, a1", "buf[i]", "buf[i]"),
}

#: binary switches: name -> (parameters, ``a``, ``b``, store), as for the unary ones
BINARY_SWITCHES = {
    "binary_scalar": ("code, a, b", "a", "b", None),
    "zip_contig": ("code, av, bv, ov, n", "av[i]", "bv[i]", "ov[i]"),
    "zip_scalar_b": ("code, av, b, ov, n", "av[i]", "b", "ov[i]"),
    "zip_scalar_a": ("code, a, bv, ov, n", "a", "bv[i]", "ov[i]"),
    "zip_right": ("code, buf, bv, n", "buf[i]", "bv[i]", "buf[i]"),
    "zip_left": ("code, av, buf, n", "av[i]", "buf[i]", "buf[i]"),
    "zip_right_scalar": ("code, buf, b, n", "buf[i]", "b", "buf[i]"),
    "zip_left_scalar": ("code, a, buf, n", "a", "buf[i]", "buf[i]"),
}


#: binary switches over ``m`` rows of ``n`` elements: name -> (parameters, ``a``, ``b``, store,
#: the row views). Row r of an operand starts at its offset + r * its row step (the offsets
#: are absolute, so a negative step never indexes from the end); one call runs a whole tile
#: whose rows do not follow each other, instead of one call per row (a call costs ~40-80 ns,
#: more than a 1000-element row's vector work)
ROW_SWITCHES = {
    "zip_rows": ("code, av, ao, sa, bv, bo, sb, ov, oo, so, m, n", "ar[i]", "br[i]", "orow[i]",
                 ("ar = av[ao + r * sa:ao + r * sa + n]", "br = bv[bo + r * sb:bo + r * sb + n]",
                  "orow = ov[oo + r * so:oo + r * so + n]")),
    "zip_right_rows": ("code, buf, fo, sf, bv, bo, sb, m, n", "row[i]", "br[i]", "row[i]",
                       ("row = buf[fo + r * sf:fo + r * sf + n]",
                        "br = bv[bo + r * sb:bo + r * sb + n]")),
    "zip_left_rows": ("code, av, ao, sa, buf, fo, sf, m, n", "ar[i]", "row[i]", "row[i]",
                      ("ar = av[ao + r * sa:ao + r * sa + n]",
                       "row = buf[fo + r * sf:fo + r * sf + n]")),
}


#: streaming switches (``cpu.streaming``): the output ``ov`` from ``ov[h]`` (a line start) to
#: ``ov[e]`` in blocks of ``buf.size`` elements, each computed into ``buf`` and then stored
#: as whole lines, the inputs (the last item) prefetched AHEAD_BYTES ahead of the block;
#: only the ops whose loop is memory-bound (``STREAM_UNARY``/``_BINARY``; the math ops
#: stream through ``map_contig``, see ``elementwise._stream_map``)
STREAM_SWITCHES = {
    "map_stream": ("code, xv, ov, h, e, a0, a1, buf", ("v",), ("xs[i]",),
                   ("xs = xv[s:s + w]",), ("xv",)),
    "zip_stream": ("code, av, bv, ov, h, e, buf", ("a", "b"), ("as_[i]", "bs[i]"),
                   ("as_ = av[s:s + w]", "bs = bv[s:s + w]"), ("av", "bv")),
}
#: relu(a op b) streaming where ``b`` repeats with period ``p`` (a bias row added to each of
#: the rows of ``av``, which follow each other, as do the output's; the fused bias + relu):
#: element i of ``av`` and ``ov`` pairs with ``bv[bo + i % p]``; blocks ``[h, e)`` stream
#: (``ov[h]`` starts a line), ``[0, h)`` and ``[e, n)`` store normally. Needs
#: ``p >= buf.size`` (a block crosses at most one row end) and ``buf`` without a reference
#: count (``borrowed``: it is sliced per block).
STREAM_PERIOD_SWITCHES = {
    "zip_relu_period_stream": "code, av, bv, bo, p, ov, h, e, n, buf",
}
#: a op b where ``b`` repeats with period ``p``, as above but with one element loop per op:
#: the blocks of ``w = buf.size`` elements from ``ov[h]`` up to ``ov[e]`` computed into
#: ``buf``, each in pieces that end where the period ends, and streamed when ``stream``;
#: else (a head or tail shorter than a block) left in ``buf`` for the caller to store.
#: Needs ``bv`` and ``buf`` without a reference count (``borrowed``: they are sliced per
#: piece). The binary driver's bias row over rows that follow each other runs it (the
#: switch above in its place made that driver compile 3.5-4 s longer, this one ~1.5 s)
STREAM_BLOCK_PERIOD_SWITCHES = {
    "zip_period_blocks": "code, av, bv, bo, p, ov, h, e, buf, stream",
}

#: the ops a streaming switch runs: the commonest of the cheap ones, whose loops wait on
#: memory (an exp or a tanh computes long enough per line for the caches to keep up); the
#: streaming paths cost compile time (float32 drivers, these three ops each: unary +1.0 s,
#: binary +0.8 s; with abs, neg, leaky_relu, div, maximum and minimum too: +1.3 s, +1.1 s)
STREAM_UNARY = frozenset({RELU, CLIP, IDENTITY})
STREAM_BINARY = frozenset({ADD, SUB, MUL})
#: the ops of the periodic block switch: a bias row is added (each op more in it made the
#: binary driver compile ~1 s longer)
STREAM_PERIOD_BINARY = frozenset({ADD})


def _parts(kind, names, sources, store):
    """(preamble, loop loads, store format) of a switch whose operands ``names`` come from
    ``sources``; expressions use the operands as ``v_``, ``a_``, ``b_``."""
    load, narrow = KINDS[kind]
    preamble = [f"{n}_ = {load}({src})" for n, src in zip(names, sources) if "[" not in src]
    loads = [f"    {n}_ = {load}({src})" for n, src in zip(names, sources) if "[" in src]
    put = f"{store} = {narrow}({{}})" if store else f"return {narrow}({{}})"
    return preamble, loads, put


def _body(loads, put, inplace_identity):
    def body(expr):
        if inplace_identity and expr == "v":
            return ["return"]                       # the identity in place: nothing to do
        e = renamed(expr)
        if not loads:
            return [put.format(e)]
        return ["for i in range(n):", *loads, "    " + put.format(e)]
    return body


def _rows_body(views, loads, put):
    def body(expr):
        return ["for r in range(m):", *("    " + v for v in views), "    for i in range(n):",
                *("    " + ln for ln in loads), "        " + put.format(renamed(expr))]
    return body


def _stream_body(views, loads, narrow, arrays):
    """Lines of one op of a streaming switch: per block, prefetch the inputs ``arrays``
    AHEAD_BYTES on (``ahead`` elements), compute the block into ``buf``, stream it."""
    fetch = [f"    prefetch_on({a}, s + ahead, w)" for a in arrays]

    def body(expr):
        return ["for s in range(h, e, w):", *fetch, *("    " + v for v in views),
                "    for i in range(w):",
                *("    " + ln for ln in loads),
                f"        buf[i] = {narrow}({renamed(expr)})", "    stream_block(buf, ov, s)"]
    return body


def _stream_period_body(loads, narrow):
    """Lines of one op of the periodic streaming switch: the head, the blocks (in two
    pieces when one crosses a row end) and the tail."""
    loads = [ln.strip() for ln in loads]                  # "a_ = (ar[i])", "b_ = (br[i])"

    def loop(head, a, b, target, put, pad):
        body = [ln.replace("ar[i]", a).replace("br[i]", b) for ln in loads]
        return [pad + head, *(pad + "    " + ln for ln in body), f"{pad}    {target} = {put}"]

    def one(result):
        put = f"{narrow}({result})"
        return [*loop("for j in range(h):", "av[j]", "bv[bo + j % p]", "ov[j]", put, ""),
                "c = h % p",
                "for s in range(h, e, w):",
                "    prefetch_on(av, s + ahead, w)",
                "    k = min(w, p - c)",
                "    as_ = av[s:s + k]",
                "    bs = bv[bo + c:bo + c + k]",
                "    bk = buf[:k]",
                *loop("for i in range(k):", "as_[i]", "bs[i]", "bk[i]", put, "    "),
                "    if k < w:",
                "        as_ = av[s + k:s + w]",
                "        bs = bv[bo:bo + w - k]",
                "        bk = buf[k:]",
                *loop("for i in range(w - k):", "as_[i]", "bs[i]", "bk[i]", put, "        "),
                "    stream_block(buf, ov, s)",
                "    c += w",
                "    if c >= p:",
                "        c -= p",
                *loop("for j in range(e, n):", "av[j]", "bv[bo + j % p]", "ov[j]", put, "")]

    def body(expr):
        return one(f"relu({renamed(expr)})")
    return body


def _block_period_body(loads, narrow):
    """Lines of one op of the periodic block switch: each block filled in pieces that end
    where the block or the period ends, then streamed when asked."""
    loads = [ln.strip().replace("ar[i]", "as_[i]").replace("br[i]", "bs[i]") for ln in loads]

    def body(expr):
        return ["c = h % p",
                "for s in range(h, e, w):",
                "    if stream:",
                "        prefetch_on(av, s + ahead, w)",
                "    m = min(w, e - s)",
                "    f = 0",
                "    while f < m:",
                "        k = min(m - f, p - c)",
                "        as_ = av[s + f:s + f + k]",
                "        bs = bv[bo + c:bo + c + k]",
                "        bk = buf[f:f + k]",
                "        for i in range(k):",
                *("            " + ln for ln in loads),
                f"            bk[i] = {narrow}({renamed(expr)})",
                "        f += k",
                "        c += k",
                "        if c >= p:",
                "            c -= p",
                "    if stream:",
                "        stream_block(buf, ov, s)"]
    return body


#: the binary loop switches whose ``b`` is one value for the whole loop: their pow runs
#: squares and cubes without exp and log (``powf.cube32``). float32, 1e6 elements, 2 threads
#: (1-D, and 1000 x 1003), against torch's 0.15 ms: pow(x, 2.0) 1.27-1.29 ms -> 153-157 us,
#: pow(x, 3.0) 1.26-1.33 ms -> 157-160 us; other exponents unchanged
ONE_EXPONENT = ("zip_scalar_b", "zip_right_scalar")


def _known_exponents(body):
    """``body`` with pow's case split on the exponent ``b_``: 2 and 3 run their own loops."""
    def lines(expr):
        if not expr.startswith("int_pow("):
            return body(expr)
        return ["if b_ == 2:", *("    " + ln for ln in body("a * a")),
                "elif b_ == 3:", *("    " + ln for ln in body("cube_pow(a, b)")),
                "else:", *("    " + ln for ln in body(expr))]
    return lines


def _heavy(expr):
    """Whether an op's scalar expression calls a math function (exp, tanh, gelu...): its loop
    is compute-bound, and 512-bit vectors pay (``cpu.vector_width``); a cheap op's loop is
    bound by memory or L2, where zmm loads that cross cache lines made relu slower."""
    return "mathfuncs." in expr


def generated_source(kind):
    """The Python source of every CPU switch for one kind of element type (``KINDS``).

    A loop switch with ops that call a math function also gets ``<name>_wide``, which holds
    those ops' loops and starts with ``wide_vectors()`` (``cpu.vector_width``: 512-bit
    vectors where the target has them); the switch's case for such an op calls it. So each
    op's loop is compiled once, the transcendentals' on wide vectors, the cheap ops' (relu,
    add...) as LLVM chooses."""
    def switch_source(name, params, cases, body, preamble=()):
        heavy = [c for c in cases if _heavy(c[1])]
        if not heavy:
            return _switch_source(name, params, cases, body, preamble)
        call = [f"{name}_wide({params})"]
        return "\n\n".join([
            _switch_source(f"{name}_wide", params, heavy, body, ["wide_vectors()", *preamble]),
            _switch_source(name, params, cases,
                           lambda expr: call if _heavy(expr) else body(expr), preamble)])
    integer = kind == "integer"
    unary = unary_cases(UNARY_SCALARS, integer, "CPU")
    binary = binary_cases(BINARY_SCALARS, integer, "CPU")
    parts = []
    for name, (params, src, store) in UNARY_SWITCHES.items():
        pre, loads, put = _parts(kind, "v", [src], store)
        make = switch_source if store else _switch_source        # scalar ones: no loop
        parts.append(make(name, params, unary, _body(loads, put, src == store), pre))
    for name, (params, sa, sb, store) in BINARY_SWITCHES.items():
        pre, loads, put = _parts(kind, "ab", [sa, sb], store)
        make = switch_source if store else _switch_source
        body = _body(loads, put, False)
        if name in ONE_EXPONENT:
            body = _known_exponents(body)
        parts.append(make(name, params, binary, body, pre))
    for name, (params, sa, sb, store, views) in ROW_SWITCHES.items():
        pre, loads, put = _parts(kind, "ab", [sa, sb], store)
        parts.append(switch_source(name, params, binary, _rows_body(views, loads, put), pre))
    stream_pre = ["w = buf.size", "ahead = AHEAD_BYTES // buf.itemsize"]
    for name, (params, names, sources, views, arrays) in STREAM_SWITCHES.items():
        cases = [c for c in (unary if len(names) == 1 else binary)
                 if c[0] in (STREAM_UNARY if len(names) == 1 else STREAM_BINARY)]
        _, loads, _ = _parts(kind, names, sources, "buf[i]")
        body = _stream_body(views, loads, KINDS[kind][1], arrays)
        parts.append(switch_source(name, params, cases, body, stream_pre))
    for name, params in STREAM_PERIOD_SWITCHES.items():
        cases = [c for c in binary if c[0] in STREAM_BINARY]
        _, loads, _ = _parts(kind, "ab", ["ar[i]", "br[i]"], "buf[i]")
        body = _stream_period_body(loads, KINDS[kind][1])
        parts.append(switch_source(name, params, cases, body, stream_pre))
    for name, params in STREAM_BLOCK_PERIOD_SWITCHES.items():
        cases = [c for c in binary if c[0] in STREAM_PERIOD_BINARY]
        _, loads, _ = _parts(kind, "ab", ["ar[i]", "br[i]"], "buf[i]")
        body = _block_period_body(loads, KINDS[kind][1])
        parts.append(switch_source(name, params, cases, body, stream_pre))
    return "\n\n".join(parts)


def _compile_switches(kind):
    ns = {"math": math, "mathfuncs": mathfuncs, "int_pow": int_pow, "cube_pow": cube_pow,
          "relu": relu, "vmax": vmax, "vmin": vmin, "widen16": widen16, "narrow16": narrow16,
          "widenbf": widenbf, "narrowbf": narrowbf, "stream_block": stream_block,
          "prefetch_on": prefetch_on, "AHEAD_BYTES": AHEAD_BYTES,
          "wide_vectors": wide_vectors}
    exec(compile(generated_source(kind), f"<dynshape cpu switches ({kind})>", "exec"), ns)
    for name in [n for n in ns if n.endswith("_wide")]:      # called by their switches
        ns[name] = callee(error_model="numpy")(ns[name])
    return ns


_IMPLS = {kind: _compile_switches(kind) for kind in KINDS}


def kind_of(t):
    """The kind of element type (``KINDS``) of a switch's first operand, array or scalar."""
    t = t.dtype if isinstance(t, types.Array) else t
    if t == types.uint16:
        return "float16"
    if t == types.int16:
        return "bfloat16"
    return "integer" if isinstance(t, types.Integer) else "float"


def _declare(name, params):
    """The public stub ``name`` and its overload, which picks the generated implementation
    for the first operand's element type."""
    ns = {"_pick": lambda t: _IMPLS[kind_of(t)][name]}
    first = params.split(", ")[1]
    exec(f"def {name}({params}):\n    '''Generated op switch (see the module).'''\n\n"
         f"def typer({params}):\n    return _pick({first})\n", ns)
    overload(ns[name], jit_options={"error_model": "numpy"})(ns["typer"])
    return ns[name]


for _name, _spec in {**UNARY_SWITCHES, **BINARY_SWITCHES, **ROW_SWITCHES,
                     **STREAM_SWITCHES}.items():
    globals()[_name] = _declare(_name, _spec[0])
for _name, _params in {**STREAM_PERIOD_SWITCHES, **STREAM_BLOCK_PERIOD_SWITCHES}.items():
    globals()[_name] = _declare(_name, _params)

__all__ = sorted({**UNARY_SWITCHES, **BINARY_SWITCHES, **ROW_SWITCHES, **STREAM_SWITCHES,
                  **STREAM_PERIOD_SWITCHES, **STREAM_BLOCK_PERIOD_SWITCHES})
