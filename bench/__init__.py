"""Benchmarks of dynshape against NumPy, PyTorch and ONNX Runtime (see bench/README.md)."""
