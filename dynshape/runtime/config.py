"""Process-wide runtime state: the table cache, its table directory and the policy.

policy: "background" (default; simplified table at once, optimized one built in a background
thread and swapped in), "simplified" (never optimize), "optimized" (optimize synchronously).
``policy_scope`` overrides it for the calling thread (``dynshape.warmup`` uses the internal
policy "warmup"); families read the policy in force with ``current_policy()``.

Table directory: ``set_table_dir(path)``, initially the environment variable
``DYNSHAPE_TABLE_DIR`` (unset or empty: None, no persistence). Tables live in
``<dir>/<catalog hash>/<stable key hash>.npz`` (see ``table_store``).
"""
import contextlib
import contextvars
import os
import warnings

from dynshape.errors import ArgumentError, SettingError
from dynshape.tables.cache import TableCache
from dynshape.tables.store import TableStore, TableStoreWarning

POLICIES = ("background", "simplified", "optimized")
_INTERNAL_POLICIES = POLICIES + ("warmup",)



def _store_from_env():
    path = os.environ.get("DYNSHAPE_TABLE_DIR")
    if not path:
        return None
    try:
        return TableStore(path)
    except ArgumentError as exc:
        warnings.warn(f"DYNSHAPE_TABLE_DIR ignored, tables are not persisted: {exc}",
                      TableStoreWarning, stacklevel=2)
        return None


cache = TableCache(store=_store_from_env())
policy = "background"

_policy_override = contextvars.ContextVar("dynshape_policy", default=None)


def set_policy(p):
    global policy
    if p not in POLICIES:
        raise SettingError(f"unknown table policy {p!r}; accepted: {', '.join(POLICIES)}")
    policy = p


def current_policy():
    """The policy in force for the calling thread: its ``policy_scope`` or the global one."""
    return _policy_override.get() or policy


def warming():
    """Whether the calling thread is inside a "warmup" scope (then every call looks its
    table up, so that optimized tables are built and saved: no memo, no replay)."""
    return _policy_override.get() == "warmup"


@contextlib.contextmanager
def policy_scope(p):
    """Use policy ``p`` for lookups made by the calling thread inside the block."""
    if p not in _INTERNAL_POLICIES:
        raise SettingError(f"unknown table policy {p!r}; accepted: {', '.join(POLICIES)}")
    token = _policy_override.set(p)
    try:
        yield
    finally:
        _policy_override.reset(token)


def config_dir():
    """The user's configuration directory (keys, trust store, calibrations; not created
    here): ``DYNSHAPE_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/dynshape``, else
    ``~/.config/dynshape``."""
    path = os.environ.get("DYNSHAPE_CONFIG_DIR")
    if not path:
        base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"),
                                                                   ".config")
        path = os.path.join(base, "dynshape")
    return os.path.abspath(path)


def set_table_dir(path):
    """Persist tables under ``path`` (created when the first table is saved); None: don't."""
    cache.store = None if path is None else TableStore(path)


def table_dir():
    """The table directory in use (absolute), or None."""
    return cache.store.root if cache.store is not None else None


_thread_count = []


def num_threads():
    """``numba.get_num_threads()`` of the calling thread, without its per-call start-up check
    (a tenth of the cost: it runs on every call of the thread-count-keyed families)."""
    if not _thread_count:
        import numba
        numba.get_num_threads()                 # starts the threading layer once
        from numba.np.ufunc import parallel
        fast = getattr(parallel, "_get_num_threads", None)
        _thread_count.append(fast if callable(fast) else numba.get_num_threads)
    return _thread_count[0]()
