"""ParamTable: a combination as data (seed 004): a common area plus one entry per kernel call.

The entries are valid for every shape of the table's bucket; ``bind`` produces the common
area of one call (sizes, outer shape, per-operand offsets and strides). Tables are plain
int64 NumPy arrays with a format version and the catalog hash, saved to and loaded from
``.npz`` files with a SHA-256 checksum; the same arrays feed every driver.
"""
import hashlib
import json
import math
import os
import tempfile

import numpy as np
from dynshape_kernels.abi.common_area import (C_IDBASE, C_M, C_N, C_NDOUTER, C_NOUTER, C_OPBASE,
                                          C_OPS, C_OSHAPE, E_ANCH0, E_ANCH1, E_KID, E_MODE0,
                                          E_MODE1, E_NCOL, E_OFF0, E_OFF1, MAX_OUTER, OP_BLOCK,
                                          common_size)
from dynshape_kernels.abi.tail_mode import ANCHOR_END, ANCHOR_START, TailMode

from dynshape.errors import TableFormatError

TABLE_VERSION = 1
#: family -> ParamTable subclass for families whose entries carry extra columns (e.g. pool's
#: input offsets); ``ParamTable.load`` builds and validates tables of that class
TABLE_CLASSES = {}


def call_lines(table):
    """Lines for ``describe`` about the call an explained table answered: the recorded
    call (``table.call``, set by ``explain`` from the layer above) describes itself; none
    for a table that records no call."""
    call = getattr(table, "call", None)
    return call.lines(table) if call is not None else []


