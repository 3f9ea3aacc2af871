"""``dynshape.partition(graph, method, **options)``."""
from dynshape.errors import ArgumentError
from dynshape.partitioning import graph as G
from dynshape.partitioning.depth import depth_partition
from dynshape.partitioning.result import Partition
from dynshape.partitioning.serial import serial_partition
from dynshape.partitioning.typed import typed_partition

METHODS = {"depth": ("accel", "group_unsupported"),
           "typed": ("policy", "threshold", "specific", "accel", "fallback"),
           "serial": ("fusion", "max_nodes", "max_compute", "max_bytes")}


def partition(model, method="depth", network_id=None, support=None, shapes=None, **options):
    """Partition ``model`` into sub-models, each run by one device.

    ``model``: a ``dynshape.load_onnx`` model, or a networkx.DiGraph with the attributes of
    ``dynshape.partitioning.graph``. ``method``: "depth" (seed 000; options ``accel``,
    ``group_unsupported``), "typed" (seed 001; ``policy`` S1331..S1334, ``threshold``,
    ``specific`` op types or node names, ``accel``, ``fallback``) or "serial" (seed 002;
    ``fusion`` None / "greedy" / "bidirectional", budgets ``max_nodes``, ``max_compute``,
    ``max_bytes``). For a model: ``support`` {op type: devices} overrides which devices run
    which ops, ``shapes`` measures bytes and compute at those input shapes."""
    if method not in METHODS:
        raise ArgumentError(f"unknown partition method {method!r}; accepted: "
                            f"{', '.join(METHODS)}")
    bad = sorted(set(options) - set(METHODS[method]))
    if bad:
        raise ArgumentError(f"partition method {method!r} takes no option(s) "
                            f"{', '.join(bad)}; accepted: {', '.join(METHODS[method])}")
    if hasattr(model, "graph") and hasattr(model, "plan"):
        g = G.from_model(model, support, shapes)
        network_id = network_id or f"model-{id(model):x}"
    else:
        if support is not None or shapes is not None:
            raise ArgumentError("support= and shapes= apply to a model, not to a graph")
        g = model
        network_id = network_id or "graph"
    G.check(g)
    if method == "depth":
        groups = [(n, d, "", {}) for n, d in depth_partition(g, **options)]
    elif method == "typed":
        groups = [(n, d, note, {"type": t, "compute": c})
                  for n, d, note, t, c in typed_partition(g, **options)]
    else:
        groups = []
        for nodes in serial_partition(g, **options):
            dev = G.device_for(g, nodes, "cpu")
            if dev is None:
                raise ArgumentError(f"a serial sub-graph mixes nodes no single device runs "
                                    f"({', '.join(map(str, nodes[:6]))}); use method "
                                    f"'depth' or 'typed' to separate devices")
            groups.append((nodes, dev, "", {}))
    return Partition.of(g, method, network_id, groups)
