"""Bucketed, bounded, thread-safe cache of parameter tables, optionally backed by a TableStore.

Key: (op, attributes that shape the table, dtype, target, layout class, bucket, overlap
allowed) or any other hashable, canonical key a family chooses. Every shape of a bucket maps
to the same key, so the number of tables grows with the number of buckets, never with the
number of distinct shapes; an LRU limit bounds it.

:meth:`TableCache.get_or_build` is the one lookup every family uses. On a miss, per policy
(``config.POLICIES``):

* ``background``: the table saved on disk if there is one, else the simplified table at once
  while a background thread builds the optimized one and swaps it in atomically (seed 004,
  Fig. 16); the optimized table is then saved.
* ``optimized``: the saved table, else the optimized table built now (and saved).
* ``simplified``: the simplified table built now; the disk is neither read nor written.
* ``warmup`` (internal, ``dynshape.warmup``): like ``optimized``, and a cached simplified table
  is replaced by the optimized one; the table is saved if it is not on disk yet (Fig. 4,
  fixed-shape scenario).

Only optimized ParamTables are written to disk (other table objects are cached, never saved).
A file that must not be used (corrupt, another catalog or format version, another table) is
ignored with a :class:`TableStoreWarning` and the table rebuilt and saved over it.

Counters: hits, misses, evictions, optimized_swaps, tables_built (every run of the
combination algorithm), tables_loaded, tables_saved, tables_rejected (files ignored),
save_errors.
"""
import threading
import warnings
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

from dynshape.errors import TableFormatError
from dynshape.tables.param_table import ParamTable
from dynshape.tables.store import TableStoreWarning

_DISK_POLICIES = ("background", "optimized", "warmup")
_COUNTERS = ("hits", "misses", "evictions", "optimized_swaps", "tables_built", "tables_loaded",
             "tables_saved", "tables_rejected", "save_errors")


def _variant(table):
    """A table's variant; objects without one (tables of families with a single combination
    algorithm) count as final, i.e. "optimized"."""
    return getattr(table, "variant", "optimized")


