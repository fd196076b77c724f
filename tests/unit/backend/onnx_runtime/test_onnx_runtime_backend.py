"""ONNXRuntimeBackend (docs/reference/backends.md#per-backend-behaviour) on the CPU execution provider: config,
availability, a real build (export + session + IO binding), serving through ait.Module, strategies, checkpoints."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
import torch

import aitune.torch as ait
from aitune._native import _C
from aitune.exceptions import AITuneUserInputError, BackendUnavailableError, ProfileShapeError
from aitune.torch.backend import (
    BackendState,
    ONNXExecutionProvider,
    ONNXRuntimeBackend,
    ONNXRuntimeBackendConfig,
    TorchEagerBackend,
)
from aitune.torch.backend.common import onnx_export
from aitune.torch.backend.onnx_runtime import onnx_runtime_backend, onnx_runtime_session
from aitune.torch.backend.onnx_runtime.onnx_runtime_backend import IO_NAME, MODEL_NAME
from aitune.torch.backend.onnx_runtime.onnx_runtime_session import OrtSession
from aitune.torch.config import config
from aitune.torch.module.state import ModuleState
from aitune.torch.task.profiling import NumStepsMeasuringStopStrategy, ProfilingConfig
from aitune.torch.tune_strategy.default_backends import profiling_defaults
from support import record_calls

ort = pytest.importorskip("onnxruntime", reason="ONNXRuntimeBackend needs onnxruntime")
pytest.importorskip("onnx", reason="ONNXRuntimeBackend exports with onnx")
pytest.importorskip("onnxscript", reason="the dynamo ONNX exporter needs onnxscript")

CPU_ONLY_ORT = "CUDAExecutionProvider" not in ort.get_available_providers()
BOTH_EXPORTERS = pytest.mark.parametrize("use_dynamo", [True, False], ids=["dynamo", "torchscript"])


# -- config -----------------------------------------------------------------------------------------
def test_config_validation_errors_are_exact():
    with pytest.raises(
        ValueError,
        match=r"^Invalid execution_provider: 'gpu'\. Expected one of 'cuda', 'tensorrt', "
        r"'cpu', an ONNXExecutionProvider or None",
    ):
        ONNXRuntimeBackendConfig(execution_provider="gpu")
    with pytest.raises(ValueError, match=r"^Invalid execution_provider: 3\. "):
        ONNXRuntimeBackendConfig(execution_provider=3)
    with pytest.raises(ValueError, match=r"^Invalid opset_version: 0\. Expected a positive int or None\.$"):
        ONNXRuntimeBackendConfig(opset_version=0)
    with pytest.raises(ValueError, match=r"^Invalid opset_version: '17'\."):
        ONNXRuntimeBackendConfig(opset_version="17")
    with pytest.raises(ValueError, match=r"^Invalid use_dynamo: 'no'\. Expected True or False\.$"):
        ONNXRuntimeBackendConfig(use_dynamo="no")
    assert ONNXRuntimeBackendConfig(execution_provider="CPU").execution_provider is ONNXExecutionProvider.CPU
    assert ONNXRuntimeBackendConfig(execution_provider="tensorrt").execution_provider is ONNXExecutionProvider.TENSORRT
    assert [m.value for m in ONNXExecutionProvider] == ["cuda", "tensorrt", "cpu"]


def test_config_round_trip_describe_and_key():
    full = ONNXRuntimeBackendConfig(
        use_dynamo=False, execution_provider=ONNXExecutionProvider.CUDA, opset_version=17, use_cuda_graphs=True
    )
    data = json.loads(json.dumps(full.to_dict()))
    assert data == {"use_dynamo": False, "execution_provider": "CUDA", "opset_version": 17, "use_cuda_graphs": True}
    assert ONNXRuntimeBackendConfig.from_dict(data) == full
    assert ONNXRuntimeBackendConfig.from_dict(ONNXRuntimeBackendConfig().to_dict()) == ONNXRuntimeBackendConfig()
    backend = ONNXRuntimeBackend(ONNXRuntimeBackendConfig(execution_provider="cpu"))
    assert backend.describe() == "ONNXRuntimeBackend(execution_provider=ONNXExecutionProvider.CPU)"
    assert ONNXRuntimeBackend().describe() == "ONNXRuntimeBackend()"
    assert (
        ONNXRuntimeBackend(ONNXRuntimeBackendConfig(use_dynamo=False)).describe()
        == "ONNXRuntimeBackend(use_dynamo=False)"
    )
    assert backend.key().startswith("ONNXRuntimeBackend_") and backend.key() != ONNXRuntimeBackend().key()
    assert not backend.is_jit and backend.precision_class == "fp32"
    assert ONNXRuntimeBackend().is_available() == (True, "")


def test_is_available_names_missing_packages(monkeypatch):
    absent = {"onnxscript"}
    monkeypatch.setattr(onnx_runtime_backend, "_missing", lambda name: name in absent)
    assert ONNXRuntimeBackend().is_available() == (False, "onnxscript is not installed. Please install `onnxscript`.")
    assert ONNXRuntimeBackend(ONNXRuntimeBackendConfig(use_dynamo=False)).is_available() == (True, "")  # no dynamo
    absent.update({"onnxruntime", "onnx"})
    ok, reason = ONNXRuntimeBackend().is_available()
    assert not ok and reason == (
        "onnxruntime is not installed. Please install `onnxruntime`. onnx is not installed. "
        "Please install `onnx`. onnxscript is not installed. Please install `onnxscript`."
    )


@pytest.mark.skipif(not CPU_ONLY_ORT, reason="needs a CPU-only onnxruntime (this one has the CUDA provider)")
@pytest.mark.parametrize("provider", ["cuda", "tensorrt"])
def test_gpu_provider_with_cpu_only_onnxruntime_names_onnxruntime_gpu(provider):
    backend = ONNXRuntimeBackend(ONNXRuntimeBackendConfig(execution_provider=provider))
    ok, reason = backend.is_available()
    assert not ok and reason.startswith("onnxruntime-gpu is not installed. Please install `onnxruntime-gpu`.")
    assert f"execution_provider='{provider}'" in reason and "CPUExecutionProvider" in reason
    m = _recorded(_MLP())
    with pytest.raises(BackendUnavailableError, match=r"^onnxruntime-gpu is not installed"):
        m.tune(device="cpu", strategy=ait.OneBackendStrategy(backend))


def test_profiling_defaults_list_both_ort_exports():
    onnx_backends = [b for b in profiling_defaults() if isinstance(b, ONNXRuntimeBackend)]
    assert [b.config.use_dynamo for b in onnx_backends] == [True, False]


# -- models -----------------------------------------------------------------------------------------
class _MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))

    def forward(self, x):
        return self.net(x)


class Nested(torch.nn.Module):
    """Nested dict/list and keyword inputs, an unused input, a dict/tuple output."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(4, 3)

    def forward(self, x, opts, unused, *, mask=None):
        y = self.proj(x) + opts["bias"].sum(-1, keepdim=True)
        return {"y": y * mask, "pair": (x * 2, opts["pair"][1] + 1)}


