"""The checkpoint rules Python takes from the C++ core through `_C` (docs/reference/checkpoint.md):
the one fingerprint builder and comparison, the format-1 backend-name table, the format's name and
readable versions, the pickle refusal in the archive reader, and one declaration per backend-entry
field."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

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


# -- one declaration per backend-entry field -------------------------------------------------------
ROOT = next(p for p in Path(__file__).resolve().parents if (p / "python" / "aitune").is_dir())

# The files that read or write manifest.json: the C++ core's checkpoint folder, the bindings of the
# manifest and the archive, and Python's checkpoint package and results store.
# manifest.json (tests left out).
FORMAT_FILES = [
    p
    for p in [
        *sorted((ROOT / "cpp/core/checkpoint").glob("*.h")),
        *sorted((ROOT / "cpp/core/checkpoint").glob("*.cc")),
        ROOT / "cpp/python/manifest_bindings.cc",
        ROOT / "cpp/python/checkpoint_bindings.cc",
        *sorted((ROOT / "python/aitune/torch/checkpoint").glob("*.py")),
        *sorted((ROOT / "python/aitune/torch/results").glob("*.py")),
    ]
    if not re.search(r"_(test|fuzz)\.cc$|^test_files\.h$", p.name)
]

# Keys the module, graph, root and leaf entries have too: a text search cannot tell whose they are.
SHARED_KEYS = {"name", "class", "config"}

# The same word with another meaning: (file, word) -> what it is there.
OTHER_MEANINGS = {
    ("state_schema.cc", "artifacts"): "LocalTorchStorage's state-dict manifest (its own document)",
    ("state_schema.cc", "state_tensors"): "LocalTorchStorage's state-dict manifest (its own document)",
    ("state_schema.cc", "state"): "LocalTorchStorage's state-dict manifest (its own document)",
    ("state_schema.cc", "device"): "a torch.device node of a state skeleton",
    ("storage.py", "artifacts"): "LocalTorchStorage's state-dict manifest (its own document)",
    ("storage.py", "state_tensors"): "LocalTorchStorage's state-dict manifest (its own document)",
    ("storage.py", "state"): "LocalTorchStorage's state-dict manifest (its own document)",
    ("backend_state.py", "device"): "a torch.device node of a state skeleton",
    ("checkpoint_bindings.cc", "requires"): "the argument of _C.fingerprint_mismatches",
    ("restore.py", "precision_class"): "a key of Backend.validated_precision",
    ("restore.py", "tf32"): "a key of Backend.validated_precision",
    ("restore.py", "own_state"): "the rebuild folder of a backend without a config",
    ("load.py", "device"): "the component an IncompatibleCheckpointError names",
    ("store.py", "device"): "a key of the results store's config fingerprint",
    ("zip_archive.h", "state"): "the reader's internal state",
}


def _python_names(path: Path) -> set[str]:
    """String constants (not docstrings) and class-body field declarations."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    names = {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        names |= {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    return names


def _cpp_names(path: Path) -> set[str]:
    """String literals and, in a header, struct member declarations (`type name_ = ...;`);
    comments left out."""
    text = re.sub(r"//[^\n]*", "", path.read_text())
    names = set(re.findall(r'"([A-Za-z_]\w*)"', text))
    if path.suffix == ".h":
        members = re.findall(r"^\s+[\w:<>,\s*]+?\s(\w+)(?:\s*=[^=;][^;]*)?;", text, re.M)
        names |= {m.rstrip("_") for m in members}
    return names


def _files_naming(fields: set[str], excused: set | None = None) -> dict[str, list[str]]:
    """field -> the files naming it; `excused` receives the OTHER_MEANINGS pairs met."""
    named: dict[str, list[str]] = {field: [] for field in fields}
    for path in FORMAT_FILES:
        names = _python_names(path) if path.suffix == ".py" else _cpp_names(path)
        for field in fields & names:
            if (path.name, field) in OTHER_MEANINGS:
                (excused if excused is not None else set()).add((path.name, field))
            else:
                named[field].append(path.name)
    return named


def test_a_backend_entry_field_is_named_in_three_files_at_most():
    """manifest.h holds the typed entry, manifest_backend.cc checks and reads it (and lists its
    fields for _C), entry_writer.py writes it; Python reads `_C.ManifestBackend` and mirrors nothing."""
    fields = (set(_C.MANIFEST_BACKEND_FIELDS) | {"class", "runtime"}) - SHARED_KEYS
    assert {"output_paths", "input_order", "profiles", "own_state", "state_tensors"} <= fields
    excused: set = set()
    named = _files_naming(fields, excused)
    assert excused == set(OTHER_MEANINGS), f"stale OTHER_MEANINGS entries: {set(OTHER_MEANINGS) - excused}"
    too_many = {field: files for field, files in named.items() if len(files) > 3}
    assert not too_many, f"backend-entry fields named in more than 3 files: {too_many}"
    assert set(named["output_paths"]) == {"manifest.h", "manifest_backend.cc", "entry_writer.py"}


def test_the_measure_sees_a_mirror(tmp_path, monkeypatch):
    """A Python class that declares the entry's fields again is counted (the rule can fail)."""
    mirror = tmp_path / "mirror.py"
    mirror.write_text("class Entry:\n    output_paths: list\n    input_order: list\n")
    monkeypatch.setattr(sys.modules[__name__], "FORMAT_FILES", [*FORMAT_FILES, mirror])
    assert "mirror.py" in _files_naming({"output_paths"})["output_paths"]


def test_constants_of_the_format_come_from_the_core():
    """Python writes what the C++ core checks; no constant is kept in step by comment."""
    from aitune.torch.backend.torch_inductor_aot import torch_inductor_aot_backend
    from aitune.torch.checkpoint import format as checkpoint_format
    from aitune.torch.results import store

    assert checkpoint_format.FORMAT == _C.MANIFEST_FORMAT == "aitune.checkpoint"
    assert checkpoint_format.manifest_format_version() == max(_C.MANIFEST_FORMAT_VERSIONS)
    assert store.STORE_KIND == _C.MANIFEST_RESULTS_KIND == "aitune.results"
    assert torch_inductor_aot_backend.NUM_INPUTS_METADATA_KEY == _C.AOTI_NUM_INPUTS_METADATA_KEY == "aitune_num_inputs"
    python = ROOT / "python" / "aitune"
    for literal in ("aitune.checkpoint", "aitune.results", "aitune_num_inputs"):
        spelled = [str(p.relative_to(python)) for p in python.rglob("*.py") if literal in _python_names(p)]
        assert not spelled, f"{literal!r} is spelled out in {spelled}"


def test_the_fingerprint_has_one_builder():
    """Python's fingerprint is the core's builder (cpp/core/checkpoint/fingerprint.h) with what only
    Python knows; the C++ runtime's is the same builder without the packages."""
    import platform

    import torch

    from aitune.tensorrt_install import tensorrt_version
    from aitune.torch.checkpoint.fingerprint import current_fingerprint

    fp = current_fingerprint()
    assert list(fp) == [
        "gpu_name",
        "gpu_sm",
        "driver_version",
        "cuda_runtime",
        "torch",
        "tensorrt",
        "torch_tensorrt",
        "onnxruntime",
        "platform",
    ]
    assert fp["torch"] == torch.__version__ and fp["cuda_runtime"] == torch.version.cuda
    assert fp["tensorrt"] == tensorrt_version()
    assert fp["platform"] == f"{platform.system().lower()}-{platform.machine()}"
    source = (ROOT / "python/aitune/torch/checkpoint/fingerprint.py").read_text()
    assert '"gpu_name"' not in source and '"platform"' not in source
