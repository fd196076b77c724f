"""Torch-TensorRT JIT and AOT backends (docs/reference/api.md#backend-classes, docs/reference/backends.md).
Torch-TensorRT cannot be installed on the CPU test hosts, so besides the "library absent" behaviour, our glue is tested
against the recording fake of tests/fakes/fake_torch_tensorrt.py, with the backends allowed on the CPU for the
test (the real ones need CUDA): the arguments we pass, and the artifact's save/load round trip."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

import aitune.torch as ait
import fake_torch_tensorrt
from aitune.exceptions import BackendUnavailableError, ProfileShapeError
from aitune.torch.backend import (
    TorchTensorRTAotBackend,
    TorchTensorRTAotBackendConfig,
    TorchTensorRTConfig,
    TorchTensorRTJitBackend,
    TorchTensorRTJitBackendConfig,
)
from aitune.torch.backend.common import torch_tensorrt_config as trt_config
from aitune.torch.global_context import published_batch_size
from aitune.torch.module.state import ModuleState

from fake_backend import FakeBackend, FakeBackendConfig, SleepyLinear
from fake_torch_tensorrt import FakeCompilationSettings, FakeInput, calls_named

TRT_ABSENT = trt_config.import_torch_tensorrt() is None
needs_absent = pytest.mark.skipif(
    not TRT_ABSENT, reason="checks the behaviour without torch_tensorrt, which is installed here"
)


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def _dataset(n: int = 4) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(6, generator=g) for _ in range(n)]


def _serving(backend):
    strategy = ait.OneBackendStrategy(backend)
    strategy.enable_performance_validation(False)
    strategy.enable_find_max_batch_size(False)
    return strategy


@pytest.fixture
def fake_trt(monkeypatch):
    """The fake library, and the two backends allowed on the CPU (the real ones need CUDA)."""
    trt = fake_torch_tensorrt.install(monkeypatch)
    monkeypatch.setattr(TorchTensorRTJitBackend, "_devices", ("cpu", "cuda"))
    monkeypatch.setattr(TorchTensorRTAotBackend, "_devices", ("cpu", "cuda"))
    return trt


# -- configs ---------------------------------------------------------------------------------------
@needs_absent
def test_without_the_library_the_config_is_a_stand_in_that_serialises():
    assert TorchTensorRTConfig is trt_config.CompilationSettingsStandIn
    settings = TorchTensorRTConfig(
        workspace_size=1 << 30, enabled_precisions={torch.float16}, use_explicit_typing=False, device="cuda:1"
    )
    config = TorchTensorRTJitBackendConfig(compile_config=settings, fullgraph=True)
    data = config.to_dict()
    assert data["compile_config"] == {
        "enabled_precisions": ["torch.float16"],
        "use_explicit_typing": False,
        "workspace_size": 1 << 30,
    }  # no device
    restored = TorchTensorRTJitBackendConfig.from_dict(data)
    assert restored.compile_config.enabled_precisions == {torch.float16}
    assert restored.fullgraph is True and restored.to_dict() == data
    described = TorchTensorRTJitBackend(config).describe()
    assert described.startswith("TorchTensorRTJitBackend(compile_config=CompilationSettingsStandIn(")
    assert "workspace_size=1073741824" in described and "fullgraph=True" in described and "device" not in described
    assert TorchTensorRTJitBackend().describe() == "TorchTensorRTJitBackend()"
    assert TorchTensorRTAotBackend().describe() == "TorchTensorRTAotBackend()"
    assert TorchTensorRTJitBackend(config).precision_class == "fp16"  # weak typing with fp16 kernels
    assert TorchTensorRTJitBackend().precision_class == "fp32"


def test_the_config_is_compilation_settings_when_the_library_is_importable(monkeypatch):
    fake_torch_tensorrt.install(monkeypatch)
    assert trt_config.resolve_compilation_settings_class() is FakeCompilationSettings
    settings = FakeCompilationSettings(
        workspace_size=123, enabled_precisions={torch.float16, torch.float32}, device=torch.device("cuda:0")
    )
    config = TorchTensorRTAotBackendConfig(compile_config=settings, pickle_protocol=4)
    data = config.to_dict()["compile_config"]
    assert data == {"enabled_precisions": ["torch.float16", "torch.float32"], "workspace_size": 123}
    restored = trt_config.settings_from_dict(data, FakeCompilationSettings)
    assert restored == FakeCompilationSettings(workspace_size=123, enabled_precisions={torch.float16, torch.float32})
    # the device never changes the identity: it is the tuning device, added at build time
    other = TorchTensorRTAotBackendConfig(
        compile_config=FakeCompilationSettings(
            workspace_size=123, enabled_precisions={torch.float16, torch.float32}, device="cuda:1"
        ),
        pickle_protocol=4,
    )
    assert other.key() == config.key()


def test_the_stand_in_refuses_settings_torch_tensorrt_does_not_have():
    """A config written without Torch-TensorRT must load where it is installed: CompilationSettings
    (a dataclass) refuses unknown keywords, so the stand-in refuses them when they are written."""
    with pytest.raises(TypeError, match="debug"):
        trt_config.CompilationSettingsStandIn(debug=True)


@dataclasses.dataclass
class InstalledCompilationSettings:
    """Like torch_tensorrt.dynamo.CompilationSettings: a dataclass without `debug`."""

    workspace_size: int = 0
    device: object = None


@pytest.mark.parametrize("settings_class", [trt_config.CompilationSettingsStandIn, InstalledCompilationSettings])
def test_a_saved_config_with_an_unknown_setting_is_refused_naming_it(settings_class, monkeypatch):
    monkeypatch.setattr(trt_config, "TorchTensorRTConfig", settings_class)
    saved = {
        "compile_config": {"debug": True, "workspace_size": 1024},
        "fullgraph": False,
        "dynamic": None,
        "autocast_enabled": False,
        "autocast_dtype": None,
        "use_cuda_graphs": False,
    }
    with pytest.raises(ValueError) as info:
        TorchTensorRTJitBackendConfig.from_dict(saved)
    message = str(info.value)
    assert message.startswith("TorchTensorRTJitBackendConfig: saved compile_config has setting(s) ['debug'] that ")
    assert settings_class.__qualname__ in message and "'workspace_size'" in message  # what it does have
    saved["compile_config"] = ["debug"]
    with pytest.raises(
        ValueError,
        match=r"saved compile_config must be an object of Torch-TensorRT settings, got "
        r"\['debug'\]",
    ):
        TorchTensorRTJitBackendConfig.from_dict(saved)
    saved["compile_config"] = {"workspace_size": 1024}
    assert TorchTensorRTJitBackendConfig.from_dict(saved).compile_config.workspace_size == 1024


@pytest.mark.parametrize(
    "backend_class, config_class",
    [
        (TorchTensorRTJitBackend, TorchTensorRTJitBackendConfig),
        (TorchTensorRTAotBackend, TorchTensorRTAotBackendConfig),
    ],
)
def test_the_precision_class_follows_autocast_and_weak_typing(backend_class, config_class):
    """An engine built with reduced-precision kernels is validated with that class's tolerances."""

    def precision(**settings):
        return backend_class(config_class(compile_config=TorchTensorRTConfig(**settings))).precision_class

    assert precision(enable_autocast=True, autocast_low_precision_type=torch.float16) == "fp16"
    assert precision(enable_autocast=True, autocast_low_precision_type=torch.bfloat16) == "bf16"
    assert precision(enable_autocast=True) == "fp32"  # no low-precision type: autocast changes nothing
    assert precision(autocast_low_precision_type=torch.float16) == "fp32"  # autocast off
    assert precision(enabled_precisions={torch.float16}, use_explicit_typing=False) == "fp16"  # deprecated weak typing
    assert precision(enabled_precisions={torch.float16}) == "fp32"  # explicit typing: the model's own types


