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

While a kernel package is active (:func:`use_package_dir`), a function whose cache index the
package holds is located in the package instead, under a package-relative subpath
(:func:`package_subpath`, e.g. ``dynshape_kernels/cpu``) rather than Numba's hash of the
absolute source directory, so a package stays valid wherever the sources and the package are
installed. Package directories are only read, never written.
"""
import ast
import contextlib
import functools
import hashlib
import os
import re
import sys
import threading

from numba.core import caching, config

_listing = {}       # roots -> (directory mtimes, sorted .py files): rescanned when one changes


def _sources():
    """``(roots, files)``: the package roots and every .py file below them (sorted)."""
    import dynshape_kernels
    roots = [os.path.dirname(os.path.abspath(dynshape_kernels.__file__))]
    try:
        import importlib.util
        spec = importlib.util.find_spec("dynshape")
        if spec is not None and spec.origin:
            roots.append(os.path.dirname(os.path.abspath(spec.origin)))
    except (ImportError, ValueError):
        pass
    memo = _listing.get(tuple(roots))
    try:
        if memo is not None and all(os.stat(d).st_mtime_ns == m for d, m in memo[0]):
            return roots, list(memo[1])
    except OSError:
        pass
    files, dirs = [], []
    for root in roots:
        for d, _, names in os.walk(root):
            dirs.append((d, os.stat(d).st_mtime_ns))
            files.extend(os.path.join(d, n) for n in names if n.endswith(".py"))
    _listing[tuple(roots)] = (tuple(dirs), tuple(sorted(files)))
    return roots, sorted(files)


def _files_key(files):
    return tuple((path, st.st_mtime_ns, st.st_size) for path, st in
                 ((p, os.stat(p)) for p in files))


def _stamp(files):
    """Hash over the files' names and contents (memoized per path, mtime and size)."""
    return _stamp_of(_files_key(files))


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


# an import statement at the start of a line: "import a", "from .x import (a,\n b)", "... \\\n"
_IMPORT = re.compile(rb"^[ \t]*((?:from[ \t]+[\w.]+[ \t]+)?import[ \t]+"
                     rb"(?:\([^)]*\)|(?:[^\n\\]|\\\n)*))", re.M)


def _import_nodes(source, path):
    """The import statements of ``source``: only the lines that look like one are parsed
    (a full parse of every module cost most of the import time); a statement-looking line
    inside a string can only add a file to the closure, never lose one."""
    stmts = [m.group(1) for m in _IMPORT.finditer(source)]
    try:
        trees = [ast.parse(b"\n".join(stmts), path)]      # one parse when all are clean
    except SyntaxError:
        trees = []
        for stmt in stmts:
            try:
                trees.append(ast.parse(stmt, path))
            except SyntaxError:
                continue
    for tree in trees:
        yield from (n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)))


def _imports(path, roots):
    """Package files that ``path`` imports directly (relative and absolute forms)."""
    root_i = max((i for i, r in enumerate(roots) if path.startswith(r + os.sep)),
                 key=lambda i: len(roots[i]))
    rel = os.path.relpath(path, roots[root_i]).split(os.sep)
    pkg_parts = rel[:-1]           # package of the module (list of names below the root)
    with open(path, "rb") as f:
        source = f.read()
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

    for node in _import_nodes(source, path):
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
    found.discard(path)
    return found


def module_closure(path):
    """``path`` and every package file it imports, transitively (sorted)."""
    roots, files = _sources()
    return list(_closure_of(os.path.abspath(path), tuple(roots), _files_key(files)))


@functools.lru_cache(maxsize=None)
def _imports_of(path, roots, key):
    """``_imports`` memoized while no source file changes (``key``: all files' stats)."""
    return frozenset(_imports(path, list(roots)))


@functools.lru_cache(maxsize=None)
def _closure_of(path, roots, key):
    seen = set()
    todo = [path]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            todo.extend(_imports_of(p, roots, key) - seen)
        except (OSError, SyntaxError, ValueError):
            pass
    return tuple(sorted(seen))