class ParamTable:
    """A parameter table for one (op, dtype, target, layout class, bucket).

    ``entries``: int64 (E, 7) per kernel call on the inner plane; ``bucket``: ((lo, hi) rows,
    (lo, hi) columns), the sizes the entries serve; ``common``: the common area bound for the
    shape the table was built for (see dynshape_kernels.abi.common_area).
    """

    def __init__(self, family, op, dtype, target, catalog_hash, bucket, entries, common,
                 n_operands, id_base, op_base, variant, cost, description="", shape=None,
                 meta=None):
        self.family = family
        self.op = op
        self.dtype = dtype
        self.target = target
        self.catalog_hash = catalog_hash
        self.bucket = tuple(tuple(int(v) for v in b) for b in bucket)
        self.entries = np.ascontiguousarray(entries, dtype=np.int64)
        self.entries.flags.writeable = False
        self.common = np.ascontiguousarray(common, dtype=np.int64)
        self.common.flags.writeable = False
        self.n_operands = int(n_operands)
        self.id_base = int(id_base)
        self.op_base = int(op_base)
        self.variant = variant
        self._cost = cost
        self.description = description
        self.shape = tuple(shape) if shape is not None else None
        #: family-specific values the table was built with (JSON-able; saved in the header)
        self.meta = dict(meta) if meta else {}

    def __len__(self):
        return len(self.entries)

    @property
    def rows_in_order(self):
        """Whether entry i is the tile at row offset i from the start, every entry with entry
        0's kernel, tail modes and columns: one-row tiles then continue each other row by
        row, which the CPU drivers take from the run block (``abi.common_area``) instead of
        comparing entry after entry. Computed from the entries on first use (never read
        from a file); the entries are read-only."""
        flag = getattr(self, "_rows_in_order", None)
        if flag is None:
            e = self.entries
            same = (E_KID, E_MODE0, E_MODE1, E_OFF1, E_ANCH1)
            flag = bool(len(e) > 0 and (e[:, same] == e[0, same]).all()
                        and (e[:, E_ANCH0] == ANCHOR_START).all()
                        and (e[:, E_OFF0] == np.arange(len(e))).all())
            self._rows_in_order = flag
        return flag

    @property
    def cost(self):
        """Model cost (ns) at the shape the table was built for (computed on first use)."""
        if callable(self._cost):
            self._cost = self._cost()
        return float(self._cost)

    @cost.setter
    def cost(self, value):
        self._cost = value

    def serves(self, m, n):
        (lo0, hi0), (lo1, hi1) = self.bucket
        return lo0 < m <= hi0 and lo1 < n <= hi1

    def bind(self, plane, offsets):
        """Common area of one call: the plane's sizes and each operand's offset and strides."""
        return bind_common(plane, offsets, self.n_operands, self.id_base, self.op_base)

    # ---- description -------------------------------------------------------------------
    def resolved(self, m, n, catalog):
        """Per entry: (kernel id, row offset, valid rows, column offset, valid columns)."""
        e = self.entries
        t = np.array([catalog[int(k)].tile for k in e[:, E_KID]], dtype=np.int64).reshape(-1, 2)
        out = []
        for d, (size, col_off, col_anch) in enumerate(((m, E_OFF0, E_ANCH0),
                                                      (n, E_OFF1, E_ANCH1))):
            o = np.where(e[:, col_anch] == ANCHOR_END, size - e[:, col_off], e[:, col_off])
            bad = (o < 0) | (o >= size)
            v = np.where(bad, 0, np.minimum(t[:, d], size - o))
            out.append((np.where(bad, 0, o), v))
        (o0, v0), (o1, v1) = out
        return np.stack([e[:, E_KID], o0, v0, o1, v1], axis=1)

    def describe(self, catalog=None, limit=12):
        from dynshape_kernels.catalog import CATALOG
        catalog = catalog or CATALOG
        (lo0, hi0), (lo1, hi1) = self.bucket
        lines = [f"ParamTable v{TABLE_VERSION} {self.op} {self.dtype} {self.target} "
                 f"({self.variant}, catalog {self.catalog_hash})",
                 f"  bucket: rows {lo0 + 1}..{hi0}, columns {lo1 + 1}..{hi1}"
                 + (f"; built for plane {self.shape[0]}x{self.shape[1]}" if self.shape else ""),
                 f"  {len(self)} entries, model cost {self.cost / 1e3:.2f} us: {self.description}",
                 f"  cost model: {self.meta.get('cost_model', 'not recorded')}"]
        lines += call_lines(self)
        tiles = {}
        for k in self.entries[:, E_KID]:
            tiles[catalog[int(k)].tile] = tiles.get(catalog[int(k)].tile, 0) + 1
        lines.append("  kernels: " + ", ".join(f"{n} x {t[0]}x{t[1]}" for t, n in
                                                sorted(tiles.items())))
        lines.append("  entry: kernel id, tile, row off/anchor/mode, col off/anchor/mode")
        for row in self.entries[:limit]:
            k = catalog[int(row[E_KID])]
            lines.append(f"    {int(row[E_KID]):5d} {k.tile[0]:>3}x{k.tile[1]:<5} "
                         f"{_fmt(row[E_OFF0], row[E_ANCH0], row[E_MODE0])} "
                         f"{_fmt(row[E_OFF1], row[E_ANCH1], row[E_MODE1])}")
        if len(self) > limit:
            lines.append(f"    ... {len(self) - limit} more")
        return "\n".join(lines)

    def __str__(self):
        return self.describe()     # a subclass's own describe

    # ---- persistence -------------------------------------------------------------------
    def header(self):
        return {"version": TABLE_VERSION, "family": self.family, "op": self.op,
                "dtype": self.dtype, "target": self.target, "catalog": self.catalog_hash,
                "bucket": self.bucket, "n_operands": self.n_operands, "id_base": self.id_base,
                "op_base": self.op_base, "variant": self.variant, "cost": self.cost,
                "description": self.description, "shape": self.shape, "meta": self.meta}

    def save(self, path):
        """Write atomically (temporary file, then rename) with a checksum."""
        head = json.dumps(self.header(), sort_keys=True).encode()
        digest = _digest(head, self.entries, self.common)
        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, header=np.frombuffer(head, dtype=np.uint8), entries=self.entries,
                         common=self.common, checksum=np.frombuffer(digest, dtype=np.uint8))
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return path

    @classmethod
    def load(cls, path, catalog=None):
        """Read, verify checksum and version, and validate against the catalog."""
        from dynshape_kernels.catalog import CATALOG
        catalog = catalog or CATALOG
        try:
            with np.load(path, allow_pickle=False) as z:
                head = z["header"].tobytes()
                entries = z["entries"]
                common = z["common"]
                digest = z["checksum"].tobytes()
        except (OSError, ValueError, KeyError, EOFError) as exc:
            raise TableFormatError(f"{path}: not a readable parameter-table file ({exc})") from None
        except Exception as exc:  # zipfile.BadZipFile and friends
            raise TableFormatError(f"{path}: corrupt parameter-table file ({exc})") from None
        if _digest(head, entries, common) != digest:
            raise TableFormatError(f"{path}: checksum mismatch, the file is corrupt")
        h = json.loads(head)
        if h.get("version") != TABLE_VERSION:
            raise TableFormatError(f"{path}: table format version {h.get('version')}, "
                                   f"this dynshape reads version {TABLE_VERSION}")
        if h["catalog"] != catalog.hash:
            raise TableFormatError(f"{path}: built for kernel catalog {h['catalog']}, "
                                   f"the loaded catalog is {catalog.hash}")
        if cls is ParamTable:      # a family with its own entry columns validates them
            cls = TABLE_CLASSES.get(h["family"], ParamTable)
        t = cls(h["family"], h["op"], h["dtype"], h["target"], h["catalog"], h["bucket"],
                entries, common, h["n_operands"], h["id_base"], h["op_base"], h["variant"],
                h["cost"], h.get("description", ""), h.get("shape"), h.get("meta"))
        t.validate(catalog)
        return t

    def validate(self, catalog):
        """Refuse entries a driver could not interpret (ids outside the family, bad modes)."""
        if hasattr(catalog, "on"):
            catalog = catalog.on(self.target)         # the table's target's kernels
        e = self.entries
        if e.ndim != 2 or e.shape[1] != E_NCOL:
            raise TableFormatError(f"entries must have shape (E, {E_NCOL}), got {e.shape}")
        fam = catalog.families.get(self.family)
        if fam is None or (self.family, self.dtype) not in catalog.base:
            raise TableFormatError(f"no {self.family} kernels for {self.dtype} in the catalog")
        base = catalog.family_base(self.family, self.dtype)
        hi = base + len(fam.ops) * len(fam.tiles)
        if base != self.id_base:
            raise TableFormatError("id base does not match the catalog")
        if len(e) and (e[:, E_KID].min() < base or e[:, E_KID].max() >= hi):
            raise TableFormatError(f"kernel ids outside {base}..{hi - 1} of {self.family}/"
                                   f"{self.dtype}")
        modes = e[:, [E_MODE0, E_MODE1]]
        if len(e) and (modes.min() < 0 or modes.max() > max(TailMode)):
            raise TableFormatError("unknown tail mode in entries")
        if len(e) and not np.isin(e[:, [E_ANCH0, E_ANCH1]], (0, 1)).all():
            raise TableFormatError("anchors must be 0 (start) or 1 (end)")
        if len(e) and e[:, [E_OFF0, E_OFF1]].min() < 0:
            raise TableFormatError("negative offsets in entries")


