"""Backends are registered under stable names; a checkpoint names its backends by those names and
loading resolves them only through the registry (docs/reference/backends.md#backend-names,
docs/reference/checkpoint.md#format-versions). Format-1 files written by 46eec07 still load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import aitune.torch as ait
from aitune import exceptions as errors
from aitune._native import _C
from aitune.torch.backend import Backend, TorchEagerBackend, TorchInductorAotBackend
from aitune.torch.backend import registry
from aitune.torch.backend.torch_inductor_aot import cpu_isa
from aitune.torch.backend.registry import BackendRegistryError, register_backend
from aitune.torch.checkpoint import format as ckpt_format
from aitune.torch.checkpoint.entry_writer import backend_entry
from aitune.torch.checkpoint.graphs import graph_from_native, graph_to_json
from aitune.torch.module.state import ModuleState

from checkpoint_tools import rewrite

V1 = Path(__file__).resolve().parents[2] / "data" / "checkpoints_v1"
BUILTIN = {
    "torch_eager",
    "torch_inductor_jit",
    "torch_inductor_aot",
    "onnx_runtime",
    "tensorrt",
    "torch_tensorrt_jit",
    "torch_tensorrt_aot",
    "torchao",
}


def _mlp(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def _tuned(backend, name="mlp"):
    strategy = ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)
    m = ait.Module(_mlp(), name, strategy=strategy)
    ait.tune(m, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2, 4], device="cpu")
    return m


# -- the registry ----------------------------------------------------------------------------------
def test_builtin_backends_have_their_stable_names():
    from aitune.torch import backend as backends

    classes = [getattr(backends, n) for n in backends.__all__ if n.endswith("Backend") and n != "Backend"]
    assert {registry.name_of(c) for c in classes} == BUILTIN
    assert all(registry.lookup(registry.name_of(c)) is c for c in classes)


def test_a_name_held_by_another_class_is_refused():
    class Other(Backend):
        def _build(self, module, graph_spec, data, device, cache_dir): ...

        def _infer(self, *args, **kwargs): ...

    with pytest.raises(
        BackendRegistryError,
        match=r"'torch_eager' is already registered to "
        r"aitune\.torch\.backend\.torch_eager.*TorchEagerBackend",
    ):
        register_backend("torch_eager")(Other)
    assert registry.lookup("torch_eager") is TorchEagerBackend
    # The refused class keeps its automatic name.
    assert registry.name_of(Other).startswith("custom:") and registry.name_of(Other).endswith("Other")


def test_registering_the_same_class_twice_is_a_no_op_and_names_are_checked():
    assert register_backend("torch_eager")(TorchEagerBackend) is TorchEagerBackend
    with pytest.raises(BackendRegistryError, match="non-empty string without spaces"):
        register_backend("has space")


def test_a_backend_subclass_registers_itself_under_its_class_path():
    class MyEager(TorchEagerBackend):
        pass

    name = registry.name_of(MyEager)
    assert name == f"custom:{__name__}.{MyEager.__qualname__}"
    assert registry.lookup(name) is MyEager
    # A subclass does not inherit its parent's name, nor take it away.
    assert registry.name_of(TorchEagerBackend) == "torch_eager"


def test_register_backend_replaces_the_automatic_name():
    class Named(TorchEagerBackend):
        pass

    automatic = registry.name_of(Named)
    register_backend("test_registry_named")(Named)
    try:
        assert registry.name_of(Named) == "test_registry_named" and registry.lookup(automatic) is None
    finally:
        registry._BY_NAME.pop("test_registry_named")


# -- resolution never imports ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def eager_manifest(tmp_path_factory) -> dict:
    """The manifest ait.save writes for a tuned eager MLP."""
    path = ait.save(_tuned(TorchEagerBackend()), tmp_path_factory.mktemp("eager") / "eager.ait")
    return json.loads(_C.ArchiveReader(str(path)).manifest())


def _with_backend(manifest: dict, version: int, **identity) -> dict:
    """`manifest` in format `version`, its backend entry named by `identity` ("name" or "class")."""
    edited = json.loads(json.dumps(manifest))
    edited["format_version"] = version
    entry = edited["modules"][0]["graphs"][0]["backend"]
    entry.pop("name", None), entry.pop("class", None)
    entry.update(identity)
    return edited


def _read(manifest: dict) -> _C.Manifest:
    """As ait.load reads it: the native reader's typed manifest."""
    return _C.read_manifest(json.dumps(manifest))


