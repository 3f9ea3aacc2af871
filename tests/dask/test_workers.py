"""The worker plugin: every worker loads the kernel package (trust passed along), compiles
nothing for never-seen chunk shapes, survives a worker killed mid-compute, refuses a
package for another host or an untrusted signer, and says so when it has no package."""
import json
import os
import shutil
import signal
import time

import numpy as np
import pytest

import dynshape
from dynshape import testing
from dynshape.packages import build as pregenerate
from dynshape.packages import manifest as package
from dynshape.packages.signing import PublicKey

da = pytest.importorskip("dask.array")
import dynshape.dask as dd  # noqa: E402


def test_workers_compile_nothing_for_never_seen_chunk_shapes(client):
    status = dd.worker_status(client)
    assert all(s["active"] and s["package"] for s in status.values()), status
    client.run(testing.start_counting)
    rng = np.random.default_rng(11)
    xn = rng.standard_normal((211, 97)).astype(np.float32)
    x = da.from_array(xn, chunks=((13, 101, 97), (41, 29, 27)))       # shapes new here
    wn = rng.standard_normal((97, 23)).astype(np.float32)
    im = da.from_array(rng.standard_normal((2, 3, 29, 31)).astype(np.float32),
                       chunks=(1, 3, (12, 17), (9, 22)))
    results = dd.run("sum", dd.fuse([("add", 1.0), "gelu"])(x), axis=0), \
        dd.run("argmax", x, axis=1), dd.run("mean", x), \
        dd.run("matmul", x, da.from_array(wn, chunks=((50, 47), (23,)))), \
        dd.run("softmax", x.rechunk({1: -1})), \
        dd.run("max_pool2d", im, kernel_shape=(3, 3), pads=(1, 1, 1, 1)), \
        dd.run("conv2d", im, np.ones((2, 3, 3, 3), np.float32), strides=(2, 2))
    import dask
    dask.compute(*results)
    counts = client.run(testing.counted)
    assert all(c == 0 for c, _ in counts.values()), counts
    np.testing.assert_allclose(results[2].compute(), xn.mean(), rtol=1e-5)


def test_a_worker_killed_mid_compute_is_replaced_and_the_result_is_right(client):
    rng = np.random.default_rng(5)
    xn = rng.standard_normal((1200, 300)).astype(np.float32)
    x = da.from_array(xn, chunks=(40, 300))                           # 30 blocks

    def slow(b):
        time.sleep(0.15)
        return b
    y = dd.run("sum", dd.fuse([("mul", 0.5), "exp"])(x.map_blocks(slow)), axis=0)
    before = client.run(os.getpid)
    fut = client.compute(y)
    time.sleep(1.0)
    assert not fut.done()
    victim = sorted(before)[0]
    os.kill(before[victim], signal.SIGKILL)
    r = fut.result(timeout=180)
    np.testing.assert_allclose(r, np.exp(0.5 * xn).sum(0), rtol=2e-5)
    client.wait_for_workers(2, timeout=120)
    after = dd.worker_status(client)
    assert before[victim] not in {s["pid"] for s in after.values()}
    assert all(s["active"] for s in after.values()), after        # the plugin ran again


def _edited(src, dst, edit):
    shutil.copytree(src, dst)
    m = json.loads((dst / package.MANIFEST).read_text())
    edit(m)
    package.write_manifest(str(dst), m)
    pregenerate.sign(str(dst))                # signed by the session's trusted key
    return dst


def test_packages_the_workers_must_refuse(client, kernel_package, tmp_path):
    other = _edited(kernel_package, tmp_path / "other-host",
                    lambda m: m["machine"].update(cpu_name="haswell"))
    try:
        with pytest.raises(dynshape.PackageError,
                           match=r"another host or version: CPU 'haswell'"):
            dd.install(client, package=other)
        with pytest.raises(dynshape.PackageError, match="not trusted|unknown|untrusted"):
            dd.install(client, package=kernel_package,
                       trusted_keys=[PublicKey(os.urandom(32), "someone").line()])
        with pytest.raises(dynshape.PackageError, match="not a directory"):
            dd.install(client, package=tmp_path / "nothing-here")
    finally:
        status = dd.install(client, package=kernel_package)      # the session's package back
    assert all(s["active"] for s in status.values())


def test_without_a_package_each_worker_says_it_compiles():
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as lc, Client(lc, timeout=120) as c:
        status = dd.install(c, families=["unary"], dtypes=["float32"])
        (s,) = status.values()
        assert s["package"] is None
        assert "compiles each dynshape driver once, on first use" in s["note"]
        assert "warmed 1 drivers now" in s["note"]
        logs = "".join(m for w in c.get_worker_logs().values() for _, m in w)
        assert "dynshape on" in logs and "no kernel package" in logs
