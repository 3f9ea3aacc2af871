"""Numba cache entries of dynshape's compiled code are keyed by their module's source AND
every dynshape module it imports, transitively.

Numba stamps a cached function with the hash of its own source file only, so a change to a
constant imported from another module (the common-area layout, a tile table, a math
function) would keep serving machine code built with the old value. This locator stamps a
function defined in ``dynshape_kernels`` or ``dynshape`` with a hash over its own file and
the closure of the package modules that file imports (found by parsing its imports): any
change to code a kernel can see invalidates it; a change elsewhere (another family) does not.
It also locates the cache like Numba does (``NUMBA_CACHE_DIR`` or the ``__pycache__`` next to
the source).
"""
import ast
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
    """Hash of every kernel and runtime source file (the package's identity)."""
    return _stamp(tuple(_sources()[1]))


_PACKAGES = {"dynshape_kernels": 0, "dynshape": 1}


def _module_file(roots, pkg_index, parts):
    """The .py file of module ``parts`` (relative to root ``pkg_index``), or None."""
    base = os.path.join(roots[pkg_index], *parts)
    for cand in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(cand):
            return cand
    return None


def _imports(path, roots):
    """Package files that ``path`` imports directly (relative and absolute forms)."""
    root_i = max((i for i, r in enumerate(roots) if path.startswith(r + os.sep)),
                 key=lambda i: len(roots[i]))
    rel = os.path.relpath(path, roots[root_i]).split(os.sep)
    pkg_parts = rel[:-1]           # package of the module (list of names below the root)
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), path)
    found = set()

    def add(idx, parts, names=()):
        if idx >= len(roots):
            return
        plain = False        # a name that is not a submodule comes from the module itself
        for n in names:      # "from .pkg import module"
            g = _module_file(roots, idx, parts + [n])
            if g:
                found.add(g)
            else:
                plain = True
        f = _module_file(roots, idx, parts)
        if f and (plain or not names):
            found.add(f)

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
            if node.level:
                up = pkg_parts[:len(pkg_parts) - (node.level - 1)] if node.level > 1 else pkg_parts
                mod = node.module.split(".") if node.module else []
                add(root_i, list(up) + mod, names)
            elif node.module:
                head, *rest = node.module.split(".")
                if head in _PACKAGES:
                    add(_PACKAGES[head], rest, names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                head, *rest = a.name.split(".")
                if head in _PACKAGES:
                    add(_PACKAGES[head], rest)
    return found


def module_closure(path):
    """``path`` and every package file it imports, transitively (sorted)."""
    roots, _ = _sources()
    seen = set()
    todo = [os.path.abspath(path)]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            todo.extend(_imports(p, roots) - seen)
        except (OSError, SyntaxError, ValueError):
            pass
    return sorted(seen)


@functools.lru_cache(maxsize=None)
def _closure_of(path, key):
    return tuple(module_closure(path))


def module_hash(path):
    """The stamp of functions defined in ``path``: hash of its import closure."""
    roots, files = _sources()
    return _stamp(_closure_of(os.path.abspath(path), _stamp(tuple(files))))


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
        return module_hash(self._py_file)

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
