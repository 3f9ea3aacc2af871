"""Kernel-level and profiling measurements, apart from the peer benchmarks.

These scripts measure something internal on purpose (a micro-kernel alone, the math
functions inlined into the kernels, the steps of the dispatch path, the parts of a table
build) and therefore import kernel or runtime modules by their module path. They use the
same harness (environment, header, alternating blocks, JSON) as the peer benchmarks. Their
internals move with the code: a step that no longer exists is reported, not guessed.
"""
