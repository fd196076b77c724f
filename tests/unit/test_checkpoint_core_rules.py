"""The checkpoint rules Python takes from the C++ core through `_C` (docs/reference/checkpoint.md):
the one fingerprint comparison, the format-1 backend-name table, the readable format versions, and
the pickle refusal in the archive reader."""

from __future__ import annotations

import json

import pytest

from aitune import exceptions as errors
from aitune._native import _C
from aitune.torch.checkpoint.fingerprint import mismatches

H200 = {"torch": "2.11.0+cu130", "cuda_runtime": "13.0", "gpu_sm": "9.0", "tensorrt": "10.13.0", "onnxruntime": None}


def test_torch_is_compared_without_its_local_suffix():
    # libtorch (the C++ runtime) reports no local suffix; both languages apply the same rule.
    assert mismatches(H200, dict(H200, torch="2.11.0"), ["torch"], "ctx") == []
    assert mismatches(H200, dict(H200, torch="2.10.0+cu130"), ["torch"], "ctx") == [
        ("torch", "2.11.0+cu130", "2.10.0+cu130", "ctx")
    ]


def test_cuda_major_and_ampere_plus():
    assert mismatches(H200, dict(H200, cuda_runtime="13.1"), ["cuda_major"], "c") == []
    assert mismatches(H200, dict(H200, cuda_runtime=None), ["cuda_major"], "c") == [("cuda_major", "13", None, "c")]
    assert mismatches(H200, dict(H200, gpu_sm="8.6"), ["gpu_sm_ampere_plus"], "c") == []
    assert mismatches(H200, dict(H200, gpu_sm="7.5"), ["gpu_sm_ampere_plus"], "c") == [("gpu_sm", "9.0", "7.5", "c")]


def test_only_required_fields_count_and_absent_equals_absent():
    other = dict(H200, gpu_sm="8.9", tensorrt=None)
    assert mismatches(H200, other, ["torch", "onnxruntime"], "c") == []
    assert mismatches(H200, {}, ["onnxruntime", "tensorrt"], "c") == [("tensorrt", "10.13.0", None, "c")]
    # A number a hand-edited manifest holds compares as its JSON text.
    assert _C.fingerprint_mismatches({"build": 7}, {"build": "7"}, ["build"]) == []


def test_legacy_backend_names_cover_the_built_in_backends():
    assert _C.MANIFEST_FORMAT_VERSIONS == (1, 2)
    assert _C.LEGACY_BACKEND_NAMES == {
        "aitune.torch.backend.torch_eager.torch_eager_backend.TorchEagerBackend": "torch_eager",
        "aitune.torch.backend.torch_inductor_jit.torch_inductor_jit_backend.TorchInductorJitBackend": "torch_inductor_jit",
        "aitune.torch.backend.torch_inductor_aot.torch_inductor_aot_backend.TorchInductorAotBackend": "torch_inductor_aot",
        "aitune.torch.backend.onnx_runtime.onnx_runtime_backend.ONNXRuntimeBackend": "onnx_runtime",
        "aitune.torch.backend.tensorrt.backend.TensorRTBackend": "tensorrt",
        "aitune.torch.backend.torch_tensorrt_jit.torch_tensorrt_jit_backend.TorchTensorRTJitBackend": "torch_tensorrt_jit",
        "aitune.torch.backend.torch_tensorrt_aot.torch_tensorrt_aot_backend.TorchTensorRTAotBackend": "torch_tensorrt_aot",
    }


def test_the_archive_reader_refuses_a_pickle_beside_a_manifest(tmp_path):
    path = tmp_path / "reference.ait"
    writer = _C.ArchiveWriter(str(path))
    writer.add_bytes("model/state_dict.pt", b"\x80\x04pickled")
    writer.finish(json.dumps({"format": "aitune.checkpoint", "format_version": 1, "files": writer.files()}))
    with pytest.raises(errors.UnsupportedCheckpointError, match="is a checkpoint of the reference implementation"):
        _C.ArchiveReader(str(path))