def test_operators_in_the_settings_are_saved_by_name_and_come_back_as_operators():
    """torch_executed_ops={torch.ops.aten.add.Tensor} (the documented form) must have a key and a
    saved form; operators do not sort and are not JSON."""
    settings = TorchTensorRTConfig(
        torch_executed_ops={torch.ops.aten.mul.Tensor, torch.ops.aten.add.Tensor, torch.ops.aten.relu}, min_block_size=1
    )
    config = TorchTensorRTAotBackendConfig(compile_config=settings)
    data = config.to_dict()
    assert data["compile_config"] == {
        "min_block_size": 1,
        "torch_executed_ops": ["torch.ops.aten.add.Tensor", "torch.ops.aten.mul.Tensor", "torch.ops.aten.relu"],
    }
    assert "torch_executed_ops=" in TorchTensorRTAotBackend(config).describe()
    restored = TorchTensorRTAotBackendConfig.from_dict(data)
    assert restored.compile_config.torch_executed_ops == {
        torch.ops.aten.mul.Tensor,
        torch.ops.aten.add.Tensor,
        torch.ops.aten.relu,
    }
    assert restored.key() == config.key() and restored.to_dict() == data


@pytest.mark.parametrize(
    "saved, error",
    [
        ("torch.ops.aten.no_such_op.Tensor", "operator 'torch.ops.aten.no_such_op.Tensor' does not exist here"),
        ("torch.ops.__class__.__init__", "is not an operator name"),
        ("torch.ops.aten", "is not an operator name"),
    ],
)
def test_a_saved_operator_name_is_checked(saved, error):
    data = TorchTensorRTAotBackendConfig().to_dict()
    data["compile_config"] = {"torch_executed_ops": [saved]}
    with pytest.raises(ValueError, match=error):
        TorchTensorRTAotBackendConfig.from_dict(data)


