"""Loading CUDA packages: every catalog CUDA kernel becomes a numba-cuda dispatcher over the
packaged cubin (or PTX), made without NVVM; numba-cuda flattens its arguments to exactly the
packaged entry's parameters and launches it with the Launcher's geometry; broken or foreign
packages are refused by name, installing nothing.

The loader needs numba-cuda's real CUDA support, not the simulator the suite runs on, so the
checks run in a child process (``package_load_child.py``, NUMBA_ENABLE_CUDASIM=0) with no GPU:
the package is loaded for cc 8.0 and everything short of the driver's module load is
exercised. What needs a device (module load, launches, results) is marked ``gpu``."""
import json
import os
import subprocess
import sys

import pytest

from dynshape.packages.manifest import PackageError

CHILD = os.path.join(os.path.dirname(__file__), "package_load_child.py")


def child(mode, *args, timeout=600):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    r = subprocess.run([sys.executable, CHILD, mode, *map(str, args)], env=env, check=False,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    line = next(x for x in r.stdout.splitlines() if x.startswith("REPORT "))
    return json.loads(line[len("REPORT "):])


@pytest.fixture(scope="module")
def loaded(ptx_package):
    return child("nodevice", ptx_package)


@pytest.fixture(scope="module")
def refused(ptx_package, tmp_path_factory):
    return child("refusals", ptx_package, tmp_path_factory.mktemp("broken"))


def test_every_catalog_kernel_loads_from_the_package_without_nvvm(loaded):
    from dynshape.cuda.package import pairs
    from dynshape_kernels.catalog import CATALOG
    assert loaded["nvvm_calls"] == []
    ks = loaded["kernels"]
    assert sorted(ks) == sorted(f"{f}/{d}" for f, d in pairs())
    covered = [i for k in ks.values() if k["kernel_ids"] for i in range(*k["kernel_ids"])]
    assert sorted(covered) == sorted(k.id for k in CATALOG.kernels_of("cuda"))
    for name, k in ks.items():
        # numba-cuda's dispatcher, specialized like cuda.jit(signature), compile disabled
        assert k["prebuilt"] and k["specialized"] and not k["can_compile"], name
        assert k["signature_as_jit"] and k["entry"], name
        # the code the driver gets is the packaged cubin, byte for byte
        assert k["code"] == "cubin" and k["cubin_is_packaged"], name
        assert k["code_type"] == "cubin", name


def test_numba_cuda_flattens_arguments_to_the_packaged_entry_parameters(loaded):
    """For every kernel, numba-cuda's own flattening (_Kernel._prepare_args: an array as
    meminfo, parent, nitems, itemsize, data, shape, strides; scalars as C values) gives as
    many values, of the same sizes, as the packaged PTX entry declares."""
    for name, k in loaded["kernels"].items():
        assert k["flattened"] == k["ptx_params"], name


def test_a_launch_goes_through_numba_cuda_with_the_launchers_geometry(loaded):
    lz = loaded["launch"]
    assert lz["launches"] == 1
    assert lz["grid"] == [*lz["want_grid"], 1] and lz["block"] == [*lz["want_block"], 1, 1]
    assert lz["stream_handle"] == 0 and lz["shared"] == 0
    assert lz["n_args"] == 6 and lz["scalars"] == [0.5, 2.0]
    assert loaded["kernels"]["unary/float32"]["ptx_params"] == lz["flattened"]


def test_foreign_or_broken_packages_are_refused_by_name(refused):
    r = refused
    assert "built for compute capabilities 80, 90; this device is 7.5" in r["cc75"]
    assert "does not match its checksum" in r["ptx_checksum"]
    assert ".cubin does not match its checksum" in r["cubin_checksum"]
    assert "-sm90.ptx does not match its checksum" in r["other_cc_checksum"]
    assert ".ptx is missing" in r["missing_ptx"]
    assert ".cubin is missing" in r["missing_cubin"]
    assert "unreadable manifest" in r["not_json"]
    assert "field 'kernels' is missing" in r["no_kernels_field"]
    assert "kernel record" in r["record_without_entry"] and "lacks entry" in \
        r["record_without_entry"]
    assert "has no entry not_the_kernel" in r["wrong_entry"]
    assert "built with numba_cuda 0.0.1, this host has" in r["numba_cuda_version"]
    assert "built for kernel catalog 0000000000000000" in r["catalog"]
    assert "family 'warp', which this dynshape has no CUDA kernels for" in r["unknown_family"]
    assert "not a CUDA kernel package" in r["not_a_package"]
    assert "no CUDA device here" in r["no_device_no_cc"] and "cc=(8, 0)" in \
        r["no_device_no_cc"]
    for k in [k for k in r if k.endswith(":installed")]:
        assert r[k] is False, k                          # a refusal installs nothing
    ac = r["allow_compile"]
    assert not ac["active"] and not ac["installed"] and "numba_cuda 0.0.1" in ac["refused"]
    assert ac["warnings"] and "kernels compile instead" in ac["warnings"][0]


def test_a_package_without_cubins_links_its_ptx_without_nvvm(refused):
    p = refused["ptx_only"]
    assert p["code"] == ["ptx"] and p["code_type"] == "cubin" and p["cubin_bytes"] > 0
    assert p["nvvm_calls"] == []
    assert "prebuilt for compute capability 8.0, asked for 9.0" in refused["other_cc"]
    assert refused["unloaded"]


def test_the_simulator_refuses_packaged_code_and_load_package_routes_cuda_packages(
        ptx_package, cuda):
    import dynshape
    from dynshape.cuda.arrays import simulating
    if not simulating():
        pytest.skip("only meaningful under the simulator")
    with pytest.raises(PackageError, match="unset it to load the package"):
        dynshape.load_package(str(ptx_package))
    from dynshape.cuda import package
    assert package.active() is None


@pytest.mark.gpu
def test_on_a_device_never_seen_shapes_run_from_the_package_with_zero_nvvm(
        tmp_path_factory):
    """Build a small package for this device's compute capability, load it in a fresh
    process with NVVM forbidden, run ops on shapes never seen and compare with NumPy."""
    pytest.importorskip("numba.cuda")
    code = ("from numba import cuda; c = cuda.get_current_device().compute_capability "
            "if cuda.is_available() else None; print(c and '%d%d' % c)")
    probe = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                           env=dict(os.environ, NUMBA_ENABLE_CUDASIM="0"), text=True)
    cc = probe.stdout.strip().splitlines()[-1] if probe.stdout.strip() else "None"
    if cc == "None":
        pytest.skip("needs a real CUDA device")
    out = tmp_path_factory.mktemp("gpu-pkg") / "pkg"
    r = subprocess.run([sys.executable, "-m", "dynshape", "pregenerate", "--target", "cuda",
                        "--cc", cc, "--family", "unary", "--family", "binary", "--dtype",
                        "float32", "--out", str(out)],
                       env=dict(os.environ, NUMBA_ENABLE_CUDASIM="0"), check=False,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = child("gpu", out)
    assert rep["nvvm_calls"] == [] and rep["errors"] == [] and rep["active"]
    assert rep["prebuilt"] and all(rep["prebuilt"].values())
    assert sum(rep["launches"].values()) >= 8
