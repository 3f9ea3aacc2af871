"""Test session set-up: a private Numba cache directory (compiled kernels are shared by all
tests of the session and by the subprocesses they start) and hypothesis profiles."""
import os
import tempfile

# the suite controls persistence and packages itself (tests that need them set them up)
for _var in ("DYNSHAPE_TABLE_DIR", "DYNSHAPE_PACKAGE", "DYNSHAPE_PACKAGE_ALLOW_COMPILE",
             "DYNSHAPE_PACKAGE_ALLOW_UNSIGNED", "DYNSHAPE_TRUSTED_KEYS", "DYNSHAPE_STREAM_BYTES"):
    os.environ.pop(_var, None)

# signing keys and the trust store of the session: never the user's configuration directory
os.environ["DYNSHAPE_CONFIG_DIR"] = tempfile.mkdtemp(prefix="dynshape-config-")

# CUDA kernels run on Numba's CUDA simulator unless the caller asks for the device
# (NUMBA_ENABLE_CUDASIM=0 pytest -m gpu on a GPU host); read when numba is first imported
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

if "NUMBA_CACHE_DIR" not in os.environ:
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="dynshape-numba-cache-")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.data_too_large,
                                                 HealthCheck.function_scoped_fixture])
settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True,
                          print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.data_too_large,
                                                 HealthCheck.function_scoped_fixture])
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session", autouse=True)
def _kernels():
    """Every driver of the catalog, compiled once per session into the private Numba cache by
    child processes in parallel (the compiler's memory leaves with them), then loaded here."""
    import dynshape
    dynshape.warm(processes=os.cpu_count() or 1)


@pytest.fixture(scope="module", autouse=True)
def _tables_per_module():
    """Tables cached by one test module are dropped after it (the suite's memory stays
    bounded by the largest module, not the sum of all)."""
    yield
    import dynshape
    dynshape.clear_cache()


@pytest.fixture(autouse=True)
def _deterministic_policy():
    """Tests build tables synchronously unless they ask for the background policy."""
    import dynshape
    dynshape.set_policy("optimized")
    yield
    dynshape.wait_optimized()
    dynshape.set_policy("optimized")


@pytest.fixture
def driver_calls(monkeypatch):
    """Counts calls of the compiled drivers themselves: every driver an executor fetches
    through ``drivers.get`` is wrapped, so the count is the number of times compiled driver
    code is entered (whatever the executors count themselves). The list only grows (tests
    compare lengths), so hypothesis tests may share it across their examples."""
    from dynshape_kernels import drivers
    calls = []
    real_get = drivers.get

    def counting_get(family, dtype):
        disp = real_get(family, dtype)

        def driver(*args):
            calls.append((family, dtype))
            return disp(*args)
        return driver
    monkeypatch.setattr(drivers, "get", counting_get)
    return calls


@pytest.fixture(scope="session")
def exported():
    """name -> ONNX bytes of the small real models (dynshape.testing.models, exported once
    per session): the graph-layer and partitioning tests."""
    pytest.importorskip("torch", reason="the real-model tests export models from PyTorch")
    import warnings
    from dynshape.testing.models import MODELS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: make() for name, make in MODELS.items()}