def test_an_unknown_name_names_the_backend_what_is_registered_and_the_fix(eager_manifest):
    entry = _read(_with_backend(eager_manifest, 2, name="custom:nowhere.Backend")).modules[0].graphs[0].backend
    with pytest.raises(errors.UnsupportedCheckpointError) as info:
        ckpt_format.resolve_backend(entry)
    text = str(info.value)
    assert "Unknown backend type: custom:nowhere.Backend" in text
    assert "torch_eager" in text and "tensorrt" in text
    assert "import the module that defines it before ait.load" in text


@pytest.mark.parametrize(
    "class_path",
    ["os.system", "json.decoder.JSONDecoder", "aitune_never_imported.Thing", "aitune.torch.jit_never_there.Backend"],
)
def test_a_class_path_in_a_file_imports_nothing(eager_manifest, class_path):
    before = set(sys.modules)
    entry = _read(_with_backend(eager_manifest, 1, **{"class": class_path})).modules[0].graphs[0].backend
    assert ckpt_format.backend_name(entry) == f"custom:{class_path}"
    with pytest.raises(errors.UnsupportedCheckpointError, match=f"Unknown backend type: {class_path}"):
        ckpt_format.resolve_backend(entry)
    assert set(sys.modules) == before


def test_ait_load_refuses_os_system_as_a_backend_without_importing(tmp_path):
    path = ait.save(_tuned(TorchEagerBackend()), tmp_path / "eager.ait")
    field = "name" if ckpt_format.manifest_format_version() >= 2 else "class"

    def edit(m):
        m["modules"][0]["graphs"][0]["backend"][field] = "os.system"

    bad = rewrite(path, tmp_path / "bad.ait", edit_manifest=edit)
    before = set(sys.modules)
    with pytest.raises(errors.UnsupportedCheckpointError, match="Unknown backend type: os.system"):
        ait.load(_mlp(1), bad)
    assert set(sys.modules) == before


def test_a_format1_class_path_of_a_moved_class_maps_through_the_fixed_table(eager_manifest):
    tensorrt = _with_backend(eager_manifest, 1, **{"class": "aitune.torch.backend.tensorrt.backend.TensorRTBackend"})
    assert _read(tensorrt).modules[0].graphs[0].backend.name == "tensorrt"
    assert set(_C.LEGACY_BACKEND_NAMES.values()) == BUILTIN - {"torchao"}  # TorchAO came after format 1
    assert {registry.format1_class_for_name(name) for name in BUILTIN - {"torchao"}} == set(_C.LEGACY_BACKEND_NAMES)
    # A backend newer than format 1 is written by its class path, which reads back to its name.
    assert registry.format1_class_for_name("torchao") == "aitune.torch.backend.torchao.torchao_backend.TorchAOBackend"


def test_a_format1_class_path_of_a_class_registered_under_a_short_name_finds_it(eager_manifest):
    class ShortNamed(TorchEagerBackend):
        pass

    register_backend("test_registry_short")(ShortNamed)
    try:
        stored = registry.class_path(ShortNamed)
        entry = _read(_with_backend(eager_manifest, 1, **{"class": stored})).modules[0].graphs[0].backend
        assert ckpt_format.backend_name(entry) == "test_registry_short" and entry.class_path == stored
        assert ckpt_format.resolve_backend(entry) is ShortNamed
    finally:
        registry._BY_NAME.pop("test_registry_short")


# -- the backend entry in both formats ---------------------------------------------------------------
@pytest.mark.parametrize("version", [1, 2])
def test_the_backend_entry_round_trips_in_both_formats(eager_manifest, tmp_path, version):
    backend = _tuned(TorchEagerBackend()).tuned_module.backends[0][1]
    writer = _C.ArchiveWriter(str(tmp_path / "x.ait"))
    data = backend_entry(backend, writer, "modules/0/graphs/0", version)
    if version == 1:
        assert "name" not in data
        assert data["class"] == "aitune.torch.backend.torch_eager.torch_eager_backend.TorchEagerBackend"
    else:
        assert "class" not in data and data["name"] == "torch_eager"
    writer.finish("{}")
    manifest = _with_backend(eager_manifest, version)
    manifest["modules"][0]["graphs"][0]["backend"] = json.loads(json.dumps(data))
    again = _read(manifest).modules[0].graphs[0].backend
    assert again.name == "torch_eager" and ckpt_format.resolve_backend(again) is TorchEagerBackend
    for key, value in json.loads(json.dumps(data)).items():
        if key not in ("class", "runtime"):  # read as class_path and use_cuda_graphs (manifest.h)
            assert getattr(again, key) == value, key


def test_a_format_newer_than_this_aitune_is_refused():
    with pytest.raises(errors.UnsupportedCheckpointError, match="format_version 3"):
        _C.read_manifest(json.dumps({"format": "aitune.checkpoint", "format_version": 3}))


