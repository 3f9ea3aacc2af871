"""The exact-layout memo in front of the table cache.

A repeated call with the same op, dtype, target, shapes and strides skips geometry, bucketing
and binding: the memo maps that exact layout to the table's key and the bound call arguments
(the common area). The table itself still comes from the cache, so eviction, the background
swap of optimized tables and ``clear_cache`` act on memoized calls too; clearing the cache
clears the memo. Bounded: emptied when full.
"""
import threading

MAX_ENTRIES = 4096


class Memo:
    def __init__(self, cache, max_entries=MAX_ENTRIES):
        self.cache = cache
        self.max_entries = max_entries
        self._entries = {}
        self._lock = threading.Lock()
        cache.on_clear(self.clear)

    def get(self, sig):
        """(table, bound, key) memoized for this exact layout, or (None, None, None). A hit
        touches the cache (recency, hit count); a miss counts nothing: the lookup that
        follows does."""
        hit = self._entries.get(sig)
        if hit is None:
            return None, None, None
        table = self.cache.get(hit[0], count_miss=False)
        return (table, hit[1], hit[0]) if table is not None else (None, None, None)

    def put(self, sig, key, bound):
        with self._lock:
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[sig] = (key, bound)

    def clear(self):
        with self._lock:
            self._entries.clear()

    def __len__(self):
        return len(self._entries)
