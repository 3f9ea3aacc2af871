"""The benchmark harness shared by every script under bench/.

Modules, one concept each (import them explicitly; this package imports nothing heavy, so
``environment.prepare()`` can run before NumPy loads):

- ``environment``: the process environment fixed before NumPy, Numba or PyTorch load
  (OpenBLAS variables unset, OpenMP threads bound, thread counts).
- ``header``: what every report starts with (OpenBLAS kernel, thread counts, CPU, Numba
  cache, compilations), also written as the JSON ``header``.
- ``timing``: callables timed in alternating blocks.
- ``peers``: the optional peers (PyTorch, ONNX Runtime, torch.compile) in their allocating
  and ``out=`` forms; a missing peer is a one-line note.
- ``session``: command-line options, kernel warm-up, the printed report and the JSON file.
"""