def test_an_operator_given_as_a_python_function_is_refused_when_saved():
    config = TorchTensorRTAotBackendConfig(compile_config=TorchTensorRTConfig(torch_executed_ops={torch.add}))
    with pytest.raises(ValueError, match=r"compile_config.torch_executed_ops: cannot save <built-in method add"):
        config.to_dict()


def test_config_errors_name_the_input():
    with pytest.raises(TypeError, match="compile_config must be a TorchTensorRTConfig.*got int"):
        TorchTensorRTJitBackendConfig(compile_config=3)
    with pytest.raises(ValueError, match="pickle_protocol must be an int from 0 to .*got 'five'"):
        TorchTensorRTAotBackendConfig(pickle_protocol="five")
    with pytest.raises(ValueError, match="autocast_dtype must be a torch.dtype"):
        TorchTensorRTJitBackendConfig(autocast_dtype="fp16")
    with pytest.raises(ValueError, match="dynamic must be True, False or None, got 'yes'"):
        TorchTensorRTJitBackendConfig(dynamic="yes")


# -- availability ----------------------------------------------------------------------------------
@needs_absent
@pytest.mark.parametrize("cls", [TorchTensorRTJitBackend, TorchTensorRTAotBackend])
def test_without_the_library_construction_works_and_build_names_the_package(cls, tmp_path):
    backend = cls()  # never fails for a missing package (docs/reference/api.md#backend-classes)
    assert backend.is_available() == (False, "torch-tensorrt is not installed. Please install `torch-tensorrt`.")
    with pytest.raises(
        BackendUnavailableError,
        match=r"torch-tensorrt is not installed\. Please install "
        r"`torch-tensorrt`\.",
    ):
        backend.build(torch.nn.Linear(2, 2), None, [], "cuda", tmp_path)


@pytest.mark.parametrize("cls", [TorchTensorRTJitBackend, TorchTensorRTAotBackend])
def test_the_cpu_is_not_a_torch_tensorrt_device(cls, monkeypatch, tmp_path):
    fake_torch_tensorrt.install(monkeypatch)
    backend = cls()
    assert backend.is_available() == (True, "")
    with pytest.raises(BackendUnavailableError, match=f"Device cpu is not supported by the backend {cls.__name__}"):
        backend.build(torch.nn.Linear(2, 2), None, [], "cpu", tmp_path)


@needs_absent
@pytest.mark.parametrize("strategy_class", [ait.FirstWinsStrategy, ait.MaxThroughputStrategy])
def test_strategies_skip_the_unavailable_backends_with_the_reason(strategy_class, aitune_log):
    model = SleepyLinear(0.004).eval()
    strategy = strategy_class(
        [TorchTensorRTJitBackend(), TorchTensorRTAotBackend(), FakeBackend(FakeBackendConfig(name="good"))]
    )
    strategy.enable_find_max_batch_size(False)
    m = ait.Module(model, "m", strategy=strategy)
    ait.tune(m, [torch.randn(8) for _ in range(2)], batch_sizes=[1, 2], device="cpu")
    reason = "torch-tensorrt is not installed. Please install `torch-tensorrt`."
    for name in ("TorchTensorRTJitBackend", "TorchTensorRTAotBackend"):
        assert f"⏭️ backend skipped: {name}() — {reason}" in aitune_log.text
    assert m.state is ModuleState.TUNED
    assert [type(b).__name__ for _, b in m.tuned_module.backends] == ["FakeBackend"]
    skipped = [r for r in strategy.backend_results if r.get("skipped")]
    assert [r["skipped"] for r in skipped] == [reason, reason]


