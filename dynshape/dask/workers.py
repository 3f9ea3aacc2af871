"""Kernel packages on a Dask cluster: ``install(client, package=PATH)``.

A :class:`KernelPlugin` (a ``distributed.WorkerPlugin``) is registered with the scheduler,
so every worker, including those started later or restarted after a failure, runs its
``setup`` before its first task:

* with a package: ``dynshape.load_package(PATH, ...)`` in the worker process. The trust
  travels with the plugin: the public keys trusted where ``install`` is called (its
  ``trusted_keys=``, else ``DYNSHAPE_TRUSTED_KEYS``, else the trust store and your own key)
  are given to every worker as ``trusted_keys``, so a worker accepts exactly the packages
  the client accepts. From then on the worker compiles nothing: a driver the package lacks
  raises ``PackageError`` (unless ``allow_compile``). A package built for another host,
  unsigned, or signed by an untrusted key is refused by the worker exactly as
  ``load_package`` refuses it: ``install`` raises that PackageError and unregisters the
  plugin.
* without a package: the worker logs that it compiles each driver once, on first use, into
  its Numba cache (shared by the workers of a machine when ``NUMBA_CACHE_DIR`` is), and
  with ``families=`` compiles or loads those drivers now (``dynshape.warm``).

The package path must be readable by every worker (a shared or copied directory).
"""
import logging
import os

from dynshape.extras import require

PLUGIN_NAME = "dynshape-kernels"
_log = logging.getLogger("distributed.worker")

_state = {"package": None, "note": None}


def _plugin_base():
    return require("distributed", "dynshape.dask.install").WorkerPlugin


class KernelPlugin(_plugin_base()):
    """Loads a kernel package (or warms drivers) in each worker process; see the module
    docstring. ``key_lines``: the trusted public keys as key lines."""

    name = PLUGIN_NAME

    def __init__(self, package=None, key_lines=(), allow_compile=False, allow_unsigned=False,
                 families=None, dtypes=None):
        self.package = None if package is None else os.path.abspath(os.fspath(package))
        self.key_lines = tuple(key_lines)
        self.allow_compile = bool(allow_compile)
        self.allow_unsigned = bool(allow_unsigned)
        self.families = None if families is None else tuple(families)
        self.dtypes = None if dtypes is None else tuple(dtypes)

    def setup(self, worker):
        import dynshape
        where = getattr(worker, "address", "worker")
        if self.package is not None:
            pkg = dynshape.load_package(self.package, allow_compile=self.allow_compile,
                                        trusted_keys=list(self.key_lines),
                                        allow_unsigned=self.allow_unsigned)
            _state["package"] = pkg
            _state["note"] = pkg.describe()
            _log.info("dynshape on %s: %s", where, pkg.describe())
            return
        from dynshape.warming import cache_location
        active = dynshape.packages.load.active_package()
        if active is not None:
            _state["note"] = f"uses the kernel package loaded before: {active.describe()}"
            _log.info("dynshape on %s: %s", where, _state["note"])
            return
        note = (f"no kernel package: this worker compiles each dynshape driver once, on first "
                f"use, unless {cache_location()} holds it")
        if self.families is not None:
            done = dynshape.warm(self.families, self.dtypes)
            n = sum(1 for d in done if d[3])
            note += f"; warmed {len(done)} drivers now ({n} compiled, {len(done) - n} loaded)"
        _state["note"] = note
        _log.warning("dynshape on %s: %s", where, note)


def install(client, package=None, *, trusted_keys=None, allow_compile=False,
            allow_unsigned=False, families=None, dtypes=None):
    """Make every worker of ``client``'s cluster load the kernel package at ``package``
    (or, without one, say that it compiles, and warm ``families``/``dtypes`` now).

    ``trusted_keys``: as for :func:`dynshape.load_package`; resolved HERE and handed to the
    workers. Returns :func:`worker_status` once every current worker has run the plugin.
    Raises the workers' PackageError (the plugin is then unregistered) when a worker
    refuses the package."""
    from dynshape.packages import signing
    if package is not None and not os.path.isdir(os.fspath(package)):
        from dynshape.packages.load import PackageError
        raise PackageError(f"kernel package {package}: not a directory (build one with "
                           f"`dynshape pregenerate ... --out DIR`)")
    keys, _ = signing.trusted_keys(trusted_keys)
    plugin = KernelPlugin(package, [k.line() for k in keys], allow_compile, allow_unsigned,
                          families, dtypes)
    try:
        client.register_plugin(plugin, name=PLUGIN_NAME)
    except BaseException:
        try:
            client.unregister_worker_plugin(PLUGIN_NAME)
        except Exception:               # noqa: BLE001 - the original error matters
            pass
        raise
    return worker_status(client)


def _status():
    from dynshape.packages.load import active_package
    pkg = active_package()
    return {"package": None if pkg is None else pkg.path,
            "active": bool(pkg is not None and pkg.active),
            "note": _state["note"], "pid": os.getpid()}


def worker_status(client):
    """Per worker address: the active package's path (or None), whether it is active, the
    plugin's note and the worker's process id."""
    return client.run(_status)
