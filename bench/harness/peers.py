"""The peers dynshape is compared with, beside NumPy: PyTorch (CPU, eager), torch.compile
and ONNX Runtime, each in its allocating form and, where it has one, its ``out=`` form.

Both forms are always offered because a large allocation and its first-touch page faults
can cost more than a memory-bound kernel: compare ``out=`` with ``out=`` and allocating
with allocating, never across. PyTorch and ONNX Runtime are optional: :func:`load` returns
None for a missing (or disabled) one and prints a one-line note, never raises.
"""
import sys
from dataclasses import dataclass, field

from . import environment
from .environment import THREADS


@dataclass
class Peers:
    """The loaded optional peers (None when absent or disabled) and why any is missing."""
    torch: object = None
    ort: object = None
    onnx: object = None
    notes: dict = field(default_factory=dict)
    compile_enabled: bool = True

    @property
    def F(self):
        return self.torch.nn.functional if self.torch else None


def load(torch=True, ort=True, compile=True, stream=sys.stderr):
    """Import the optional peers; ``False`` skips one. Sets PyTorch's threads to THREADS."""
    p = Peers(compile_enabled=compile)
    if torch:
        try:
            import torch as _torch
            _torch.set_num_threads(THREADS)
            p.torch = _torch
        except Exception as exc:             # not installed, or a broken install
            p.notes["torch"] = f"PyTorch unavailable ({type(exc).__name__}: {exc}); skipped"
    else:
        p.notes["torch"] = "PyTorch disabled (--no-torch)"
    if not p.torch:
        p.compile_enabled = False
    elif not compile:
        p.notes["torch.compile"] = "torch.compile disabled (--no-compile)"
    if ort:
        try:
            import onnx as _onnx
            import onnxruntime as _ort
            p.ort, p.onnx = _ort, _onnx
        except Exception as exc:
            p.notes["onnxruntime"] = (f"ONNX Runtime unavailable ({type(exc).__name__}: "
                                      f"{exc}); skipped")
    else:
        p.notes["onnxruntime"] = "ONNX Runtime disabled (--no-ort)"
    for note in p.notes.values():
        print(f"note: {note}", file=stream, flush=True)
    return p


# ---- PyTorch ---------------------------------------------------------------------------------
def torch_compiled(torch, expr, out=False, dynamic=True):
    """``torch.compile`` of ``expr(*tensors)``: allocating, or with ``out=True`` a callable
    ``(*tensors, o)`` writing into the preallocated ``o`` inside the compiled kernel
    (``o.copy_(expr(...))``, so that the copy fuses into the generated loop)."""
    if not out:
        return torch.compile(expr, dynamic=dynamic)
    return torch.compile(lambda *a: a[-1].copy_(expr(*a[:-1])), dynamic=dynamic)


# ---- ONNX Runtime ----------------------------------------------------------------------------
def ort_session(peers, nodes, inputs, outputs, inits=(), opset=20):
    """A session for a tiny float32 ONNX graph; ``inputs``/``outputs``: [(name, shape)].
    THREADS intra-op threads, sequential, all graph optimizations."""
    ort, helper, tp = peers.ort, peers.onnx.helper, peers.onnx.TensorProto
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, tp.FLOAT, list(s)) for n, s in inputs],
        [helper.make_tensor_value_info(n, tp.FLOAT, list(s)) for n, s in outputs],
        initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    with environment.threads_unbound():         # its thread pool is created here
        return ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])


def ort_out(sess, feeds, out):
    """The ``out=`` form: run_with_iobinding on caller-owned buffers (no allocation, no
    copies; inputs must be contiguous). Returns a zero-argument callable returning ``out``."""
    import numpy as np
    io = sess.io_binding()
    keep = {n: np.ascontiguousarray(a) for n, a in feeds.items()}
    for name, arr in keep.items():
        io.bind_cpu_input(name, arr)
    io.bind_output(sess.get_outputs()[0].name, "cpu", 0, out.dtype, list(out.shape),
                   out.ctypes.data)
    run = sess.run_with_iobinding

    def call(_keep=keep):
        run(io)
        return out
    return call


def ort_alloc(sess, feeds):
    """The allocating form: ``sess.run`` returns a new array per call."""
    name = sess.get_outputs()[0].name
    run = sess.run
    return lambda: run([name], feeds)[0]
