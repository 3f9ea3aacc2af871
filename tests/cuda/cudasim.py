"""Settings shared by the CUDA tests (imported as ``cudasim``: conftest modules are not
importable by name when several exist)."""
from hypothesis import settings

#: few examples: a simulated launch costs milliseconds per block
cuda_settings = settings(max_examples=12, deadline=None)
