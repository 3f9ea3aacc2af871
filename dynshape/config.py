"""Process-wide runtime state: the table cache, the table-building policy and counters.

policy: "background" (default; simplified table at once, optimized one built in a background
thread and swapped in), "simplified" (never optimize), "optimized" (optimize synchronously).
"""
from collections import Counter

from .table_cache import TableCache

cache = TableCache()
policy = "background"
counters = Counter()

POLICIES = ("background", "simplified", "optimized")


def set_policy(p):
    global policy
    if p not in POLICIES:
        raise ValueError(f"unknown table policy {p!r}; accepted: {', '.join(POLICIES)}")
    policy = p
