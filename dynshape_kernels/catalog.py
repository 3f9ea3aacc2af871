"""The catalog: every static kernel of this build, with its id and properties, and a hash.

A static kernel is (family, op, dtype, tile slot, target). Ids are dense and deterministic:
families in catalog order, then dtypes, then ops, then tile slots, so that one driver (one
family and dtype) owns the contiguous id range ``base .. base + len(ops) * len(tiles)``, and
``id - base`` decodes into ``(op index, slot)`` inside compiled code.
"""
import hashlib
import json
from dataclasses import dataclass, field

from .abi.tail_mode import TailMode

CATALOG_FORMAT = 1


@dataclass(frozen=True)
class FamilySpec:
    """An op family's static kernels on one target.

    ``tiles``: per slot ``(T0, T1, w)``: tile rows, tile columns and the VARIABLE_PARTIAL
    window on columns. ``quanta``: the bucket quantum of the row and column dimension.
    ``dtype_tiles``: ``((dtype, tiles), ...)`` for families whose tiles differ by dtype
    (register blocking depends on the vector width); ``tiles`` is then the first dtype's.
    """
    name: str
    ops: tuple
    dtypes: tuple
    tiles: tuple
    tail_modes: frozenset = frozenset(TailMode)
    quanta: tuple = (1, 32)
    target: str = "cpu"
    op_base: int = 0
    dtype_tiles: tuple = ()

    def tiles_for(self, dtype):
        return dict(self.dtype_tiles).get(dtype, self.tiles)


@dataclass(frozen=True)
class StaticKernel:
    id: int
    family: str
    op: str
    dtype: str
    tile: tuple
    partial_window: int
    slot: int
    target: str
    tail_modes: frozenset = field(compare=False)


class Catalog:
    """All static kernels of a build, every target's. Lookup by id or by (family, op, dtype,
    slot). ``families`` and the lookups without ``target`` speak of the CPU target's
    families; :meth:`on` gives the same interface for another target (``catalog_for``)."""

    target = "cpu"

    def __init__(self, families):
        self.by_target = {}
        for f in families:
            self.by_target.setdefault(f.target, {})[f.name] = f
        self.families = self.by_target.get("cpu", {})
        self.kernels = []
        self._base = {}
        for fam in families:
            for dtype in fam.dtypes:
                self._base[(fam.target, fam.name, dtype)] = len(self.kernels)
                for op in fam.ops:
                    for slot, (t0, t1, w) in enumerate(fam.tiles_for(dtype)):
                        self.kernels.append(StaticKernel(
                            len(self.kernels), fam.name, op, dtype, (t0, t1), w, slot,
                            fam.target, fam.tail_modes))
        payload = json.dumps({
            "format": CATALOG_FORMAT,
            "families": [[f.name, list(f.ops), list(f.dtypes), [list(t) for t in f.tiles],
                          sorted(int(m) for m in f.tail_modes), list(f.quanta), f.target, f.op_base,
                          [[d, [list(t) for t in ts]] for d, ts in f.dtype_tiles]]
                         for f in families]}, sort_keys=True)
        self.hash = hashlib.sha256(payload.encode()).hexdigest()[:16]

    def __len__(self):
        return len(self.kernels)

    def __getitem__(self, kid):
        return self.kernels[kid]

    @property
    def base(self):
        """(family, dtype) -> first kernel id, on the CPU target."""
        return {(f, d): b for (t, f, d), b in self._base.items() if t == "cpu"}

    def kernel_id(self, family, op, dtype, slot, target="cpu"):
        fam = self.by_target[target][family]
        return self._base[(target, family, dtype)] + fam.ops.index(op) * len(fam.tiles) + slot

    def family_base(self, family, dtype, target="cpu"):
        return self._base[(target, family, dtype)]

    def targets(self):
        return sorted(self.by_target)

    def on(self, target):
        """This catalog as seen by ``target``'s tables: ``families``, ``kernel_id`` and
        ``family_base`` of that target's kernels (ids stay global). A target without kernels
        of its own (a CPU-like target) sees the CPU's."""
        if target == "cpu" or target not in self.by_target:
            return self
        return TargetCatalog(self, target)

    def kernels_of(self, target):
        return [k for k in self.kernels if k.target == target]

    def describe(self):
        rows = [f"catalog {self.hash}: {len(self)} static kernels"]
        for f in (f for fams in self.by_target.values() for f in fams.values()):
            rows.append(f"  {f.name:8s} {f.target}: {len(f.ops)} ops x {len(f.dtypes)} dtypes x "
                        f"tiles {[t[:2] for t in f.tiles]}")
        return "\n".join(rows)


class TargetCatalog:
    """One target's view of the catalog (see :meth:`Catalog.on`)."""

    def __init__(self, catalog, target):
        self.catalog = catalog
        self.target = target
        self.hash = catalog.hash
        self.families = catalog.by_target[target]

    @property
    def base(self):
        return {(f, d): b for (t, f, d), b in self.catalog._base.items() if t == self.target}

    def on(self, target):
        return self.catalog.on(target)

    def kernel_id(self, family, op, dtype, slot):
        return self.catalog.kernel_id(family, op, dtype, slot, self.target)

    def family_base(self, family, dtype):
        return self.catalog.family_base(family, dtype, self.target)

    def __getitem__(self, kid):
        return self.catalog[kid]


def catalog_for(target):
    """The catalog view whose families a table of ``target`` uses: the target's own kernels
    where the catalog has them, else the CPU's (a CPU-like target reusing its kernels)."""
    return CATALOG.on(target)


