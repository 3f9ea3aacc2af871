"""Partitioning a model graph across devices (seeds 000, 001, 002): depth/dependency
partitioning, typed sub-models with policies, serial splitting under budgets. networkx is
imported on first use (the ``onnx`` and ``test`` extras)."""
from dynshape.partitioning.api import METHODS, partition  # noqa: F401
from dynshape.partitioning.result import Partition, Submodel  # noqa: F401