class TableCache:
    def __init__(self, max_tables=1024, store=None):
        self.max_tables = max_tables
        self.store = store              # a TableStore, or None: no persistence
        self._tables = OrderedDict()
        self._lock = threading.Lock()
        self._pending = {}
        self._pool = None
        self._local = threading.local()
        self._clear_hooks = []
        # bumped whenever a cached table leaves the cache or is replaced (eviction, swap,
        # clear): a memo holding tables checks it instead of looking its key up again
        self.epoch = 0
        for name in _COUNTERS:
            setattr(self, name, 0)

    # ---- plain access ------------------------------------------------------------------
    def get(self, key, count_miss=True):
        """The cached table of ``key`` (a hit), or None (a miss). A memo in front of the
        cache passes ``count_miss=False``: its caller then looks the key up again, and that
        lookup counts the one miss of the call."""
        with self._lock:
            t = self._tables.get(key)
            if t is None:
                if count_miss:
                    self.misses += 1
                return None
            self._tables.move_to_end(key)
            self.hits += 1
        self._local.table = t
        return t

    def put(self, key, table):
        with self._lock:
            self._insert(key, table)

    def _insert(self, key, table):
        if self._tables.get(key, table) is not table:
            self.epoch += 1
        self._tables[key] = table
        self._tables.move_to_end(key)
        while len(self._tables) > self.max_tables:
            self._tables.popitem(last=False)
            self.evictions += 1
            self.epoch += 1

    def last_table(self):
        """The table most recently handed out in the calling thread (by ``get`` or
        ``get_or_build``, i.e. by a run or explain), or None."""
        return getattr(self._local, "table", None)

    # ---- the lookup ----------------------------------------------------------------------
    def get_or_build(self, key, build, policy=None, expect=None):
        """The table of ``key``: cached, else loaded from the store, else built.

        ``build(variant)`` returns a new ParamTable for ``variant`` "simplified" or
        "optimized"; ``policy``: the policy in force (the executor passes
        ``config.current_policy()``; default "background"); ``expect``: attribute
        values a table loaded from disk must have (see ``TableStore.load``). Safe to call from
        several threads: concurrent misses of one key end with one cached table."""
        if policy is None:
            policy = "background"
        table = self.get(key)
        if table is not None:
            if policy == "warmup":
                table = self._warm_cached(key, table, build)
                self._local.table = table
            return table
        table = None
        if self.store is not None and policy in _DISK_POLICIES:
            table = self._load(key, expect)
        built = table is None
        if built:
            table = build("simplified" if policy in ("background", "simplified")
                          else "optimized")
        with self._lock:
            if built:
                self.tables_built += 1
            else:
                self.tables_loaded += 1
            cached = self._tables.get(key)
            if cached is not None and (_variant(cached) == "optimized"
                                       or _variant(table) != "optimized"):
                table, built = cached, False       # another thread stored it first: share it
            else:
                self._insert(key, table)
            if policy == "background" and _variant(table) != "optimized":
                self._schedule(key, lambda: build("optimized"))
        if built and _variant(table) == "optimized":
            self._save(key, table)
        self._local.table = table
        return table

    def _warm_cached(self, key, table, build):
        """Warm-up of a cached key: optimized in memory and saved on disk."""
        with self._lock:
            fut = self._pending.get(key)
        if fut is not None:
            fut.result()
            with self._lock:
                table = self._tables.get(key, table)
        if _variant(table) != "optimized":
            table = build("optimized")
            with self._lock:
                self.tables_built += 1
                self._insert(key, table)
            self._save(key, table)
        elif self.store is not None and isinstance(table, ParamTable) \
                and not self.store.has(key):
            self._save(key, table)
        return table

    def _load(self, key, expect):
        try:
            return self.store.load(key, expect)
        except (TableFormatError, OSError) as exc:
            with self._lock:
                self.tables_rejected += 1
            warnings.warn(f"ignored a saved parameter table, building it again: {exc}",
                          TableStoreWarning, stacklevel=4)
            return None

    def _save(self, key, table):
        if self.store is None or not isinstance(table, ParamTable):
            return
        try:
            path = self.store.save(key, table)
        except OSError as exc:
            with self._lock:
                self.save_errors += 1
            warnings.warn(f"could not save a parameter table in {self.store.directory}: {exc}",
                          TableStoreWarning, stacklevel=4)
            return
        if path is not None:
            with self._lock:
                self.tables_saved += 1

    # ---- background optimization ----------------------------------------------------------
    def optimize_later(self, key, build):
        """Build the optimized table (``build()``) in a background thread; swap it in if the
        key is still cached, and save it. Returns the future (one per key at a time)."""
        with self._lock:
            return self._schedule(key, build)

    def _schedule(self, key, build):
        if key in self._pending:
            return self._pending[key]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="dynshape-optimize")
        fut = self._pool.submit(self._optimize, key, build)
        self._pending[key] = fut
        return fut

    def _optimize(self, key, build):
        try:
            table = build()
            with self._lock:
                self.tables_built += 1
                if key in self._tables:
                    self._tables[key] = table
                    self.optimized_swaps += 1
                    self.epoch += 1
            self._save(key, table)
            return table
        finally:
            with self._lock:
                self._pending.pop(key, None)

    def wait(self):
        """Block until every background optimization has finished (swapped in and saved)."""
        while True:
            with self._lock:
                futs = list(self._pending.values())
            if not futs:
                return
            for f in futs:
                f.result()

    # ---- housekeeping ---------------------------------------------------------------------
    def on_clear(self, hook):
        """Call ``hook()`` on every :meth:`clear` (memos in front of the cache register here,
        so that clearing the cache clears them too)."""
        self._clear_hooks.append(hook)

    def clear(self):
        """Drop every cached table and every memo in front of the cache, and reset the
        counters (files on disk stay)."""
        self.wait()
        with self._lock:
            self._tables.clear()
            self.epoch += 1
            for hook in self._clear_hooks:
                hook()
            for name in _COUNTERS:
                setattr(self, name, 0)

    def __len__(self):
        return len(self._tables)

    def keys(self):
        with self._lock:
            return list(self._tables)

    def stats(self):
        with self._lock:
            s = {"tables": len(self._tables), "max_tables": self.max_tables}
            s.update((name, getattr(self, name)) for name in _COUNTERS)
            s["pending"] = len(self._pending)
            return s