def _build():
    from .abi.tiles import (CONV_TILES, ELEMENTWISE_TILES, MATMUL_SLOTS_F32 as SLOTS_F32,
                            MATMUL_SLOTS_F64 as SLOTS_F64, POOL_TILES, REDUCE_TILES,
                            ROWWISE_TILES)
    from .abi.storage import HALF_DTYPES
    from .abi.vocabulary import (BINARY_OPS, CONV_OPS, POOL_OPS, REDUCE_OPS, ROWWISE_OPS,
                                 UNARY_OPS)
    families = [
        FamilySpec("unary", UNARY_OPS, ("float32", "float64", "int32", "int64") + HALF_DTYPES,
                   ELEMENTWISE_TILES),
        FamilySpec("binary", BINARY_OPS, ("float32", "float64", "int32", "int64") + HALF_DTYPES,
                   ELEMENTWISE_TILES),
        FamilySpec("copy", ("copy",), ("uint8", "uint16", "uint32", "uint64"),
                   ELEMENTWISE_TILES, op_base=UNARY_OPS.index("copy")),
        # reductions and row-wise ops tile the kept dimensions; never OVERLAP (seed 004)
        FamilySpec("reduce", REDUCE_OPS, ("float32", "float64", "int32", "int64") + HALF_DTYPES,
                   REDUCE_TILES, tail_modes=frozenset({TailMode.VARIABLE_FULL})),
        FamilySpec("rowwise", ROWWISE_OPS, ("float32", "float64") + HALF_DTYPES, ROWWISE_TILES,
                   tail_modes=frozenset({TailMode.VARIABLE_FULL}), quanta=(1, 8)),
        # matmul micro-kernel slots: macro tile MC x NC per slot (K walked inside, in KC
        # blocks); tiles are clipped at the edges (VARIABLE tails), K is never overlapped
        FamilySpec("matmul", ("matmul",), ("float32", "float64") + HALF_DTYPES,
                   tuple((mc, nc, 0) for _, _, mc, nc, _ in SLOTS_F32),
                   tail_modes=frozenset({TailMode.VARIABLE_FULL}), quanta=(8, 16),
                   dtype_tiles=(("float32", tuple((mc, nc, 0) for _, _, mc, nc, _ in SLOTS_F32)),
                                ("float64", tuple((mc, nc, 0) for _, _, mc, nc, _ in SLOTS_F64)))),
        # pooling tiles the output plane; entries also hold the tiles' input offsets
        FamilySpec("pool", POOL_OPS, ("float32", "float64") + HALF_DTYPES, POOL_TILES,
                   tail_modes=frozenset({TailMode.VARIABLE_FULL}), quanta=(4, 16)),
        # conv2d: tiles of (output channels, output positions); entries hold the tiles'
        # input offsets; K = C/group*KH*KW is walked inside every kernel call
        FamilySpec("conv", CONV_OPS, ("float32", "float64") + HALF_DTYPES, CONV_TILES,
                   tail_modes=frozenset({TailMode.VARIABLE_FULL}), quanta=(1, 1)),
    ]
    return Catalog(families + _cuda_families())


#: the CUDA target's families (dynshape_kernels.cuda has a driver for each)
CUDA_FAMILIES = ("unary", "binary", "copy", "reduce", "rowwise", "matmul", "pool", "conv")


def _cuda_families():
    """The CUDA target's static kernels: the CPU families' ops and dtypes (half precision
    included, ``cuda.half``) on GPU tile sets. Tails are bounds (VARIABLE_FULL) or anchored
    full tiles (OVERLAP): no scratch tiles."""
    from .abi.cuda_tiles import (CUDA_CONV_TILES, CUDA_ELEMENTWISE_TILES, CUDA_MATMUL_TILES,
                                 CUDA_POOL_TILES, CUDA_REDUCE_TILES, CUDA_ROWWISE_TILES)
    from .abi.vocabulary import CONV_OPS, POOL_OPS
    from .abi.vocabulary import BINARY_OPS, REDUCE_OPS, ROWWISE_OPS, UNARY_OPS
    from .abi.storage import HALF_DTYPES
    modes = frozenset({TailMode.VARIABLE_FULL, TailMode.OVERLAP})
    variable = frozenset({TailMode.VARIABLE_FULL})
    num = ("float32", "float64", "int32", "int64") + HALF_DTYPES
    flt = ("float32", "float64") + HALF_DTYPES
    specs = {
        "unary": FamilySpec("unary", UNARY_OPS, num, CUDA_ELEMENTWISE_TILES, modes,
                            target="cuda"),
        "binary": FamilySpec("binary", BINARY_OPS, num, CUDA_ELEMENTWISE_TILES, modes,
                             target="cuda"),
        "copy": FamilySpec("copy", ("copy",), ("uint8", "uint16", "uint32", "uint64"),
                           CUDA_ELEMENTWISE_TILES, modes, target="cuda",
                           op_base=UNARY_OPS.index("copy")),
        "reduce": FamilySpec("reduce", REDUCE_OPS, num, CUDA_REDUCE_TILES, variable,
                             target="cuda"),
        "rowwise": FamilySpec("rowwise", ROWWISE_OPS, flt,
                              CUDA_ROWWISE_TILES, variable, quanta=(1, 8), target="cuda"),
        # output tiles of one block each; K walked inside in shared-memory blocks
        "matmul": FamilySpec("matmul", ("matmul",), flt, CUDA_MATMUL_TILES,
                             variable, quanta=(8, 16), target="cuda"),
        "pool": FamilySpec("pool", POOL_OPS, flt, CUDA_POOL_TILES, variable,
                           quanta=(4, 16), target="cuda"),
        "conv": FamilySpec("conv", CONV_OPS, flt, CUDA_CONV_TILES, variable,
                           quanta=(1, 1), target="cuda"),
    }
    return [specs[name] for name in CUDA_FAMILIES]


CATALOG = _build()
