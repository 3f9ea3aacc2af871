"""One benchmark run: command-line options, peers, kernel warm-up, the printed report with
its header, timing defaults, and the JSON file.

    from bench.harness import environment
    if __name__ == "__main__":
        environment.prepare(bind=environment.wants_bind())
    ...
    ap = session.options(__doc__, "matmul.json")
    s = session.Session("dynshape matmul", ap.parse_args())
    s.start(families=["matmul"], dtypes=["float32"])    # warm-up, header printed
    stats = s.time({"dynshape": ..., "numpy": ...})        # alternating blocks
    s.print(...)
    s.finish({"cases": rows})                               # JSON with the header

The JSON file holds ``header`` (see :mod:`.header`, plus ``compilations_after_warmup``:
Numba compilations counted from the end of the warm-up to the end of the run, 0 when the
timings ran entirely on loaded kernels), ``config``, ``results`` and ``printed`` (the report
lines).
"""
import argparse
import json
import os
import sys
import time

from . import header, peers as peers_mod
from .timing import alternating

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")

# (blocks, block seconds) per mode; --quick only checks that a script runs end to end
BLOCKS = {"quick": (2, 0.01), "full": (7, 0.15)}


def options(doc, json_name):
    """An ArgumentParser with the options every benchmark takes."""
    ap = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0],
                                 epilog="See bench/README.md.")
    ap.add_argument("--quick", "--smoke", dest="quick", action="store_true",
                    help="tiny sizes and 2 short blocks: checks the script end to end "
                         "(its timings mean nothing)")
    ap.add_argument("--json", default=os.path.join(RESULTS, json_name),
                    help="where the results go (default: %(default)s)")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch and torch.compile")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--no-ort", action="store_true", help="skip ONNX Runtime")
    ap.add_argument("--no-bind", action="store_true",
                    help="do not bind OpenMP threads one per core (see bench/README.md)")
    return ap


class _CompileCounter:
    """Counts Numba compilations (Numba's documented event API) while installed."""

    def __init__(self):
        from numba.core import event

        class Listener(event.Listener):
            def on_start(s, ev):
                self.count += 1

            def on_end(s, ev):
                pass
        self.count = 0
        self._event = event
        self._listener = Listener()
        event.register("numba:compile", self._listener)

    def close(self):
        self._event.unregister("numba:compile", self._listener)


class Session:
    def __init__(self, title, args):
        self.title = title
        self.args = args
        self.quick = bool(getattr(args, "quick", False))
        self.blocks, self.block_s = BLOCKS["quick" if self.quick else "full"]
        self.lines = []
        self.info = None
        self.peers = None
        self._counter = None
        self.t0 = time.perf_counter()

    # ---- start ------------------------------------------------------------------------------
    def start(self, families=None, dtypes=None, warm=True):
        """Load the peers, load (or compile, saying so) dynshape's drivers for ``families``
        and ``dtypes`` (default all), then print the header."""
        a = self.args
        self.peers = peers_mod.load(torch=not getattr(a, "no_torch", False),
                                    ort=not getattr(a, "no_ort", False),
                                    compile=not getattr(a, "no_compile", False))
        done = None
        if warm:
            import dynshape
            self.log(f"loading dynshape drivers ({header.numba_cache()}); a driver missing "
                     "there is compiled now, one line each:")
            done = dynshape.warm(families, dtypes, progress=sys.stderr)
        self._counter = _CompileCounter()
        self.info = header.collect(self.peers, done)
        for line in header.lines(self.info, self.title + (" (quick)" if self.quick else "")):
            self.print(line)
        self.print()
        return self.peers

    # ---- timing and output ------------------------------------------------------------------
    def time(self, fns, first_s=None, blocks=None, block_s=None, **kw):
        """{name: Stat}: ``fns`` timed in alternating blocks with this mode's defaults."""
        return alternating(fns, self.blocks if blocks is None else blocks,
                           self.block_s if block_s is None else block_s, first_s=first_s, **kw)

    def print(self, s=""):
        print(s, flush=True)
        self.lines.append(s)

    @staticmethod
    def log(s):
        print(s, file=sys.stderr, flush=True)

    # ---- finish -----------------------------------------------------------------------------
    def finish(self, results, config=None):
        """Print the closing line (compilations during the run) and write the JSON file."""
        compiled = self._counter.count if self._counter else None
        if self._counter:
            self._counter.close()
        if self.info is not None:
            self.info["compilations_after_warmup"] = compiled
            self.info["loadavg_end"] = os.getloadavg()
        wall = time.perf_counter() - self.t0
        self.print()
        self.print(f"Numba compilations after the warm-up: {compiled} (0: every timing ran on "
                   f"loaded kernels; the benchmark's own helper loops count too); load average "
                   f"at the end {os.getloadavg()[0]:.2f}; wall time {wall:.0f} s")
        cfg = {k: v for k, v in vars(self.args).items() if k != "json"}
        cfg.update(blocks=self.blocks, block_s=self.block_s, **(config or {}))
        doc = {"header": self.info, "config": cfg, "results": results, "wall_s": wall,
               "printed": self.lines}
        path = self.args.json
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(doc, f, indent=1, default=str)
        self.log(f"wrote {path}")
        return doc
