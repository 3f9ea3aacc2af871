"""CUDA packages: every CUDA kernel of the catalog compiled to PTX for cc 8.0 and 9.0 on this
machine, which has no GPU (the real NVVM compiler, not the simulator: a child process with
NUMBA_ENABLE_CUDASIM=0; the session's ``ptx_package``), counted against the catalog, each
with its cubin; the checks that refuse a package."""
import json

import pytest

from dynshape.errors import ArgumentError
from dynshape.packages.manifest import PackageError


def test_every_catalog_cuda_kernel_compiles_to_ptx_for_both_ccs(ptx_package):
    from dynshape_kernels.catalog import CATALOG
    m = json.loads((ptx_package / "cuda-manifest.json").read_text())
    assert m["ccs"] == ["80", "90"] and m["catalog_hash"] == CATALOG.hash
    assert m["cubin"] == "all" and m["versions"]["nvjitlink"] != "unknown"
    want = {k.id for k in CATALOG.kernels_of("cuda")}
    assert want and {"float16", "bfloat16"} <= {k.dtype for k in CATALOG.kernels_of("cuda")}
    for cc in ("80", "90"):
        covered = []
        fused = {r["dtype"] for r in m["kernels"] if r["cc"] == cc and r["family"] == "fused"}
        assert fused == {"float32", "float64", "int32", "int64", "float16", "bfloat16"}
        for r in (r for r in m["kernels"] if r["cc"] == cc):
            covered += range(*r["kernel_ids"]) if r["kernel_ids"] else []
            ptx = (ptx_package / r["file"]).read_text()
            assert f".target sm_{cc}" in ptx and f".entry {r['entry']}" in ptx
            cubin = (ptx_package / r["cubin"]["file"]).read_bytes()   # nvJitLink, no GPU
            assert cubin[:4] == b"\x7fELF" and len(cubin) == r["cubin"]["size"]
        assert sorted(covered) == sorted(want)          # each kernel exactly once per cc
    from dynshape.cuda import package
    assert package.check(str(ptx_package), cc=(9, 0))["ccs"] == ["80", "90"]


def test_packages_are_refused_by_name(ptx_package, tmp_path):
    import shutil
    from dynshape.cuda import package
    with pytest.raises(PackageError, match="built for compute capabilities 80, 90; this "
                                           "device is 7.5"):
        package.check(str(ptx_package), cc=(7, 5))
    bad = tmp_path / "bad"
    shutil.copytree(ptx_package, bad)
    f = next((bad / "ptx").iterdir())
    f.write_bytes(f.read_bytes().replace(b".version", b".versiox", 1))
    with pytest.raises(PackageError, match=f"{f.name} does not match its checksum"):
        package.check(str(bad))
    m = json.loads((bad / "cuda-manifest.json").read_text())
    m["catalog_hash"] = "0" * 16
    (bad / "cuda-manifest.json").write_text(json.dumps(m))
    with pytest.raises(PackageError, match="built for kernel catalog 0000000000000000"):
        package.check(str(bad))
    m = json.loads((ptx_package / "cuda-manifest.json").read_text())
    m["versions"]["numba_cuda"] = "0.0.1"
    (bad / "cuda-manifest.json").write_text(json.dumps(m))
    with pytest.raises(PackageError, match="built with numba_cuda 0.0.1"):
        package.check(str(bad))
    (bad / "cuda-manifest.json").write_text("{not json")
    with pytest.raises(PackageError, match="unreadable manifest"):
        package.check(str(bad))
    with pytest.raises(PackageError, match="not a CUDA kernel package"):
        package.check(str(tmp_path))


def test_ptx_needs_the_compiler_not_the_simulator(cuda, tmp_path):
    from dynshape.cuda import package
    from dynshape.cuda.arrays import simulating
    if not simulating():
        pytest.skip("only meaningful under the simulator")
    with pytest.raises(PackageError, match="unset NUMBA_ENABLE_CUDASIM"):
        package.build(str(tmp_path / "p"))


def test_compute_capabilities_are_parsed_strictly():
    from dynshape.cuda.package import parse_ccs
    assert parse_ccs("90,80,8.0") == ((8, 0), (9, 0))
    with pytest.raises(ArgumentError, match="compute capability 'sm80' is not understood"):
        parse_ccs("sm80")
