"""An AOTInductor CPU package compiled for instructions this CPU lacks is refused from its metadata
before any of its code runs (python/aitune/torch/backend/torch_inductor_aot/cpu_isa.py)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from aitune.exceptions import IncompatibleCheckpointError
from aitune.torch.backend.torch_inductor_aot import cpu_isa

AVX2_CPU = {"sse4_2", "avx", "avx2", "fma", "f16c"}
AVX512_CPU = AVX2_CPU | {"avx512f", "avx512dq", "avx512vl", "avx512bw", "avx512_vnni"}


def _package(tmp_path: Path, **metadata: str) -> Path:
    """A zip laid out like a .pt2 package, with the metadata file Inductor writes."""
    path = tmp_path / "model.pt2"
    meta = {"AOTI_DEVICE_KEY": "cpu", "AOTI_PLATFORM": "linux", "AOTI_MACHINE": "x86_64", **metadata}
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("model/data/aotinductor/model/abc.wrapper_metadata.json", json.dumps(meta))
        z.writestr("model/data/aotinductor/model/abc.wrapper.so", b"\x7fELF")
    return path


def test_an_avx512_package_on_an_avx2_cpu_is_refused_naming_what_it_lacks(tmp_path):
    path = _package(tmp_path, AOTI_CPU_ISA="AVX512 AVX512_VNNI")
    with pytest.raises(IncompatibleCheckpointError) as e:
        cpu_isa.check_cpu_package(path, flags=AVX2_CPU, machine="x86_64")
    message = str(e.value)
    assert "AVX512 AVX512_VNNI" in message and "avx512_vnni" in message and "avx512f" in message
    assert "it has AVX2" in message and "SIGILL" in message


@pytest.mark.parametrize("isa", ["AVX512 AVX512_VNNI", "AVX2", "INVALID_VEC_ISA", ""])
def test_a_package_for_instructions_this_cpu_has_passes(tmp_path, isa):
    cpu_isa.check_cpu_package(_package(tmp_path, AOTI_CPU_ISA=isa), flags=AVX512_CPU, machine="x86_64")


def test_an_amx_package_needs_amx(tmp_path):
    path = _package(tmp_path, AOTI_CPU_ISA="AVX512 AVX512_VNNI AMX_TILE")
    with pytest.raises(IncompatibleCheckpointError, match="amx_bf16, amx_int8, amx_tile"):
        cpu_isa.check_cpu_package(path, flags=AVX512_CPU, machine="x86_64")


def test_a_package_for_another_machine_type_is_refused(tmp_path):
    path = _package(tmp_path, AOTI_CPU_ISA="ASIMD", AOTI_MACHINE="aarch64")
    with pytest.raises(IncompatibleCheckpointError, match="compiled for aarch64 CPUs, this machine is x86_64"):
        cpu_isa.check_cpu_package(path, flags=AVX2_CPU, machine="x86_64")


def test_a_cuda_package_is_not_judged_by_its_host_isa(tmp_path):
    path = _package(tmp_path, AOTI_CPU_ISA="AVX512 AVX512_VNNI", AOTI_DEVICE_KEY="cuda")
    cpu_isa.check_cpu_package(path, flags=AVX2_CPU, machine="x86_64")


@pytest.mark.parametrize(
    "content",
    [b"not a zip", b"PK\x03\x04broken"],
)
def test_an_unreadable_package_is_left_to_the_load_check(tmp_path, content):
    path = tmp_path / "model.pt2"
    path.write_bytes(content)
    assert cpu_isa.package_metadata(path) is None
    cpu_isa.check_cpu_package(path, flags=AVX2_CPU, machine="x86_64")


def test_metadata_that_is_not_a_string_map_is_ignored(tmp_path):
    path = tmp_path / "model.pt2"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("model/data/aotinductor/model/abc.wrapper_metadata.json", json.dumps({"AOTI_CPU_ISA": 5}))
    assert cpu_isa.package_metadata(path) is None


def test_the_cpu_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 fma\n")
    assert cpu_isa.cpu_flags(cpuinfo) == {"fpu", "sse", "avx2", "fma"}
    assert cpu_isa.cpu_flags(tmp_path / "missing") is None
