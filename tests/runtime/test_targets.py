"""A second target plugs in through the public extension point: a target adapter (name,
drivers, array types) registered with ``dynshape.register_target``; every executor, the
table cache and the planners serve it unchanged, its tables are keyed by its name."""
import numpy as np
import pytest

import dynshape
from dynshape import testing
from dynshape_kernels.drivers import DriverSet


@pytest.fixture(scope="module")
def serial_target():
    """"cpu-serial": the CPU kernels compiled without parallel loops (in memory, once)."""
    return dynshape.register_target(dynshape.Target(
        "cpu-serial", DriverSet(parallel=False), (np.ndarray,),
        "the CPU kernels on the calling thread"))


def test_elementwise_family_runs_on_a_registered_target(serial_target):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((257, 1031)).astype(np.float32)
    b = rng.standard_normal(1031).astype(np.float32)
    assert "cpu-serial" in dynshape.known_targets()
    y = dynshape.run("relu", x, target="cpu-serial")
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    t = dynshape.last_table()
    assert t.target == "cpu-serial"
    z = dynshape.run("add", x.T, b[:, None], target="cpu-serial")
    np.testing.assert_array_equal(z, x.T + b[:, None])
    assert dynshape.last_table().target == "cpu-serial"
    # its drivers are the target's own, never the CPU target's
    assert ("unary", "float32") in serial_target.drivers.loaded()
    assert ("binary", "float32") in serial_target.drivers.loaded()


def test_target_tables_are_their_own(serial_target):
    x = np.ones((33, 70), np.float32)
    cpu = dynshape.explain("relu", x)
    ser = dynshape.explain("relu", x, target="cpu-serial")
    assert cpu is not ser and (cpu.target, ser.target) == ("cpu", "cpu-serial")
    testing.check_coverage(ser, (1, 33 * 70))


def test_new_shapes_on_the_target_compile_nothing(serial_target):
    dynshape.run("relu", np.ones(5, np.float32), target="cpu-serial")   # its driver, once
    with testing.count_compilations() as c:
        for n in (7, 1000, 33333, 100003):
            x = np.linspace(-1, 1, n, dtype=np.float32)
            np.testing.assert_array_equal(dynshape.run("relu", x, target="cpu-serial"),
                                          np.maximum(x, 0))
    assert c.count == 0


def test_unknown_target_is_refused():
    with pytest.raises(dynshape.SettingError, match="unknown target 'gpu9'.*cpu"):
        dynshape.run("relu", np.ones(3, np.float32), target="gpu9")
    with pytest.raises(dynshape.SettingError, match="Target"):
        dynshape.register_target("cpu-serial")