def _nested_call(bs, n, seed=0):
    g = torch.Generator().manual_seed(seed * 100 + bs * 10 + n)
    opts = {
        "bias": torch.randn(bs, n, generator=g),
        "pair": [torch.randn(bs, 1, generator=g), torch.randn(bs, 2, generator=g)],
    }
    return (torch.randn(bs, 4, generator=g), opts, torch.randn(bs, 2, generator=g)), {
        "mask": torch.rand(bs, 3, generator=g)
    }


def _recorded(model, calls=None, name="m"):
    calls = calls or [(bs, (torch.randn(bs, 6),), {}) for bs in (1, 3)]
    return record_calls(model.eval(), calls, name)


def _nested_recorded():
    calls = [(bs, *_nested_call(bs, n)) for bs, n in [(1, 5), (3, 7)]]
    return _recorded(Nested(), calls)


def _built(m, tmp_path, **config):
    graph = m.graph_specs[0]
    backend = ONNXRuntimeBackend(ONNXRuntimeBackendConfig(**config))
    backend.build(m.module, graph, graph.samples, "cpu", tmp_path)
    return backend


def _strategy(backend):
    """OneBackendStrategy serving `backend` itself: no gate (ORT may not beat eager on a tiny
    CPU model) and no max-batch search (keeps the recorded range)."""
    return ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)


# -- build and serving ------------------------------------------------------------------------------
@BOTH_EXPORTERS
def test_build_serves_nested_structures_like_eager(tmp_path, use_dynamo):
    m = _nested_recorded()
    backend = _built(m, tmp_path, use_dynamo=use_dynamo)
    assert backend.state is BackendState.ACTIVE and backend.providers == ["CPUExecutionProvider"]
    assert (tmp_path / MODEL_NAME).exists() and (tmp_path / IO_NAME).exists()
    assert not (tmp_path / f"{MODEL_NAME}.data").exists()  # small model: weights inside the .onnx
    for bs, n in [(1, 5), (2, 6), (3, 7)]:
        args, kwargs = _nested_call(bs, n, seed=1)
        with torch.no_grad():
            expected = m.module._aitune_original_forward(*args, **kwargs)
        out = backend.infer(*args, **kwargs)
        assert isinstance(out, dict) and isinstance(out["pair"], tuple)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)

    # Profile: static axes exact, dynamic axes unbounded; an input the model dropped is unchecked.
    profile = backend.input_profile()
    assert profile[0] == ([0, 4], [None, 4])  # x: batch dynamic, features static
    assert profile[1] == ([0, 0], [None, None])  # opts["bias"]: batch and a dim axis
    if not use_dynamo:
        assert profile[2] is None and profile[4] is None  # opts["pair"][0], unused: not model inputs