def bind_common(plane, offsets, n_operands, id_base=0, op_base=0):
    """The common area (``abi.common_area``) of one call on ``plane``: sizes, outer shape and
    per operand its element offset and strides."""
    nd = len(plane.outer)
    c = np.zeros(common_size(n_operands), dtype=np.int64)
    c[C_IDBASE] = id_base
    c[C_OPBASE] = op_base
    c[C_NOUTER] = math.prod(plane.outer)
    c[C_NDOUTER] = nd
    c[C_OSHAPE:C_OSHAPE + MAX_OUTER] = 1
    c[C_OSHAPE:C_OSHAPE + nd] = plane.outer
    c[C_M] = plane.m
    c[C_N] = plane.n
    for k, (off, st) in enumerate(zip(offsets, plane.strides)):
        b = C_OPS + k * OP_BLOCK
        c[b] = off
        c[b + 1:b + 1 + nd] = st[:nd]
        c[b + 1 + MAX_OUTER] = st[-2]
        c[b + 2 + MAX_OUTER] = st[-1]
    return c


def _digest(head, entries, common):
    h = hashlib.sha256(head)
    h.update(np.ascontiguousarray(entries, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(common, dtype=np.int64).tobytes())
    return h.digest()


def _fmt(off, anchor, mode):
    where = f"end-{int(off)}" if anchor == ANCHOR_END else f"{int(off)}"
    return f"{where:>9}/{TailMode(int(mode)).name.lower():<16}"
