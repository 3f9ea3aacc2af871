"""Per-host calibration of the cost model: measured where it runs, kept where it is found.

``dynshape calibrate`` measures this host's constants (``cost_model.calibrate``) and writes
them to a file named after the host (CPU model, cores and Numba threads) in the table
directory (``<table dir>/calibration/``) when one is set, else in the configuration directory
(``DYNSHAPE_CONFIG_DIR`` or ``~/.config/dynshape``). At import, the cost model reads, in
order: ``DYNSHAPE_CALIBRATION`` (a file), the table directory's file for this host, the
configuration directory's; without any it uses its defaults, and ``explain`` says so.
"""
import hashlib
import json
import os
import platform
from dataclasses import asdict

ENV = "DYNSHAPE_CALIBRATION"
DEFAULTS = "defaults (no calibration for this host: run `dynshape calibrate`)"


def host_id():
    """A file-name-safe identity of what the constants depend on."""
    import numba
    cpu = _cpu_model()
    text = f"{cpu}|{os.cpu_count()}|{numba.config.NUMBA_NUM_THREADS}|{platform.machine()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def candidates():
    """The calibration files looked for, in order (existing or not)."""
    paths = []
    if os.environ.get(ENV):
        paths.append(os.path.abspath(os.environ[ENV]))
    from dynshape.runtime import config
    if config.table_dir():
        paths.append(os.path.join(config.table_dir(), "calibration", host_id() + ".json"))
    from dynshape.runtime.config import config_dir
    paths.append(os.path.join(config_dir(), "calibration", host_id() + ".json"))
    return paths


def load():
    """``(CostModel, source)``: the first calibration file found, else the defaults."""
    from dynshape.planning.cost_model import CostModel
    for path in candidates():
        if os.path.isfile(path):
            try:
                with open(path) as f:
                    data = json.load(f)
                fields = CostModel.__dataclass_fields__
                return CostModel(**{k: v for k, v in data["model"].items() if k in fields}), \
                    f"calibrated {data.get('measured', '?')} ({path})"
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return CostModel(), DEFAULTS


def save(model, path=None):
    """Write ``model`` for this host (default: the first writable place of
    :func:`candidates` after the environment variable); returns the path."""
    import time
    if path is None:
        from dynshape.runtime import config
        base = config.table_dir()
        if base is None:
            from dynshape.runtime.config import config_dir
            base = config_dir()
        path = os.path.join(base, "calibration", host_id() + ".json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"host": host_id(), "cpu": _cpu_model(),
                   "measured": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                   "model": asdict(model)}, f, indent=1)
    os.replace(tmp, path)
    return path
