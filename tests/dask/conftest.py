"""One 2-process LocalCluster for the dask tests, started once and closed after the last of
them (the rest of the suite does not keep its worker processes).

The workers are spawned with this session's environment, so they share its warm Numba
cache (NUMBA_CACHE_DIR) and configuration directory. ``client`` also installs a small kernel
package (built once with ``dynshape pregenerate`` for the families these tests use, signed
with the session's key), so every task runs packaged drivers and nothing can compile there.
"""
import logging
import os
import subprocess
import sys

import pytest

FAMILIES = ("unary", "binary", "reduce", "rowwise", "matmul", "conv", "pool", "fused")
DTYPES = ("float32", "float64", "int32", "int64")


_open = []          # (client, cluster) while the cluster runs


def _close():
    while _open:
        client, lc = _open.pop()
        client.close(timeout=30)
        lc.close(timeout=60)


@pytest.fixture(scope="session")
def cluster():
    import dask
    from distributed import Client, LocalCluster
    dask.config.set({"distributed.scheduler.allowed-failures": 5})
    lc = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR, memory_limit="4GB")
    client = Client(lc, timeout=120)
    _open.append((client, lc))
    try:
        client.wait_for_workers(2, timeout=120)
        yield client
    finally:
        _close()


@pytest.fixture(autouse=True)
def _close_after_the_last_dask_test(request):
    """The cluster's worker processes leave with the last test of this directory, not at
    the end of the whole suite."""
    yield
    here = os.path.dirname(__file__)
    mine = [i for i in request.session.items if str(i.path).startswith(here + os.sep)]
    if mine and request.node is mine[-1]:
        _close()


@pytest.fixture(scope="session")
def kernel_package(tmp_path_factory):
    out = tmp_path_factory.mktemp("dask-pkg") / "kernels"
    cmd = [sys.executable, "-m", "dynshape", "pregenerate", "--out", str(out)]
    for f in FAMILIES:
        cmd += ["--family", f]
    for d in DTYPES:
        cmd += ["--dtype", d]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def client(cluster, kernel_package):
    """The cluster's client with the kernel package installed on every worker."""
    import dynshape.dask as dd
    status = dd.install(cluster, package=kernel_package)
    assert len(status) == 2 and all(s["active"] for s in status.values()), status
    return cluster
