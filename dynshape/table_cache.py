"""Bucketed, bounded, thread-safe cache of parameter tables.

Key: (op, attributes that shape the table, dtype, target, layout class, bucket, overlap
allowed). Every shape of a bucket maps to the same key, so the number of tables grows with
the number of buckets, never with the number of distinct shapes; an LRU limit bounds it.
On a miss the caller stores a simplified table and may ask for the optimized one to be
built in the background; it replaces the cached table atomically when done (seed 004,
Fig. 16).
"""
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor


class TableCache:
    def __init__(self, max_tables=1024):
        self.max_tables = max_tables
        self._tables = OrderedDict()
        self._lock = threading.Lock()
        self._pending = {}
        self._pool = None
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.optimized_swaps = 0

    def get(self, key):
        with self._lock:
            t = self._tables.get(key)
            if t is None:
                self.misses += 1
                return None
            self._tables.move_to_end(key)
            self.hits += 1
            return t

    def put(self, key, table):
        with self._lock:
            self._tables[key] = table
            self._tables.move_to_end(key)
            while len(self._tables) > self.max_tables:
                self._tables.popitem(last=False)
                self.evictions += 1

    def optimize_later(self, key, build):
        """Build the optimized table in a background thread; swap it in if the key is cached."""
        with self._lock:
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
                if key in self._tables:
                    self._tables[key] = table
                    self.optimized_swaps += 1
            return table
        finally:
            with self._lock:
                self._pending.pop(key, None)

    def wait(self):
        """Block until every background optimization has finished."""
        while True:
            with self._lock:
                futs = list(self._pending.values())
            if not futs:
                return
            for f in futs:
                f.result()

    def clear(self):
        self.wait()
        with self._lock:
            self._tables.clear()
            self.hits = self.misses = self.evictions = self.optimized_swaps = 0

    def __len__(self):
        return len(self._tables)

    def keys(self):
        with self._lock:
            return list(self._tables)

    def stats(self):
        with self._lock:
            return {"tables": len(self._tables), "max_tables": self.max_tables,
                    "hits": self.hits, "misses": self.misses, "evictions": self.evictions,
                    "optimized_swaps": self.optimized_swaps, "pending": len(self._pending)}
