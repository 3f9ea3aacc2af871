"""Per-host calibration of the cost model: measured where it runs, kept where it is found.

``dynshape calibrate`` measures this host's constants (:func:`measure`) and writes
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

import numpy as np

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


def apply():
    """Make the cost model use this host's calibration (or the defaults): at import of the
    API, after ``dynshape calibrate`` and when the table directory changes."""
    from dynshape.planning import cost_model
    cost_model.use(*load())


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


def measure(repeats=9):
    """Measure the constants by running the float32 unary driver on crafted tables.

    Each constant comes from a case where it dominates: empty entries (entry_ns), one-element
    rows (row_ns), long contiguous rows in cache (vec_ns), one-row entries that run together
    (run_entry_ns), a transposed copy walked by row tiles and by the square tile (gather_ns
    and line_ns), DISCARD tails (discard_ns, alloc_ns).
    """
    import time

    import numba
    from dynshape_kernels import drivers
    from dynshape_kernels.catalog import CATALOG
    from dynshape_kernels.abi.tail_mode import DISCARD
    from dynshape_kernels.abi.tiles import square_tile

    from dynshape.runtime.layout import plane
    from dynshape.tables.param_table import ParamTable

    threads = numba.get_num_threads()
    drv = drivers.get("unary", "float32")
    attrs = np.zeros(2, np.float32)

    def run(x, out, shape, strides, t0, t1, entries):
        t = ParamTable("unary", "relu", "float32", "cpu", CATALOG.hash, ((0, 1), (0, 1)),
                       entries, np.zeros(0), 2, CATALOG.family_base("unary", "float32"), 0,
                       "simplified", 0.0)
        p = plane(shape, strides)
        # as the executor binds it: normal stores, and the run block (rows in order or not)
        common = np.concatenate([t.bind(p, [0, 0]), [0, t.rows_in_order]])
        xb, ob = x.reshape(-1), out.reshape(-1)
        drv(xb, ob, common, t.entries, attrs)
        best = float("inf")
        for _ in range(repeats):
            s = time.perf_counter()
            drv(xb, ob, common, t.entries, attrs)
            best = min(best, time.perf_counter() - s)
        return best * 1e9 * threads          # ns of work summed over threads

    def grid(m, n, t0, t1, mode=2):
        kid = CATALOG.kernel_id("unary", "relu", "float32",
                                [k[:2] for k in CATALOG.families["unary"].tiles].index((t0, t1)))
        r = np.arange(0, m, t0)
        c = np.arange(0, n, t1)
        e = np.zeros((len(r) * len(c), 7), np.int64)
        e[:, 0] = kid
        e[:, 1] = e[:, 2] = mode
        e[:, 3] = np.repeat(r, len(c))
        e[:, 5] = np.tile(c, len(r))
        return e

    n = 1 << 18
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    o = np.empty_like(x)
    flat = [(1,), (1,)]
    e_long = grid(1, n, 1, 16384)
    vec = run(x, o, (n,), flat, 1, 16384, e_long) / n
    empty = grid(1, n, 1, 512)
    empty[:, 5] += 10 * n                       # every entry resolves to nothing
    entry = run(x, o, (n,), flat, 1, 512, empty) / len(empty)
    rows = x.reshape(-1, 1)[: 1 << 15]
    sq0, sq1 = square_tile(CATALOG.families["unary"].tiles)
    e_rows = grid(1 << 15, 1, sq0, sq1)
    row = max(run(rows, o[: 1 << 15].reshape(-1, 1), rows.shape, [(1, 1), (1, 1)], sq0, sq1,
                  e_rows) / (1 << 15) - vec - entry / sq0, 0.1)
    # one-row entries that continue each other (run together) against the square tile on
    # the same rows: 1 << 13 rows of 64 elements, every other 64 columns of an array (the
    # plane does not coalesce). The model prices a row of the first at run_entry + row +
    # 64 vec and one of the second at row + 64 vec + entry / sq0; the calibrated row
    # (one-element rows) leaves out what a vector row costs both, so the difference
    # measures run_entry.
    w, nr = 64, 1 << 13
    gapped = np.random.default_rng(3).standard_normal((nr, 2 * w)).astype(np.float32)
    gout = np.empty_like(gapped)
    gs = [(2 * w, 1), (2 * w, 1)]
    in_runs = run(gapped, gout, (nr, w), gs, 1, 512, grid(nr, w, 1, 512)) / nr
    in_squares = run(gapped, gout, (nr, w), gs, sq0, sq1, grid(nr, w, sq0, sq1)) / nr
    run_entry = max(in_runs - in_squares + entry / sq0, 0.1)
    a = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
    out = np.empty_like(a)
    tr = [(1, 1024), (1024, 1)]
    per_row_tiles = (run(a, out, a.shape, tr, 1, 512, grid(1024, 1024, 1, 512)) / a.size
                     - row / 512)
    per_square = run(a, out, a.shape, tr, sq0, sq1, grid(1024, 1024, sq0, sq1)) / a.size \
        - row / sq1 - entry / (sq0 * sq1)
    line_elems = 16
    # row tiles: gather + line; square tiles: gather + line / min(T0, line_elems)
    k = min(sq0, line_elems)
    line = max((per_row_tiles - per_square) * k / (k - 1), 0.0)
    gather = max(per_row_tiles - line, vec)
    # DISCARD: 1024 outer rows of 256 valid columns in a 1x512 tile (a half-valid tail each)
    base = np.random.default_rng(2).standard_normal((1024, 512)).astype(np.float32)
    xo = base[:, :256]
    oo = np.empty_like(base)[:, :256]
    d = run(base, oo.base, xo.shape, [(512, 1), (512, 1)], 1, 512, grid(1, 256, 1, 512, DISCARD))
    discard = max((d / 1024 - entry - 512 * vec - 60.0) / (2 * 256), 0.05)
    from dynshape.planning.cost_model import CostModel
    return CostModel(entry_ns=round(entry, 2), run_entry_ns=round(run_entry, 2),
                     row_ns=round(row, 2), vec_ns=round(vec, 4),
                     gather_ns=round(gather, 3), line_ns=round(line, 3),
                     line_elems=line_elems, discard_ns=round(discard, 3), alloc_ns=60.0,
                     expand_ns=round(2 * vec, 4),      # a write and a read of the tile
                     threads=threads)
