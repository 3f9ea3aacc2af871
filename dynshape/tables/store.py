"""TableStore: parameter tables persisted on disk, one file per cache key (seed 004, Fig. 4).

Layout: ``<root>/<catalog hash>/<stable key hash>.npz``, each file in the format of
``param_tables/README.md``. The file name is the SHA-256 of a canonical text of the cache key
(:func:`stable_key`), the same in every process and on every machine, so a table built and
saved by one process is found by any later one using the same kernel catalog.

Contracts:

* ``save`` is atomic (``ParamTable.save``: temporary file in the same directory, then
  ``os.replace``): a concurrent reader sees the old file, the new one or none, never a part.
* ``load`` is strict: it returns the table, None when there is no file, or raises
  :class:`TableFormatError` for a file that is unreadable, corrupt, of another format version
  or catalog, or that does not describe the table the caller expects. The table cache turns
  that error into a :class:`TableStoreWarning` and rebuilds; it never uses such a table.
"""
import dataclasses
import hashlib
import json
import math
import os
import warnings
from enum import Enum

import numpy as np
from dynshape_kernels.catalog import CATALOG

from dynshape.errors import ArgumentError, TableFormatError
from dynshape.tables.param_table import TABLE_VERSION, ParamTable

KEY_PREFIX = f"dynshape-table-key-v{TABLE_VERSION}:"


class TableStoreWarning(UserWarning):
    """A table file was ignored (and the table rebuilt), or a table could not be saved."""


class UnstableKeyError(TypeError):
    """A cache key holds a value without a canonical, process-independent text."""


def canonical(obj):
    """Canonical text of a cache key: equal keys give equal texts in every process; values of
    different types (1, 1.0, True, "1") give different texts. Accepts None, bool, int, float,
    str, bytes, enums, NumPy scalars and dtypes, tuples, lists, sets, frozensets and dicts
    of those; raises :class:`UnstableKeyError` for anything else."""
    if obj is None:
        return "N"
    if isinstance(obj, (bool, np.bool_)):
        return "T" if obj else "F"
    if isinstance(obj, Enum):
        return f"E{type(obj).__name__}.{obj.name}"
    if isinstance(obj, (int, np.integer)):
        return f"i{int(obj)}"
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return "fnan" if math.isnan(v) else f"f{v.hex()}"
    if isinstance(obj, str):
        return "s" + json.dumps(obj)
    if isinstance(obj, bytes):
        return "b" + obj.hex()
    if isinstance(obj, np.dtype):
        return "d" + obj.str
    if isinstance(obj, (tuple, list)):
        return "(" + ",".join(canonical(v) for v in obj) + ")"
    if isinstance(obj, (set, frozenset)):
        return "{" + ",".join(sorted(canonical(v) for v in obj)) + "}"
    if isinstance(obj, dict):
        items = sorted((canonical(k), canonical(v)) for k, v in obj.items())
        return "<" + ",".join(f"{k}:{v}" for k, v in items) + ">"
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return type(obj).__name__ + canonical(fields)
    err = UnstableKeyError(f"cache key part {obj!r} of type {type(obj).__name__} has no stable "
                           f"text; accepted: None, bool, int, float, str, bytes, enums, NumPy "
                           f"scalars and dtypes, and tuples, lists, sets and dicts of them")
    err.type_name = type(obj).__name__
    raise err


def stable_key(key):
    """The file stem of ``key``: SHA-256 (hex) of the table format version and its canonical
    text."""
    return hashlib.sha256((KEY_PREFIX + canonical(key)).encode()).hexdigest()


def check_dir(path):
    """The absolute table directory for ``path`` (str or os.PathLike; need not exist yet)."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise ArgumentError(f"a table directory is a str or os.PathLike path or None, got "
                            f"{type(path).__name__}") from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not path:
        raise ArgumentError("the table directory must not be empty (use None for no "
                            "persistence)")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ArgumentError(f"table directory {path!r} exists and is not a directory")
    return os.path.abspath(path)


_unstable_warned = set()


class TableStore:
    """Persisted tables of one kernel catalog under ``root`` (see the module docstring)."""

    def __init__(self, root, catalog=None):
        self.root = check_dir(root)
        self.catalog = catalog or CATALOG

    def __repr__(self):
        return f"TableStore({self.root!r})"

    @property
    def directory(self):
        """Where this catalog's tables live: ``<root>/<catalog hash>``."""
        return os.path.join(self.root, self.catalog.hash)

    def path_for(self, key):
        """File of ``key``, or None (with a one-time warning per type) when the key has no
        stable text and so cannot be persisted."""
        try:
            return os.path.join(self.directory, stable_key(key) + ".npz")
        except UnstableKeyError as exc:
            if exc.type_name not in _unstable_warned:
                _unstable_warned.add(exc.type_name)
                warnings.warn(f"table not persisted: {exc}", TableStoreWarning, stacklevel=3)
            return None

    def has(self, key):
        path = self.path_for(key)
        return path is not None and os.path.exists(path)

    def load(self, key, expect=None):
        """The table saved for ``key``; None if there is none. ``expect``: attribute values
        the table must have (e.g. family, op, dtype, target, bucket, n_operands).

        Raises TableFormatError when the file exists but must not be used."""
        path = self.path_for(key)
        if path is None or not os.path.exists(path):
            return None
        try:
            table = ParamTable.load(path, self.catalog)
        except TableFormatError:
            if not os.path.exists(path):   # replaced or removed while we read it
                return None
            raise
        if expect:
            for name, want in expect.items():
                have = getattr(table, name, None)
                if name == "bucket":
                    want = tuple(tuple(int(v) for v in b) for b in want)
                if have != want:
                    raise TableFormatError(f"{path}: table has {name}={have!r}, the cache key "
                                           f"needs {want!r}")
        return table

    def save(self, key, table):
        """Write ``table`` for ``key`` atomically; returns the path (None for a key that
        cannot be persisted). Raises OSError when the directory is not writable."""
        path = self.path_for(key)
        if path is None:
            return None
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return table.save(path)
