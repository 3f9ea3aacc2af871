"""Cached kernels are keyed by every kernel/runtime source file, not only their own."""
import shutil

from dynshape_kernels import cache_locator, drivers


def test_drivers_use_the_kernel_source_locator():
    d = drivers.get("copy", "uint8")
    loc = d._cache._impl._locator
    assert isinstance(loc, cache_locator.KernelSourceLocator)
    assert loc.get_source_stamp() == cache_locator.source_hash()


def test_a_change_in_any_source_changes_the_stamp(tmp_path):
    _, files = cache_locator._sources()
    layout = [f for f in files if f.endswith("common_area.py")][0]
    copies = []
    for f in files:
        dst = tmp_path / f.replace("/", "_")
        shutil.copy(f, dst)
        copies.append(str(dst))
    before = cache_locator._stamp(tuple(copies))
    i = files.index(layout)
    with open(copies[i], "a") as fh:
        fh.write("\nC_EXTRA = 1\n")
    assert cache_locator._stamp(tuple(copies)) != before
