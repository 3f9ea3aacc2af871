"""Functions reached by address (``dynshape_kernels.cpu.address_link``), the step interpreter
(``step_link``) first: drivers call them through a slot filled before they load, for the
driver's dtype only; an empty slot raises instead of jumping to 0; a driver that does not
list a link it calls is refused; arguments must fit a dtype's signature."""
import json
import os
import subprocess
import sys
import textwrap
import types as pytypes

import numpy as np
import pytest
from numba import njit, types
from numba.core.errors import TypingError

from dynshape_kernels import drivers
from dynshape_kernels.abi.step_program import K_CONST_R, K_UNARY, MAX_SIDES, PROG_COLS
from dynshape_kernels.abi.vocabulary import BINARY_OPS, UNARY_OPS
from dynshape_kernels.cpu import step_link
from dynshape_kernels.cpu.steps import apply_steps


def _program(dtype):
    """relu, then * 3: (prog, pattrs, sides, sgeo) for a tile of ``dtype``."""
    prog = np.zeros((2, PROG_COLS), np.int64)
    prog[0, :2] = K_UNARY, UNARY_OPS.index("relu")
    prog[1, :2] = K_CONST_R, BINARY_OPS.index("mul")
    prog[1, 3] = 2
    pattrs = np.array([0, 0, 3], dtype)
    sides = tuple(np.zeros(1, dtype) for _ in range(MAX_SIDES))
    return prog, pattrs, sides, np.zeros((MAX_SIDES, 4), np.int64)


def tiny_driver(buf, prog, pattrs, sides, sgeo):
    """A driver whose whole work is one step program over ``buf`` (one row)."""
    apply_steps(prog, pattrs, buf, 0, buf.size, 1, buf.size, 0, 0, 0, sides, sgeo)


def tiny_signature(dtype):
    arr = types.Array(getattr(types, dtype), 1, "C")
    ro = types.Array(getattr(types, dtype), 1, "C", readonly=True)
    tab = types.Array(types.int64, 2, "C", readonly=True)
    return (arr, tab, ro, types.UniTuple(ro, MAX_SIDES), tab)


@pytest.fixture
def tiny_family():
    """Register ``tiny_driver`` as a family, in a module object that says (or not) that it
    runs step programs; unregistered afterwards."""
    names = []

    def register(declares):
        name = f"tiny_steps_{len(names)}_{declares}"
        mod = pytypes.SimpleNamespace(tiny_driver=tiny_driver, tiny_signature=tiny_signature)
        if declares:
            mod.LINKS = (step_link.STEPS,)
        drivers.register(name, mod, "tiny_driver", "tiny_signature", dtypes=("float64",))
        names.append(name)
        return name
    yield register
    for name in names:
        drivers._DRIVERS.pop(name, None)
        drivers._resolved.pop(name, None)
        drivers._loaded.pop((name, "float64"), None)


def test_a_declared_driver_runs_its_program_through_its_dtypes_slot(tiny_family):
    fam = tiny_family(True)
    d = drivers.get(fam, "float64")
    assert "float64" in step_link.STEPS.filled()
    x = np.linspace(-2, 2, 1001)
    prog, pattrs, sides, sgeo = _program(np.float64)
    d(x, prog, pattrs, sides, sgeo)
    np.testing.assert_array_equal(x, np.maximum(np.linspace(-2, 2, 1001), 0) * 3)


def test_a_driver_that_does_not_declare_its_step_programs_is_refused(tiny_family):
    """Checked when the driver compiles (a DriverSet never loads from Numba's cache)."""
    fam = tiny_family(False)
    with pytest.raises(RuntimeError, match="its module's LINKS must list steps"):
        drivers.DriverSet(parallel=False).get(fam, "float64")


def test_keys_follow_the_drivers_storage():
    assert step_link.key_for("float32") == ("float32", "float32", "float32")
    assert step_link.key_for("bfloat16") == ("int16", "int16", "float32")
    assert step_link.key_for("float16") == ("uint16", "uint16", "float32")
    assert step_link.key_for("int64") == ("int64", "int64", "int64")


