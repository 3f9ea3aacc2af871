"""The cost model is calibrated where it runs: ``dynshape calibrate`` writes a per-host file,
the planners price tables with it, ``explain`` says which model priced a table, and a kernel
package carries its compile host's calibration to hosts that have none."""
import json
from types import SimpleNamespace

import numpy as np
import pytest

import dynshape
from dynshape.cli import main
from dynshape.packages.load import _use_packaged_cost_model
from dynshape.planning import calibration, cost_model


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """An empty configuration directory and no table directory; the defaults afterwards."""
    monkeypatch.setenv("DYNSHAPE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv(calibration.ENV, raising=False)
    dynshape.set_table_dir(None)
    calibration.apply()
    yield tmp_path
    monkeypatch.undo()
    dynshape.set_table_dir(None)
    calibration.apply()


def _model(**kw):
    return cost_model.CostModel(**dict({"entry_ns": 123.0, "vec_ns": 0.5}, **kw))


def test_without_a_calibration_the_defaults_are_used_and_said(isolated):
    assert cost_model.SOURCE == calibration.DEFAULTS
    assert cost_model.MODEL == cost_model.CostModel()
    dynshape.clear_cache()
    text = dynshape.explain("relu", (517, 1531)).describe()
    assert "cost model: defaults (no calibration for this host: run `dynshape calibrate`)" \
        in text


def test_a_saved_calibration_is_found_for_this_host(isolated):
    path = calibration.save(_model())
    assert path.endswith(calibration.host_id() + ".json")
    assert path.startswith(str(isolated / "config" / "calibration"))
    calibration.apply()
    assert cost_model.MODEL.entry_ns == 123.0 and path in cost_model.SOURCE
    dynshape.clear_cache()
    t = dynshape.explain("relu", (311, 977))
    assert t.meta["cost_model"] == cost_model.SOURCE


def test_the_table_directory_and_the_environment_come_first(isolated):
    calibration.save(_model(entry_ns=1.0))
    tables = isolated / "tables"
    calibration.save(_model(entry_ns=2.0), str(tables / "calibration" /
                                              (calibration.host_id() + ".json")))
    dynshape.set_table_dir(tables)
    assert cost_model.MODEL.entry_ns == 2.0
    explicit = isolated / "mine.json"
    calibration.save(_model(entry_ns=3.0), str(explicit))
    import os
    os.environ[calibration.ENV] = str(explicit)
    try:
        calibration.apply()
        assert cost_model.MODEL.entry_ns == 3.0
    finally:
        del os.environ[calibration.ENV]


def test_a_corrupt_calibration_is_skipped(isolated):
    path = calibration.save(_model())
    with open(path, "w") as f:
        f.write("{not json")
    calibration.apply()
    assert cost_model.SOURCE == calibration.DEFAULTS


def test_a_package_brings_its_hosts_calibration_to_a_host_without_one(isolated):
    from dataclasses import asdict
    pkg = SimpleNamespace(path="/pkg", manifest={"cost_model": {
        "source": "calibrated on the build host", "model": asdict(_model(entry_ns=7.0))}})
    _use_packaged_cost_model(pkg)
    assert cost_model.MODEL.entry_ns == 7.0 and "/pkg" in cost_model.SOURCE
    calibration.save(_model(entry_ns=9.0))            # this host has its own: it wins
    calibration.apply()
    _use_packaged_cost_model(pkg)
    assert cost_model.MODEL.entry_ns == 9.0


def test_the_calibrate_command_measures_and_writes(isolated, capsys):
    out = isolated / "cal.json"
    assert main(["calibrate", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    m = data["model"]
    assert data["host"] == calibration.host_id()
    assert all(np.isfinite(v) and v >= 0 for v in m.values()) and m["vec_ns"] > 0
    assert f"calibration written to {out}" in capsys.readouterr().out
