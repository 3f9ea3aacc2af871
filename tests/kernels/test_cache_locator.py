"""Cached kernels are keyed by their module and every package module it imports."""
import shutil

from dynshape_kernels import cache_locator, drivers
from dynshape_kernels.cpu import elementwise


def test_drivers_use_the_kernel_source_locator():
    d = drivers.get("copy", "uint8")
    loc = d._cache._impl._locator
    assert isinstance(loc, cache_locator.KernelSourceLocator)
    assert loc.get_source_stamp() == cache_locator.module_hash(elementwise.__file__)


def test_the_stamp_covers_the_import_closure_and_nothing_else():
    from dynshape_kernels.cpu import elementwise
    names = {f.rsplit("/", 1)[-1] for f in cache_locator.module_closure(elementwise.__file__)}
    # constants and functions the elementwise drivers compile in
    assert {"elementwise.py", "common_area.py", "mathfuncs.py", "scalar_ops.py",
            "tiles.py", "tail_mode.py"} <= names
    assert "gemm.py" not in names and "reduce.py" not in names


def test_a_change_in_an_imported_module_changes_the_stamp(tmp_path):
    pkg = tmp_path / "dynshape_kernels"
    (pkg / "cpu").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cpu" / "__init__.py").write_text("")
    (pkg / "layout.py").write_text("C_A = 1\n")
    (pkg / "cpu" / "k.py").write_text("from ..layout import C_A\n")
    (pkg / "cpu" / "other.py").write_text("X = 1\n")
    roots = [str(pkg), str(tmp_path / "none")]
    got = cache_locator._imports(str(pkg / "cpu" / "k.py"), roots)
    assert got == {str(pkg / "layout.py")}


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
