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
    """All static kernels of a build. Lookup by id or by (family, op, dtype, slot)."""

    def __init__(self, families):
        self.families = {f.name: f for f in families}
        self.kernels = []
        self.base = {}
        for fam in families:
            for dtype in fam.dtypes:
                self.base[(fam.name, dtype)] = len(self.kernels)
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

    def kernel_id(self, family, op, dtype, slot):
        fam = self.families[family]
        return self.base[(family, dtype)] + fam.ops.index(op) * len(fam.tiles) + slot

    def family_base(self, family, dtype):
        return self.base[(family, dtype)]

    def describe(self):
        rows = [f"catalog {self.hash}: {len(self)} static kernels"]
        for f in self.families.values():
            rows.append(f"  {f.name:8s} {f.target}: {len(f.ops)} ops x {len(f.dtypes)} dtypes x "
                        f"tiles {[t[:2] for t in f.tiles]}")
        return "\n".join(rows)


def _build():
    from .abi.tiles import (CONV_TILES, ELEMENTWISE_TILES, MATMUL_SLOTS_F32 as SLOTS_F32,
                            MATMUL_SLOTS_F64 as SLOTS_F64, POOL_TILES, REDUCE_TILES,
                            ROWWISE_TILES)
    from .abi.vocabulary import (BINARY_OPS, CONV_OPS, POOL_OPS, REDUCE_OPS, ROWWISE_OPS,
                                 UNARY_OPS)
    families = [
        FamilySpec("unary", UNARY_OPS, ("float32", "float64", "int32", "int64"),
                   ELEMENTWISE_TILES),
        FamilySpec("binary", BINARY_OPS, ("float32", "float64", "int32", "int64"),
                   ELEMENTWISE_TILES),
        FamilySpec("copy", ("copy",), ("uint8", "uint16", "uint32", "uint64"),
                   ELEMENTWISE_TILES, op_base=UNARY_OPS.index("copy")),
        # reductions and row-wise ops tile the kept dimensions; never OVERLAP (seed 004)
        FamilySpec("reduce", REDUCE_OPS, ("float32", "float64", "int32", "int64"),
                   REDUCE_TILES, tail_modes=frozenset({TailMode.VARIABLE_FULL})),
        FamilySpec("rowwise", ROWWISE_OPS, ("float32", "float64"), ROWWISE_TILES,
                   tail_modes=frozenset({TailMode.VARIABLE_FULL}), quanta=(1, 8)),
        # matmul micro-kernel slots: macro tile MC x NC per slot (K walked inside, in KC
        # blocks); tiles are clipped at the edges (VARIABLE tails), K is never overlapped
        FamilySpec("matmul", ("matmul",), ("float32", "float64"),
                   tuple((mc, nc, 0) for _, _, mc, nc, _ in SLOTS_F32),
                   tail_modes=frozenset({TailMode.VARIABLE_FULL}), quanta=(8, 16),
                   dtype_tiles=(("float32", tuple((mc, nc, 0) for _, _, mc, nc, _ in SLOTS_F32)),
                                ("float64", tuple((mc, nc, 0) for _, _, mc, nc, _ in SLOTS_F64)))),
        # pooling tiles the output plane; entries also hold the tiles' input offsets
        FamilySpec("pool", POOL_OPS, ("float32", "float64"), POOL_TILES,
                   tail_modes=frozenset({TailMode.VARIABLE_FULL}), quanta=(4, 16)),
        # conv2d: tiles of (output channels, output positions); entries hold the tiles'
        # input offsets; K = C/group*KH*KW is walked inside every kernel call
        FamilySpec("conv", CONV_OPS, ("float32", "float64"), CONV_TILES,
                   tail_modes=frozenset({TailMode.VARIABLE_FULL}), quanta=(1, 1)),
    ]
    return Catalog(families)


CATALOG = _build()