def test_build_runs_every_stored_sample_and_fails_on_an_ort_error(tmp_path, monkeypatch):
    config.max_num_samples_stored = float("inf")
    m = _recorded(_MLP(), [(bs, (torch.randn(bs, 6),), {}) for bs in (1, 2, 3)])
    assert len(m.graph_specs[0].samples) == 3
    seen = []
    original_run = OrtSession.run
    monkeypatch.setattr(
        OrtSession, "run", lambda self, inputs: seen.append(inputs[0].shape[0]) or original_run(self, inputs)
    )
    _built(m, tmp_path / "ok")
    assert seen == [1, 2, 3]

    def broken(self, inputs):
        raise RuntimeError("provider init failed")

    monkeypatch.setattr(OrtSession, "run", broken)
    with pytest.raises(
        RuntimeError,
        match=r"^ONNX Runtime \(CPUExecutionProvider\) failed to run stored sample 0 "
        r"of graph '0': RuntimeError: provider init failed",
    ):
        _built(m, tmp_path / "broken")


def test_outputs_orts_allocates_are_copied_and_a_wrong_preallocation_falls_back(tmp_path):
    m = _recorded(_MLP())
    backend = _built(m, tmp_path)
    session = backend._session
    assert session._output_dims == [[(0, 0), 3]]  # the output's batch symbol is the input's
    x = torch.randn(5, 6)
    expected = m.module._aitune_original_forward(x).detach()
    session._output_dims = [None]  # shape unknown statically: ORT allocates, we copy
    torch.testing.assert_close(backend.infer(x), expected, rtol=1e-5, atol=1e-5)
    session._output_dims = [[(0, 0), 4]]  # a dim that lies: ORT rejects the buffer, the call still succeeds
    torch.testing.assert_close(backend.infer(x), expected, rtol=1e-5, atol=1e-5)
    assert session._preallocate is False


def test_cpu_provider_needs_a_cpu_device():
    backend = ONNXRuntimeBackend(ONNXRuntimeBackendConfig(execution_provider="cpu"))
    with pytest.raises(AITuneUserInputError, match=r"execution_provider='cpu' needs the tuning device cpu, got meta"):
        backend._provider(torch.device("meta"))