def test_a_call_no_driver_dtype_makes_is_refused_when_it_compiles():
    @njit
    def mixed(buf, prog, pattrs, sides, sgeo):
        apply_steps(prog, pattrs, buf, 0, buf.size, 1, buf.size, 0, 0, 0, sides, sgeo)
    prog, pattrs, sides, sgeo = _program(np.float64)
    with pytest.raises(TypingError, match="steps: the arguments fit no dtype's signature"):
        mixed(np.zeros(4, np.float32), prog, pattrs, sides, sgeo)
    with pytest.raises(TypingError, match=r"float64: argument 4 is array\(float64, 1d, A\)"):
        mixed(np.zeros(8)[::2], prog, pattrs, sides, sgeo)


_CHILD = """
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from test_step_link import _program, tiny_driver
    from numba import njit
    run = njit(cache=True)(tiny_driver)
    from dynshape_kernels.cpu import step_link
    if sys.argv[2] == "fill":
        step_link.STEPS.ensure("float64")
    x = np.linspace(-1, 1, 9)
    try:
        run(x, *_program(np.float64))
        print(json.dumps(dict(ok=bool((x == np.maximum(np.linspace(-1, 1, 9), 0) * 3).all()))))
    except RuntimeError as exc:
        print(json.dumps(dict(error=str(exc))))
"""


def test_cached_code_loaded_before_its_slot_is_filled_raises_instead_of_crashing(tmp_path):
    """Code that calls the interpreter, loaded from Numba's cache in a process that never
    filled the slot, raises RuntimeError naming the key (it does not jump to address 0)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))

    def child(mode):
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHILD),
                            os.path.dirname(__file__), mode], capture_output=True, text=True,
                           env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])
    assert child("compile") == {"ok": True}         # compiling fills the slot, then caches
    got = child("load")                             # loaded from the cache, slot empty
    assert "steps for float64 is not loaded in this process" in got["error"]
    assert child("fill") == {"ok": True}            # the same cached code once it is filled


_ON_DEMAND_CHILD = """
    import json, sys, types
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from numba.core import event
    from test_step_link import _program, tiny_driver, tiny_signature
    from dynshape_kernels import drivers
    from dynshape_kernels.cpu import step_link
    compiled = []
    class Seen(event.Listener):
        def on_start(self, ev): compiled.append(ev.data["dispatcher"].py_func.__name__)
        def on_end(self, ev): pass
    event.register("numba:compile", Seen())
    mod = types.SimpleNamespace(tiny_driver=tiny_driver, tiny_signature=tiny_signature,
                                ON_DEMAND=(step_link.STEPS,))
    drivers.register("tiny_on_demand", mod, "tiny_driver", "tiny_signature",
                     dtypes=("float64",))
    run = drivers.get("tiny_on_demand", "float64")
    got = dict(filled_after_get=step_link.STEPS.filled(),
               interpreter_compiled="_apply_steps_range" in compiled)
    x = np.linspace(-1, 1, 9)
    try:
        run(x, *_program(np.float64))
    except RuntimeError as exc:
        got["error"] = str(exc)
    drivers.fill_on_demand("tiny_on_demand", "float64")
    run(x, *_program(np.float64))
    got["filled"] = step_link.STEPS.filled()
    got["ok"] = bool((x == np.maximum(np.linspace(-1, 1, 9), 0) * 3).all())
    print(json.dumps(got))
"""


def test_a_driver_that_calls_the_interpreter_on_demand_loads_without_it(tmp_path):
    """A driver module listing the interpreter in ``ON_DEMAND`` (conv's and matmul's) is
    compiled without compiling or filling the interpreter (in a fresh process and cache);
    a program run through the empty slot raises, and ``fill_on_demand`` makes it run."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(_ON_DEMAND_CHILD),
                        os.path.dirname(__file__)], capture_output=True, text=True,
                       env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path)), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["filled_after_get"] == [] and not got["interpreter_compiled"]
    assert "steps for float64 is not loaded in this process" in got["error"]
    assert got["filled"] == ["float64"] and got["ok"]


