"""Numba cache entries of dynshape's compiled code are keyed by ALL of its kernel sources.

Numba stamps a cached function with the hash of its own source file only, so a change to a
constant imported from another module (the common-area layout, a tile table, a math
function) would keep serving machine code built with the old value. This locator stamps
every function defined in ``dynshape_kernels`` or ``dynshape`` with one hash over all their
``.py`` files instead: any source change invalidates every cached kernel, never just some.
It also locates the cache like Numba does (``NUMBA_CACHE_DIR`` or the ``__pycache__`` next to
the source).
"""
import functools
import hashlib
import os

from numba.core import caching, config

def _sources():
    import dynshape_kernels
    roots = [os.path.dirname(os.path.abspath(dynshape_kernels.__file__))]
    try:
        import importlib.util
        spec = importlib.util.find_spec("dynshape")
        if spec is not None and spec.origin:
            roots.append(os.path.dirname(os.path.abspath(spec.origin)))
    except (ImportError, ValueError):
        pass
    files = []
    for root in roots:
        for d, _, names in os.walk(root):
            files.extend(os.path.join(d, n) for n in names if n.endswith(".py"))
    return roots, sorted(files)


def _stamp(files):
    """Hash over the files' names and contents (memoized per path, mtime and size)."""
    key = []
    for path in files:
        st = os.stat(path)
        key.append((path, st.st_mtime_ns, st.st_size))
    return _stamp_of(tuple(key))


@functools.lru_cache(maxsize=None)
def _stamp_of(key):
    h = hashlib.sha256()
    for path, _, _ in key:
        h.update(path.rsplit(os.sep, 2)[-1].encode())
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def source_hash():
    """Hash of every kernel and runtime source file: the stamp of all cached kernels."""
    return _stamp(tuple(_sources()[1]))


class KernelSourceLocator(caching._CacheLocator):
    """Cache locator for functions defined in dynshape's own packages."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        if config.CACHE_DIR:
            self._cache_path = os.path.join(config.CACHE_DIR,
                                            self.get_suitable_cache_subpath(py_file))
        else:
            self._cache_path = os.path.join(os.path.dirname(py_file), "__pycache__")

    def get_cache_path(self):
        return self._cache_path

    def get_source_stamp(self):
        return source_hash()

    def get_disambiguator(self):
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func, py_file):
        path = os.path.abspath(py_file)
        roots, _ = _sources()
        if not os.path.exists(path) or not any(path.startswith(r + os.sep) for r in roots):
            return None
        self = cls(py_func, py_file)
        try:
            self.ensure_cache_path()
        except OSError:
            return None
        return self


def install():
    classes = caching.CacheImpl._locator_classes
    if KernelSourceLocator not in classes:
        classes.insert(0, KernelSourceLocator)
