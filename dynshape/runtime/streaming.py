"""When the CPU drivers write an output with streaming stores (``dynshape_kernels.cpu.streaming``).

An output at least ``stream_bytes()`` long is written with streaming stores by the commonest
ops whose loops wait on memory (relu, clip and copies; add, sub and mul: ``STREAM_UNARY``
and ``STREAM_BINARY`` in ``dynshape_kernels.cpu.switches``; exp, log, sigmoid, tanh, gelu
and silu: ``STREAM_MATH`` in ``dynshape_kernels.cpu.elementwise``; every binary op by one
value, ``x * 0.5`` or ``x ** 2.5`` (one value per row: over rows of at least
``STREAM_ROW_BYTES``), and two-array div, maximum and minimum (``STREAM_BUFFERED``),
computed a block at a time as the math ops are; the fused ``x op side, then relu`` as one
loop, and every other fused elementwise chain a block at a time, its last unary or
constant step streaming piece by piece beside the next block's prefetches; the last pass
of layer_norm, rms_norm and log_softmax over long rows): it skips reading each output line
before writing it, a third of the memory traffic. A smaller output is written normally,
so that it stays in cache for whatever reads it next. The same flag turns on the software
prefetches of transposed copies (a tile prefetches the next one's rows). The default is
the size of the machine's last-level cache (read from ``/sys/devices/system/cpu``), at
most ``MAX_DEFAULT_BYTES`` (32 MiB, also where the size is not readable); the environment
variable ``DYNSHAPE_STREAM_BYTES`` (a byte count, or ``off``) or :func:`set_stream_bytes`
change it.

Why at most 32 MiB: a larger last-level cache is shared by many cores, and a virtual
machine's few cores get a small part of it. A 2-vCPU guest on an Intel host reports
480 MiB; with that threshold nothing of the benchmarks' sizes streamed or prefetched there.
Same process, 2 threads, float32, threshold 480 MiB -> 32 MiB: a.T copy of 3187 x 9431
42-48 -> 13.0-13.7 ms, a.T + b 28.7-29.3 -> 21.1-21.2, relu over 3e7 elements 9.8-9.9 ->
8.1-8.2, add 12.6-12.9 -> 10.0-10.3, a bias row added to 400000 x 77 11.0-11.4 -> 8.2-8.3.
Where the cache is 32 MiB or smaller (the AMD hosts measured before) nothing changes.
"""
import functools
import glob
import os

import numpy as np
from dynshape_kernels.abi.common_area import S_STREAM, STORE_BLOCK

from dynshape.errors import SettingError

#: last-level cache size assumed where the machine does not say
DEFAULT_LLC_BYTES = 32 << 20
#: the largest default threshold, whatever the last-level cache (see the module's docstring)
MAX_DEFAULT_BYTES = 32 << 20
ENV = "DYNSHAPE_STREAM_BYTES"

_override = []


@functools.cache
def last_level_cache_bytes():
    """Size of this machine's largest CPU cache (bytes), or DEFAULT_LLC_BYTES; read once
    (globbing sysfs took 88 us, on every bind of a new call signature)."""
    best = 0
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
        digits = text[:-1] if scale != 1 else text
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return best or DEFAULT_LLC_BYTES


def _parse(value, where):
    if isinstance(value, str):
        if value.strip().lower() == "off":
            return None
        try:
            value = int(value.strip())
        except ValueError:
            raise SettingError(f"{where}: expected a byte count or 'off', got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SettingError(f"{where}: expected a byte count >= 0 or 'off', got {value!r}")
    return value


def _from_env():
    text = os.environ.get(ENV, "").strip()
    return _parse(text, ENV) if text else default_bytes()


def default_bytes():
    """The threshold when nothing sets one: the last-level cache's size, at most
    MAX_DEFAULT_BYTES."""
    return min(last_level_cache_bytes(), MAX_DEFAULT_BYTES)


def set_stream_bytes(value):
    """Outputs of at least ``value`` bytes stream; ``"off"``: none; ``None``: back to the
    default (the environment variable, else the last-level cache size). Tables are not
    affected: the choice is made per call (a replayed call keeps the choice it was recorded
    with until the table cache is cleared)."""
    _override[:] = [] if value is None else [_parse(value, "set_stream_bytes")]


def stream_bytes():
    """The output size (bytes) from which outputs stream, or None when none does."""
    if _override:
        return _override[0]
    return _from_env()


def streams(nbytes):
    """Whether an output of ``nbytes`` bytes is written with streaming stores."""
    limit = stream_bytes()
    return limit is not None and nbytes >= limit


def launch_streams(launch):
    """Whether a launch's drivers write its output with streaming stores (CPU targets only:
    the flag the fused executor binds into its control block, and :func:`store_block`
    into the plane and rowwise executors' common areas)."""
    return launch.target == "cpu" and streams(launch.out.nbytes)


def store_block(launch):
    """The store block the executor appends to a CPU launch's common area
    (``abi.common_area``); empty for the other targets, whose drivers have none."""
    if launch.target != "cpu":
        return np.zeros(0, dtype=np.int64)
    block = np.zeros(STORE_BLOCK, dtype=np.int64)
    block[S_STREAM] = launch_streams(launch)
    return block