@needs_absent
def test_one_backend_strategy_raises_for_the_unavailable_backend():
    m = ait.Module(_mlp(), "m", strategy=_serving(TorchTensorRTAotBackend()))
    with pytest.raises(BackendUnavailableError, match="torch-tensorrt is not installed"):
        ait.tune(m, _dataset(), batch_sizes=[1], device="cpu", ignore_failing_modules=False)


# -- JIT glue (fake library) -----------------------------------------------------------------------
def test_jit_compiles_with_the_settings_and_the_tuning_device_and_recompiles_on_load(fake_trt, monkeypatch, tmp_path):
    compile_kwargs = []
    real_compile = torch.compile

    def recording_compile(fn, **kwargs):
        compile_kwargs.append(kwargs)
        return real_compile(fn, **kwargs)

    monkeypatch.setattr(torch, "compile", recording_compile)
    model = _mlp()
    reference = copy.deepcopy(model)
    settings = TorchTensorRTConfig(workspace_size=1 << 20)
    backend = TorchTensorRTJitBackend(
        TorchTensorRTJitBackendConfig(compile_config=settings, fullgraph=True, dynamic=False)
    )
    m = ait.Module(model, "mlp", strategy=_serving(backend))
    ait.tune(m, _dataset(), batch_sizes=[1, 2], device="cpu")
    assert m.state is ModuleState.TUNED
    [(_, built)] = m.tuned_module.backends
    assert built.is_jit and isinstance(built, TorchTensorRTJitBackend)
    [kwargs] = compile_kwargs
    # Torch-TensorRT's "torch_tensorrt" backend, wrapped to count the engines of each graph it compiles
    assert kwargs["backend"].__name__ == "torch_tensorrt_counted"
    assert kwargs["fullgraph"] is True and kwargs["dynamic"] is False
    assert kwargs["options"]["workspace_size"] == 1 << 20
    assert kwargs["options"]["device"] == torch.device("cpu")
    engine_builds = calls_named(fake_trt, "torch.compile")
    assert engine_builds and all(c["options"]["device"] == torch.device("cpu") for c in engine_builds)
    x = torch.randn(2, 6)
    torch.testing.assert_close(m(x), reference(x))

    path = ait.save(m, tmp_path / "jit.ait")
    before = len(compile_kwargs)
    loaded = ait.load(_mlp(), path)
    assert len(compile_kwargs) == before + 1  # loading compiles again (is_jit)
    assert compile_kwargs[-1]["options"]["workspace_size"] == 1 << 20
    torch.testing.assert_close(loaded(x), reference(x))


def test_jit_autocast_runs_under_autocast_and_returns_eager_dtypes(fake_trt):
    backend = TorchTensorRTJitBackend(
        TorchTensorRTJitBackendConfig(autocast_enabled=True, autocast_dtype=torch.bfloat16)
    )
    assert backend.precision_class == "bf16"
    model = _mlp()
    m = ait.Module(model, "mlp", strategy=_serving(backend))
    ait.tune(m, _dataset(), batch_sizes=[1], device="cpu")
    out = m(torch.randn(1, 6))
    assert out.dtype == torch.float32  # cast back to what eager returns