# -- through ait.Module and the strategies ---------------------------------------------------------
@BOTH_EXPORTERS
def test_tuned_module_serves_through_ort(use_dynamo):
    model = _MLP().eval()
    reference = copy.deepcopy(model)
    backend = ONNXRuntimeBackend(ONNXRuntimeBackendConfig(use_dynamo=use_dynamo))
    m = ait.Module(model, "mlp", strategy=_strategy(backend))
    ait.tune(m, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2, 4], device="cpu")
    assert m.state is ModuleState.TUNED
    ((_, backend),) = m.tuned_module.backends
    assert isinstance(backend, ONNXRuntimeBackend) and backend.is_active
    for bs in (1, 3, 4):
        x = torch.randn(bs, 6)
        with torch.no_grad():
            torch.testing.assert_close(m(x), reference(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(ProfileShapeError, match=r"input 'x'"):
        m(torch.randn(2, 7))  # the feature axis is static in the ONNX model


def test_max_throughput_strategy_measures_ort_candidates():
    model = _MLP().eval()
    reference = copy.deepcopy(model)
    profiling = ProfilingConfig(batch_sizes=[1, 2], measurement_stop_strategy=NumStepsMeasuringStopStrategy(5, 2))
    candidates = [ONNXRuntimeBackend(), ONNXRuntimeBackend(ONNXRuntimeBackendConfig(use_dynamo=False))]
    strategy = ait.MaxThroughputStrategy(candidates, profiling_config=profiling).enable_find_max_batch_size(False)
    m = ait.Module(model, "mlp", strategy=strategy)
    ait.tune(m, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2], device="cpu")
    results = {r["backend"]: r for r in strategy.backend_results}
    for name in ("ONNXRuntimeBackend()", "ONNXRuntimeBackend(use_dynamo=False)"):
        assert results[name]["success"] is True and results[name]["throughput"] > 0, results[name]
    ((_, selected),) = m.tuned_module.backends
    assert isinstance(selected, (ONNXRuntimeBackend, TorchEagerBackend))
    x = torch.randn(2, 6)
    with torch.no_grad():
        torch.testing.assert_close(m(x), reference(x), rtol=1e-5, atol=1e-5)


# -- checkpoints ------------------------------------------------------------------------------------
@BOTH_EXPORTERS
def test_save_load_round_trip_needs_no_weights(tmp_path, use_dynamo):
    calls = [(bs, *_nested_call(bs, n)) for bs, n in [(1, 5), (3, 7)]]
    model = Nested().eval()
    reference = copy.deepcopy(model)
    m = _recorded(model, calls, name="nested")
    m.tune(device="cpu", strategy=_strategy(ONNXRuntimeBackend(ONNXRuntimeBackendConfig(use_dynamo=use_dynamo))))
    path = ait.save(m, tmp_path / "ort.ait")
    manifest = json.loads(_C.ArchiveReader(str(path)).manifest())
    module_entry = manifest["modules"][0]
    assert module_entry["weights"] is None  # the ONNX model holds them
    entry = module_entry["graphs"][0]["backend"]
    assert (entry.get("name") == "onnx_runtime" or entry["class"].endswith("ONNXRuntimeBackend")) and set(
        entry["artifacts"]
    ) == {"model", "io"}
    assert entry["artifacts"]["model"].endswith("/backend/model_raw.onnx")

    torch.manual_seed(7)
    loaded = ait.load(Nested().eval(), path)  # other weights: outputs can only come from the ONNX model
    ((_, backend),) = loaded.tuned_module.backends
    assert isinstance(backend, ONNXRuntimeBackend) and backend.config.use_dynamo is use_dynamo
    for bs, n in [(1, 5), (2, 6)]:
        args, kwargs = _nested_call(bs, n, seed=2)
        with torch.no_grad():
            torch.testing.assert_close(loaded(*args, **kwargs), reference(*args, **kwargs), rtol=1e-5, atol=1e-5)


def test_external_data_is_saved_and_loaded_with_the_model(tmp_path, monkeypatch):
    monkeypatch.setattr(onnx_export, "EXTERNAL_DATA_THRESHOLD_BYTES", 0)
    model = _MLP().eval()
    reference = copy.deepcopy(model)
    m = ait.Module(model, "mlp", strategy=_strategy(ONNXRuntimeBackend()))
    ait.tune(m, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2], device="cpu")
    ((_, backend),) = m.tuned_module.backends
    assert backend.to_dict()["model_data"].path.name == "model_raw.onnx.data"
    path = ait.save(m, tmp_path / "ext.ait")
    loaded = ait.load(_MLP().eval(), path)
    x = torch.randn(2, 6)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), reference(x), rtol=1e-5, atol=1e-5)


def test_restore_and_reactivation(tmp_path):
    m = _recorded(_MLP())
    built = _built(m, tmp_path)
    graph = m.graph_specs[0]
    artifacts = {key: value.path for key, value in built.to_dict().items() if key in ("model", "io")}
    loaded = ONNXRuntimeBackend.restore(built.config, artifacts, graph, "cpu")  # what ait.load does
    assert loaded.state is BackendState.ACTIVE
    x = torch.randn(2, 6)
    torch.testing.assert_close(loaded.infer(x), built.infer(x))
    loaded.deactivate()
    with pytest.raises(RuntimeError, match="should be activated first"):
        loaded.infer(x)
    loaded.activate()

    built.deactivate()
    assert built.providers == [] and built.state is BackendState.INACTIVE
    built.activate()
    torch.testing.assert_close(built.infer(x), loaded.infer(x))


def test_session_maps_dtypes_and_rejects_unknown_ones():
    assert onnx_runtime_session.onnx_type(torch.float16) == 10 and onnx_runtime_session.onnx_type(torch.bool) == 9
    with pytest.raises(TypeError, match="ONNX Runtime cannot take a torch.quint8 tensor"):
        onnx_runtime_session.onnx_type(torch.quint8)


@dataclasses.dataclass
class Request:
    image: torch.Tensor
    scale: float = 1.0


@dataclasses.dataclass
class Response:
    logits: torch.Tensor
    features: list


class DataclassModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(4, 2)

    def forward(self, request):
        features = request.image * request.scale
        return Response(logits=self.proj(features), features=[features, features.sum(-1)])