def test_new_files_are_written_in_the_format_the_native_reader_reads(tmp_path):
    path = ait.save(_tuned(TorchEagerBackend()), tmp_path / "eager.ait")
    manifest = json.loads(_C.ArchiveReader(str(path)).manifest())
    assert manifest["format_version"] == max(_C.MANIFEST_FORMAT_VERSIONS) == 2
    backend = manifest["modules"][0]["graphs"][0]["backend"]
    assert (
        (backend["name"] == "torch_eager")
        if manifest["format_version"] == 2
        else backend["class"].endswith("TorchEagerBackend")
    )


# -- format-1 files written by 46eec07 ---------------------------------------------------------------
def _reference():
    ref = load_file(str(V1 / "reference.safetensors"))
    return ref["input"], ref["output"]


def test_a_format1_eager_checkpoint_loads_and_serves_the_reference():
    x, y = _reference()
    loaded = ait.load(_mlp(seed=5), V1 / "torch_eager.ait")  # the file's weights replace these
    assert loaded.state is ModuleState.TUNED
    assert isinstance(loaded.tuned_module.backends[0][1], TorchEagerBackend)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), y, atol=1e-5, rtol=1e-5)


def test_a_format1_inductor_aot_checkpoint_loads_and_serves_the_reference(aoti_loads):
    x, y = _reference()
    # The package was compiled on an AVX-512 (VNNI) CPU: elsewhere the load refuses it up front
    # instead of dying of SIGILL (cpu_isa.py).
    flags = cpu_isa.cpu_flags() or set()
    if not {"avx512f", "avx512_vnni"} <= flags:
        with pytest.raises(errors.IncompatibleCheckpointError, match=r"AVX512 AVX512_VNNI .*lacks .*avx512"):
            ait.load(_mlp(seed=5), V1 / "torch_inductor_aot.ait")
        return
    loaded = ait.load(_mlp(seed=5), V1 / "torch_inductor_aot.ait")  # the package holds the weights
    assert isinstance(loaded.tuned_module.backends[0][1], TorchInductorAotBackend)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), y, atol=1e-5, rtol=1e-5)


def test_a_format1_custom_backend_checkpoint_needs_its_module_imported():
    x, y = _reference()
    code = (
        "import sys, torch; import aitune.torch as ait\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2] / 'helpers')!r})\n"
        "from aitune import exceptions as errors\n"
        "m = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))\n"
        "try:\n"
        f"    ait.load(m, {str(V1 / 'custom_torchscript.ait')!r})\n"
        "except errors.UnsupportedCheckpointError as e:\n"
        "    print('REFUSED', e)\n"
        "print('IMPORTED', 'checkpoint_v1_backend' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "REFUSED Unknown backend type: checkpoint_v1_backend.V1TorchScriptBackend" in r.stdout, r.stderr[-2000:]
    assert "IMPORTED False" in r.stdout

    from checkpoint_v1_backend import V1TorchScriptBackend

    loaded = ait.load(_mlp(seed=5), V1 / "custom_torchscript.ait")
    assert isinstance(loaded.tuned_module.backends[0][1], V1TorchScriptBackend)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), y, atol=1e-5, rtol=1e-5)


def test_a_format2_manifest_parses_to_the_same_entries_as_its_format1_twin(eager_manifest):
    v1 = _with_backend(eager_manifest, 1, **{"class": registry.format1_class_for_name("torch_eager")})
    v2 = _with_backend(eager_manifest, 2, name="torch_eager")
    one, two = _read(v1), _read(v2)
    b1, b2 = one.modules[0].graphs[0].backend, two.modules[0].graphs[0].backend
    assert b1.name == b2.name == "torch_eager"
    assert ckpt_format.resolve_backend(b1) is ckpt_format.resolve_backend(b2) is TorchEagerBackend
    fields = [f for f in _C.MANIFEST_BACKEND_FIELDS if f != "class_path"]
    assert {f: getattr(b1, f) for f in fields} == {f: getattr(b2, f) for f in fields}
    graphs = [graph_to_json(graph_from_native(m.modules[0].graphs[0], [], None)) for m in (one, two)]
    assert graphs[0] == graphs[1]


def test_a_backend_that_restores_from_artifacts_must_define_restore():
    """The restore contract is checked when the class is defined, so a checkpoint never reaches a
    backend that cannot load it."""
    from aitune.torch.backend.backend import Backend

    with pytest.raises(TypeError, match="sets restores_from_artifacts = True but defines no _restore"):

        class NoRestore(Backend):  # noqa: F841 - defining it is the test
            restores_from_artifacts = True

            def _build(self, module, graph_spec, data, device, cache_dir):
                pass

            def _infer(self, *args, **kwargs):
                return None