def test_conv_and_matmul_fill_the_interpreter_before_an_epilogue(monkeypatch):
    """conv2d and matmul list the interpreter on demand; a fused chain after them fills its
    slot before the driver runs (here emptied first: without the fill the driver raises)."""
    import dynshape
    assert step_link.STEPS in drivers.on_demand_links("conv")
    assert step_link.STEPS in drivers.on_demand_links("matmul")
    assert step_link.STEPS not in drivers.on_demand_links("fused")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((9, 20)).astype(np.float32)
    b = rng.standard_normal((20, 7)).astype(np.float32)
    x = rng.standard_normal((1, 3, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    mm = dynshape.fuse(["matmul", "relu", ("mul", 2.0)])
    cv = dynshape.fuse([("conv2d", {"pads": 1}), "relu", ("mul", 2.0)])
    want_mm = np.maximum(dynshape.run("matmul", a, b), 0) * 2
    want_cv = np.maximum(dynshape.run("conv2d", x, w, pads=1), 0) * 2
    mm(a, b), cv(x, w)                  # loaded, tables built
    slot = step_link.STEPS._slots["float32"]
    for f, args, want in ((mm, (a, b), want_mm), (cv, (x, w), want_cv)):
        monkeypatch.setattr(slot, "value", None)
        np.testing.assert_allclose(f(*args), want, rtol=1e-5, atol=1e-5)
        assert slot.value


def test_scratch_span_joins_rows_only_for_position_free_programs():
    """An epilogue runs a program over rows with scratch between them as ONE run only when
    no step reads a side input by position, the rows do not follow each other already, and
    the run computes at most half as many values again as the rows hold."""
    from dynshape_kernels.abi.step_program import K_SIDE_L, K_SIDE_R
    from dynshape_kernels.cpu.steps import scratch_span
    prog = _program("float32")[0]
    assert scratch_span(prog, 384, 64, 366) == 63 * 384 + 366
    assert scratch_span(prog, 10, 5, 8) == 4 * 10 + 8             # 8 extra of 40: joined
    assert scratch_span(prog, 20, 5, 8) == 0                      # 48 extra of 40: per row
    assert scratch_span(prog, 366, 64, 366) == 0                  # one run already
    assert scratch_span(prog, 384, 1, 366) == 0                   # one row
    assert scratch_span(prog[:0], 384, 64, 366) == 63 * 384 + 366  # no steps: nothing read
    for kind in (K_SIDE_R, K_SIDE_L):
        side = prog.copy()
        side[1, 0] = kind
        assert scratch_span(side, 384, 64, 366) == 0


def test_per_entry_functions_are_reached_by_address():
    """The row-wise and reduction chunks call their per-entry function, the row-wise entry
    its strided and column rows, the fused tiles their first step, the unary run and entry
    their rows and scratch tiles through a link listed in the driver's ``LINKS``, never
    directly (a direct call compiles the callee's code into the caller once more: 3-5 s of
    the row-wise driver's first compile)."""
    from dynshape_kernels.cpu import elementwise as ew, fused, reduce, rowwise
    for caller, link, family in ((rowwise._rowwise_chunk, rowwise.ENTRY, "rowwise"),
                                 (rowwise._rowwise_entry, rowwise.LANES, "rowwise"),
                                 (rowwise._rowwise_entry, rowwise.COLS, "rowwise"),
                                 (reduce._reduce_chunk, reduce.ENTRY, "reduce"),
                                 (fused._elementwise_tile, fused.FIRST, "fused"),
                                 (fused._row_tile, fused.FIRST, "fused"),
                                 (ew._unary_run, ew.UNARY_ROWS, "unary"),
                                 (ew._unary_entry, ew.UNARY_ROWS, "copy"),
                                 (ew._unary_entry, ew.UNARY_SCRATCH, "unary")):
        code, names = caller.py_func.__code__, caller.py_func.__globals__
        callee = link.dispatcher()
        assert any(names.get(n) is link.call for n in code.co_names), (caller, link)
        assert not any(names.get(n) is callee for n in code.co_names), (caller, link)
        assert link in drivers.links_of(family)
        assert callee.targetoptions.get("error_model") == "numpy"