def module_hash(path):
    """The stamp of functions defined in ``path``: hash of its import closure."""
    roots, files = _sources()
    return _stamp(_closure_of(os.path.abspath(path), tuple(roots), _files_key(files)))


# ---------------------------------------------------------------- kernel packages

_package_dir = None             # cache root of the active kernel package, or None
_local = threading.local()      # .bypass: locate new dispatchers outside the package


def use_package_dir(path):
    """Locate cached functions in the package cache root ``path`` first (None: stop)."""
    global _package_dir
    _package_dir = None if path is None else os.path.abspath(path)


@contextlib.contextmanager
def bypass_package():
    """Dispatchers created inside this block (in this thread) ignore the active package."""
    before = getattr(_local, "bypass", False)
    _local.bypass = True
    try:
        yield
    finally:
        _local.bypass = before


def package_subpath(py_file):
    """Relocatable cache subpath of a package source file: its import package and the
    directories below it, e.g. ``dynshape_kernels/cpu`` for ``<anywhere>/cpu/elementwise.py``
    of ``dynshape_kernels``. None for a file outside dynshape's packages."""
    path = os.path.abspath(py_file)
    roots, _ = _sources()
    inside = [i for i, r in enumerate(roots) if path.startswith(r + os.sep)]
    if not inside:
        return None
    i = max(inside, key=lambda i: len(roots[i]))
    name = [n for n, j in _PACKAGES.items() if j == i][0]
    rel = os.path.relpath(os.path.dirname(path), roots[i])
    return name if rel == os.curdir else "/".join([name] + rel.split(os.sep))


def source_relpath(py_file):
    """``package_subpath`` plus the file name: ``dynshape_kernels/cpu/elementwise.py``."""
    sub = package_subpath(py_file)
    return None if sub is None else f"{sub}/{os.path.basename(py_file)}"


def source_path(relpath):
    """This installation's file for a ``source_relpath`` (it may not exist)."""
    name, *rest = relpath.split("/")
    if name not in _PACKAGES or not rest or ".." in rest:
        raise ValueError(f"not a dynshape source path: {relpath!r}")
    roots, _ = _sources()
    return os.path.join(roots[_PACKAGES[name]], *rest)


def index_name(py_func, py_file):
    """File name of the Numba cache index of ``py_func`` (as ``numba.core.caching`` names it:
    ``<module file stem>.<qualname>-<first line>.py<major><minor><abiflags>.nbi``)."""
    modname = os.path.splitext(os.path.basename(py_file))[0]
    fullname = f"{modname}.{py_func.__qualname__}".replace("<", "").replace(">", "")
    return "%s-%s.py%d%d%s.nbi" % (fullname, py_func.__code__.co_firstlineno,
                                   sys.version_info[0], sys.version_info[1],
                                   getattr(sys, "abiflags", ""))


def _package_path(py_func, py_file):
    """The package directory holding ``py_func``'s cache index, or None."""
    root = _package_dir
    if root is None or getattr(_local, "bypass", False):
        return None
    sub = package_subpath(py_file)
    if sub is None:
        return None
    path = os.path.join(root, *sub.split("/"))
    return path if os.path.isfile(os.path.join(path, index_name(py_func, py_file))) else None


class KernelSourceLocator(caching._CacheLocator):
    """Cache locator for functions defined in dynshape's own packages."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._in_package = False
        pkg = _package_path(py_func, py_file)
        if pkg is not None:
            self._cache_path = pkg
            self._in_package = True
        elif config.CACHE_DIR:
            self._cache_path = os.path.join(config.CACHE_DIR,
                                            self.get_suitable_cache_subpath(py_file))
        else:
            self._cache_path = os.path.join(os.path.dirname(py_file), "__pycache__")

    @property
    def in_package(self):
        """True when this function's compiled code is read from the active kernel package."""
        return self._in_package

    def ensure_cache_path(self):
        if not self._in_package:          # a package may be read-only: never write there
            super().ensure_cache_path()

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