def test_dataclass_inputs_and_outputs_survive_export_and_checkpoint(tmp_path):
    model = DataclassModel().eval()
    reference = copy.deepcopy(model)
    calls = [(bs, (Request(torch.randn(bs, 4), 2.0),), {}) for bs in (1, 3)]
    m = _recorded(model, calls, name="dc")
    assert [t.name for t in m.graph_specs[0].input_spec.tensors] == ["input_request_image"]
    m.tune(device="cpu", strategy=_strategy(ONNXRuntimeBackend()))
    path = ait.save(m, tmp_path / "dc.ait")
    loaded = ait.load(DataclassModel().eval(), path)
    assert all(isinstance(t.tuned_module.backends[0][1], ONNXRuntimeBackend) for t in (m, loaded))
    request = Request(torch.randn(2, 4), 2.0)
    for served in (m, loaded):
        with torch.no_grad():
            out, expected = served(request), reference(request)
        assert isinstance(out, Response) and isinstance(out.features, list)
        torch.testing.assert_close(dataclasses.asdict(out), dataclasses.asdict(expected), rtol=1e-5, atol=1e-5)


class _FakeStream:
    cuda_stream = 1234


@pytest.fixture
def gpu_onnxruntime(monkeypatch):
    """ORT's provider list as onnxruntime-gpu reports it, and a CUDA stream, so the provider
    choice can be checked on a machine without either (nothing runs on them)."""
    available = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(ort, "get_available_providers", lambda: list(available))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: _FakeStream())
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    return available


def test_provider_lists_prefer_tensorrt_then_cuda_on_the_callers_stream(gpu_onnxruntime, aitune_log):
    providers_for = onnx_runtime_session.providers_for
    cuda = ("CUDAExecutionProvider", {"device_id": "1", "user_compute_stream": "1234"})
    assert providers_for(ONNXExecutionProvider.CUDA, torch.device("cuda:1")) == [cuda, "CPUExecutionProvider"]
    # No TensorRT provider in this onnxruntime: TENSORRT falls back to CUDA, with a warning.
    assert providers_for(ONNXExecutionProvider.TENSORRT, torch.device("cuda:1")) == [cuda, "CPUExecutionProvider"]
    assert "falls back to CUDA" in aitune_log.text
    gpu_onnxruntime.insert(0, "TensorrtExecutionProvider")
    assert providers_for(ONNXExecutionProvider.TENSORRT, torch.device("cuda:1")) == [
        ("TensorrtExecutionProvider", {"device_id": "1"}),
        cuda,
        "CPUExecutionProvider",
    ]
    assert providers_for(ONNXExecutionProvider.CPU, torch.device("cpu")) == ["CPUExecutionProvider"]
    # The default provider follows the device; CUDA needs a CUDA device.
    backend = ONNXRuntimeBackend()
    assert backend._provider(torch.device("cuda:0")) is ONNXExecutionProvider.CUDA
    assert backend._provider(torch.device("cpu")) is ONNXExecutionProvider.CPU
    with pytest.raises(AITuneUserInputError, match=r"execution_provider='cuda' needs a CUDA tuning device, got cpu"):
        ONNXRuntimeBackend(ONNXRuntimeBackendConfig(execution_provider="cuda"))._provider(torch.device("cpu"))


def test_default_provider_on_cuda_with_cpu_only_onnxruntime_names_onnxruntime_gpu(monkeypatch):
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CPUExecutionProvider"])
    with pytest.raises(
        BackendUnavailableError,
        match=r"^onnxruntime-gpu is not installed\. Please install "
        r"`onnxruntime-gpu`\. execution_provider='cuda' needs",
    ):
        ONNXRuntimeBackend()._provider(torch.device("cuda:0"))


def test_strategies_skip_the_default_provider_on_cuda_with_cpu_only_onnxruntime(monkeypatch):
    """docs/reference/backends.md#common-behaviour: a backend that cannot run on the tuning device is skipped with its
    reason (the default lists hold ONNXRuntimeBackend() on a GPU host without onnxruntime-gpu)."""
    from aitune.torch.tune_strategy.tune_strategy import availability

    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CPUExecutionProvider"])
    ok, reason = availability(ONNXRuntimeBackend(), torch.device("cuda:0"))
    assert not ok and reason.startswith("onnxruntime-gpu is not installed. Please install `onnxruntime-gpu`.")
    assert availability(ONNXRuntimeBackend(), torch.device("cpu")) == (True, "")
    explicit_cpu = ONNXRuntimeBackend(ONNXRuntimeBackendConfig(execution_provider="cpu"))
    assert explicit_cpu._unavailable_on(torch.device("cuda:0")) is None  # the build explains that mismatch
