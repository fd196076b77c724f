"""Scenario 9: the checkpoint helpers AITune documents for custom backends, end to end — a
backend's artifact as ArtifactPath, a LocalTorchStorage with sha_type="512" for ait.save/ait.load,
and LocalTorchStorage.save/load of a backend-style state dict carrying that artifact."""

from pathlib import Path

import pytest
import torch

import aitune.torch as ait
from aitune.torch.backend.onnx_runtime_backend import ONNXRuntimeBackend, ONNXRuntimeBackendConfig
from aitune.torch.checkpoint.artifact import ArtifactPath
from aitune.torch.checkpoint.local_torch_storage import LocalTorchStorage
from aitune.torch.module.wrapper_module import ModuleState
from aitune.torch.tune_strategy.one_backend_strategy import OneBackendStrategy

pytest.importorskip("onnxruntime", reason="the artifact-producing backend here is ONNX Runtime on the CPU")


def test_artifacts_through_local_torch_storage(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3)).eval()
    x = torch.randn(4, 6)
    with torch.no_grad():
        expected = model(x)
    backend = ONNXRuntimeBackend(ONNXRuntimeBackendConfig(execution_provider="cpu"))
    strategy = OneBackendStrategy(backend).enable_performance_validation(False)
    module = ait.Module(model, "onnx-net", strategy=strategy)
    ait.tune(module, [torch.randn(6) for _ in range(2)], batch_sizes=[1, 2], device="cpu")
    assert module.state == ModuleState.TUNED
    built = module.tuned_module.backends[0][1]
    artifact = built._artifacts()["model"]
    assert isinstance(artifact, ArtifactPath) and artifact.path.name == "model_raw.onnx"
    assert Path(str(artifact)).is_file()

    storage = LocalTorchStorage(base_folder=tmp_path / "checkpoints", sha_type="512")
    ait.save(module, "onnx-net", storage=storage)
    loaded = ait.load(
        torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3)).eval(),
        "onnx-net",
        storage=storage,
    )
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), expected, rtol=1e-4, atol=1e-5)

    # A custom backend's state, stored the way AITune's storage API is called.
    state = {
        "type": "MyBackend",
        "model": ArtifactPath.from_existing(artifact.path, root=artifact.root),
        "device": torch.device("cpu"),
    }
    storage.save("my-backend-state", state)
    restored = storage.load("my-backend-state")
    assert restored["type"] == "MyBackend" and restored["device"] == torch.device("cpu")
    assert restored["model"].relative_path == artifact.relative_path
    assert restored["model"].path.read_bytes() == artifact.path.read_bytes()