# -- AOT glue (fake library) -----------------------------------------------------------------------
class TwoInputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(6, 3)

    def forward(self, x: torch.Tensor, *, bias: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return self.linear(x) * scale + bias


def test_aot_exports_compiles_saves_and_loads_with_the_recorded_ranges(fake_trt, monkeypatch, tmp_path):
    export_kwargs = []
    real_export = torch.export.export

    def recording_export(*args, **kwargs):
        export_kwargs.append(kwargs)
        return real_export(*args, **kwargs)

    monkeypatch.setattr(torch.export, "export", recording_export)
    torch.manual_seed(0)
    model = TwoInputs().eval()
    reference = copy.deepcopy(model)
    settings = TorchTensorRTConfig(workspace_size=1 << 20)
    backend = TorchTensorRTAotBackend(TorchTensorRTAotBackendConfig(compile_config=settings, pickle_protocol=4))
    m = ait.Module(model, "two", strategy=_serving(backend))
    with torch.no_grad():
        for bs in (1, 4):  # a float keyword: recorded directly (a dataset's collate would batch it)
            with published_batch_size(bs):
                m(torch.randn(bs, 6), bias=torch.randn(bs, 3), scale=2.0)
    m.tune(device="cpu")
    assert m.state is ModuleState.TUNED
    [(_, built)] = m.tuned_module.backends

    assert export_kwargs and export_kwargs[0]["strict"] is False
    dims = export_kwargs[0]["dynamic_shapes"]  # the program takes the tensors alone (no scale)
    assert list(dims) == ["input_x", "input_bias"]
    assert dims["input_x"][0].__name__ == "batch" and dims["input_bias"][0].__name__ == "batch"
    [compiled] = calls_named(fake_trt, "dynamo.compile")
    assert compiled["arg_inputs"] == [
        FakeInput([1, 6], [4, 6], [4, 6], torch.float32, "input_x"),
        FakeInput([1, 3], [4, 3], [4, 3], torch.float32, "input_bias"),
    ]
    assert compiled["kwarg_inputs"] is None
    assert compiled["device"] == torch.device("cpu") and compiled["workspace_size"] == 1 << 20
    assert "enabled_precisions" not in compiled  # only the settings the user changed
    [saved] = calls_named(fake_trt, "save")
    assert saved["retrace"] is False and saved["pickle_protocol"] == 4
    assert saved["output_format"] == "exported_program"
    assert built.artifact_path.name == "exported_model.pt" and saved["file_path"] == str(built.artifact_path)
    assert calls_named(fake_trt, "load")[-1]["file_path"] == str(built.artifact_path)
    assert built.input_profile() == [([1, 6], [4, 6]), ([1, 3], [4, 3])]
    assert not built.is_jit

    for bs in (1, 3, 4):
        x, bias = torch.randn(bs, 6), torch.randn(bs, 3)
        torch.testing.assert_close(m(x, bias=bias, scale=2.0), reference(x, bias=bias, scale=2.0))

    with pytest.raises(ProfileShapeError):  # outside the engine's Input range: refused before execution
        m(torch.randn(5, 6), bias=torch.randn(5, 3), scale=2.0)

    path = ait.save(m, tmp_path / "aot.ait")
    loads = len(calls_named(fake_trt, "load"))
    loaded = ait.load(TwoInputs(), path)
    [(_, restored)] = loaded.tuned_module.backends
    assert isinstance(restored, TorchTensorRTAotBackend) and len(calls_named(fake_trt, "load")) == loads + 1
    assert calls_named(fake_trt, "load")[-1]["file_path"].endswith("exported_model.pt")
    assert restored.config.pickle_protocol == 4 and restored.config.compile_config.workspace_size == 1 << 20
    assert restored.input_profile() == [([1, 6], [4, 6]), ([1, 3], [4, 3])]
    x, bias = torch.randn(2, 6), torch.randn(2, 3)
    torch.testing.assert_close(loaded(x, bias=bias, scale=2.0), reference(x, bias=bias, scale=2.0))


def test_aot_gives_recorded_dim_axes_named_dims_and_input_ranges(fake_trt, monkeypatch):
    export_kwargs = []
    real_export = torch.export.export
    monkeypatch.setattr(torch.export, "export", lambda *a, **k: export_kwargs.append(k) or real_export(*a, **k))
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).eval()
    m = ait.Module(model, "seq", strategy=_serving(TorchTensorRTAotBackend()))
    with torch.no_grad():
        for bs, length in ((1, 3), (2, 5)):
            with published_batch_size(bs):
                m(torch.randn(bs, length, 4))
    m.tune(device="cpu")
    [(_, built)] = m.tuned_module.backends
    batch, length = export_kwargs[0]["dynamic_shapes"]["input_input"].values()
    assert batch.__name__ == "batch" and (batch.min, batch.max) == (1, 2)
    assert length.__name__ == "input_input_1" and (length.min, length.max) == (3, 5)  # named, not Dim.AUTO
    [compiled] = calls_named(fake_trt, "dynamo.compile")
    assert compiled["arg_inputs"] == [FakeInput([1, 3, 4], [2, 5, 4], [2, 5, 4], torch.float32, "input_input")]
    assert built.input_profile() == [([1, 3, 4], [2, 5, 4])]
    x = torch.randn(2, 4, 4)
    torch.testing.assert_close(m(x), model(x))


