"""ParamTable as data: save/load with checksum, validation, describe, and driving kernels."""
import copy

import numpy as np
import pytest

import dynshape
from dynshape import ParamTable, TableFormatError


def _table(shape=(37, 1001)):
    """A copy of the cached table (tests that alter a table must not alter the cache's)."""
    return copy.copy(dynshape.explain("relu", shape))


def test_roundtrip_and_the_loaded_table_runs(tmp_path):
    t = _table()
    p = t.save(tmp_path / "t.npz")
    u = ParamTable.load(p)
    assert np.array_equal(t.entries, u.entries) and u.bucket == t.bucket
    assert u.header() == t.header()
    from dynshape_kernels import drivers
    from dynshape.runtime.layout import plane
    x = np.random.default_rng(0).standard_normal((37, 1001)).astype(np.float32)
    out = np.empty_like(x)
    common = u.bind(plane(x.shape, [(1001, 1), (1001, 1)]), [0, 0])
    drivers.get("unary", "float32")(x.reshape(-1), out.reshape(-1), common, u.entries,
                                    np.zeros(2, np.float32))
    np.testing.assert_array_equal(out, np.maximum(x, 0))


def test_describe_is_readable():
    text = _table().describe()
    assert "relu float32 cpu" in text and "bucket: rows" in text and "entries" in text


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "empty"])
def test_corrupt_files_are_refused(tmp_path, damage):
    p = _table().save(tmp_path / "t.npz")
    data = bytearray(open(p, "rb").read())
    if damage == "flip":
        i = data.find(b"entries") + 200
        data[i] ^= 0xFF
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "garbage":
        data = bytearray(b"not a table" * 10)
    else:
        data = bytearray()
    open(p, "wb").write(bytes(data))
    with pytest.raises(TableFormatError):
        ParamTable.load(p)


def test_tables_from_another_catalog_or_version_are_refused(tmp_path):
    t = _table()
    t.catalog_hash = "0" * 16
    p = t.save(tmp_path / "t.npz")
    with pytest.raises(TableFormatError, match="catalog"):
        ParamTable.load(p)


@pytest.mark.parametrize("column,value", [(0, 10**6), (1, 9), (4, 3), (3, -5)])
def test_bad_entries_are_refused(tmp_path, column, value):
    t = _table()
    e = t.entries.copy()
    e[0, column] = value
    t.entries = e
    p = t.save(tmp_path / "t.npz")
    with pytest.raises(TableFormatError):
        ParamTable.load(p)


def test_save_is_atomic(tmp_path, monkeypatch):
    """While a table is being written, the file at the destination is still the complete old
    table; a write that fails leaves the old table and no temporary file behind."""
    old, new = _table(), _table((3, 70001))
    assert not np.array_equal(old.entries, new.entries)
    p = tmp_path / "t.npz"
    old.save(p)
    real_savez = np.savez
    during = []

    def failing_savez(f, **arrays):
        real_savez(f, **arrays)
        f.flush()
        during.append(ParamTable.load(p))
        raise OSError("disk full")
    monkeypatch.setattr(np, "savez", failing_savez)
    with pytest.raises(OSError, match="disk full"):
        new.save(p)
    monkeypatch.undo()
    assert np.array_equal(during[0].entries, old.entries)
    assert np.array_equal(ParamTable.load(p).entries, old.entries)
    assert [f.name for f in tmp_path.iterdir()] == ["t.npz"]
    new.save(p)
    assert np.array_equal(ParamTable.load(p).entries, new.entries)
    assert [f.name for f in tmp_path.iterdir()] == ["t.npz"]