class HuggingFaceStyle(torch.nn.Module):
    """Calls as Hugging Face models get them: optional masks left None, flags, a float scale."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(6, 3)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        use_cache: bool = False,
        *,
        attention_mask: torch.Tensor | None = None,
        return_dict: bool = False,
        scale: float = 1.0,
        mode: str = "plain",
    ) -> torch.Tensor:
        out = self.linear(x) * scale
        return out + 1 if mode == "shifted" else out


def _tuned_aot(calls) -> tuple[ait.Module, torch.nn.Module]:
    torch.manual_seed(0)
    model = HuggingFaceStyle().eval()
    reference = copy.deepcopy(model)
    m = ait.Module(model, "hf", strategy=_serving(TorchTensorRTAotBackend()))
    with torch.no_grad():
        for bs in (1, 4):
            with published_batch_size(bs):
                args, kwargs = calls(bs)
                m(*args, **kwargs)
    m.tune(device="cpu")
    assert m.state is ModuleState.TUNED
    assert [type(b) for _, b in m.tuned_module.backends] == [TorchTensorRTAotBackend]
    return m, reference


def test_aot_saves_calls_with_none_bool_and_float_arguments_without_passing_them_to_save(fake_trt):
    """torch_tensorrt.save checks the inputs it gets before it looks at retrace, and refuses a
    positional None or bool and a keyword None or float; with retrace=False it needs none."""

    def calls(bs):
        return (torch.randn(bs, 6), None, True), {"attention_mask": None, "return_dict": False, "scale": 0.5}

    m, reference = _tuned_aot(calls)
    [saved] = calls_named(fake_trt, "save")
    assert "arg_inputs" not in saved and "kwarg_inputs" not in saved and saved["retrace"] is False
    (args, kwargs) = calls(3)
    torch.testing.assert_close(m(*args, **kwargs), reference(*args, **kwargs))


def test_aot_compiles_with_tensor_inputs_only(fake_trt):
    """torch.export specialised the non-tensor arguments into the program, which takes the tensors
    alone: dynamo.compile gets an Input per tensor and nothing else (2.11 refuses a str and turns a
    float or bool into a 0-d tensor input)."""

    def calls(bs):
        return (torch.randn(bs, 6), None, True), {"attention_mask": torch.ones(bs, 6), "scale": 0.5, "mode": "shifted"}

    m, reference = _tuned_aot(calls)
    [compiled] = calls_named(fake_trt, "dynamo.compile")
    assert compiled["arg_inputs"] == [
        FakeInput([1, 6], [4, 6], [4, 6], torch.float32, "input_x"),
        FakeInput([1, 6], [4, 6], [4, 6], torch.float32, "input_attention_mask"),
    ]
    assert compiled["kwarg_inputs"] is None
    (args, kwargs) = calls(2)
    torch.testing.assert_close(m(*args, **kwargs), reference(*args, **kwargs))


@dataclasses.dataclass
class Request:
    image: torch.Tensor
    gain: float


class FromRequest(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(6, 3)

    def forward(self, request: Request) -> torch.Tensor:
        return self.linear(request.image) * request.gain


def test_aot_exports_tensors_held_by_a_dataclass(fake_trt):
    torch.manual_seed(0)
    model = FromRequest().eval()
    m = ait.Module(model, "request", strategy=_serving(TorchTensorRTAotBackend()))
    with torch.no_grad():
        for bs in (1, 4):
            with published_batch_size(bs):
                m(Request(torch.randn(bs, 6), 2.0))
    m.tune(device="cpu")
    assert [type(b) for _, b in m.tuned_module.backends] == [TorchTensorRTAotBackend]
    [compiled] = calls_named(fake_trt, "dynamo.compile")
    assert compiled["arg_inputs"] == [FakeInput([1, 6], [4, 6], [4, 6], torch.float32, "input_request_image")]
    request = Request(torch.randn(3, 6), 2.0)
    torch.testing.assert_close(m(request), model(request))


def test_aot_needs_strict_mode_when_a_graph_has_non_tensor_inputs(fake_trt):
    """Without strict_mode a graph also serves calls with other non-tensor values, and the exported
    program keeps the recorded ones: refused, as for CUDA graphs."""
    from aitune.torch.config import config

    config.strict_mode = False
    torch.manual_seed(0)
    m = ait.Module(HuggingFaceStyle().eval(), "hf", strategy=_serving(TorchTensorRTAotBackend()))
    with torch.no_grad(), published_batch_size(2):
        m(torch.randn(2, 6), scale=0.5)
    with pytest.raises(
        ValueError,
        match=r"needs config.strict_mode=True when a graph has non-tensor inputs: the "
        r"exported program keeps the non-tensor values of the recorded call "
        r"\(scale=0.5\)",
    ):
        m.tune(device="cpu")
