"""Every snippet of AITune's TorchAO backend guide (its `torchao_backend.md`), run as
written (docs/reference/backends.md#torchao-torchaobackend).

The config constructions run everywhere: a TorchAO config never imports torchao. The snippets that
import torchao need it installed, and skip with the reason without it. The Quick Start tunes with
`ait.tune`'s default device, cuda:0; on a host without CUDA it runs with `device="cpu"`, the one
change, and with Inductor's CPU GEMM search limited to ATen (max-autotune, the guide's default mode,
would otherwise search C++ GEMM templates for minutes on a small CPU)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from aitune.torch.module.state import ModuleState

HAS_TORCHAO = True
try:
    import torchao  # noqa: F401
except ImportError:
    HAS_TORCHAO = False
needs_torchao = pytest.mark.skipif(not HAS_TORCHAO, reason="torchao is not installed (pip install 'aitune[torchao]')")


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16)).eval()


def _input_data() -> list[torch.Tensor]:
    return [torch.randn(32) for _ in range(2)]


# -- Quick Start -----------------------------------------------------------------------------------
def _quick_start(model, input_data, **tune_kwargs):
    from aitune.torch.backend import TorchAOBackend, TorchAOBackendConfig
    import aitune.torch as ait

    # Configure with FP8 weight-only quantization
    config = TorchAOBackendConfig(quantization="fp8wo")
    backend = TorchAOBackend(config)

    # Use in tuning
    strategy = ait.OneBackendStrategy(backend=backend)

    model = ait.Module(model, "my-model", strategy=strategy)
    ait.tune(model, input_data, **tune_kwargs)
    return model, strategy


@needs_torchao
def test_quick_start_tunes_as_written():
    import contextlib

    import torch._inductor.config as inductor_config

    tune_kwargs, scope = {}, contextlib.nullcontext()
    if not torch.cuda.is_available():
        tune_kwargs = {"device": "cpu"}
        scope = inductor_config.patch(max_autotune_gemm_backends="ATEN")  # restored on exit
    reference = _model()
    with scope:
        model, strategy = _quick_start(_model(), _input_data(), **tune_kwargs)
    x = torch.randn(2, 32)
    assert model.state is ModuleState.TUNED
    backend = model.tuned_module.backends[0][1]
    if type(backend).__name__ == "TorchEagerBackend":  # below the gate (a tiny model): the eager baseline serves
        [result] = strategy.perf_validation_results
        assert result.backend_description == "TorchAOBackend(quantization=fp8wo)" and not result.passed
        return
    assert backend.describe() == "TorchAOBackend(quantization=fp8wo)"
    assert backend.validated_precision["precision_class"] == "fp8"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.no_grad():
        out, ref = model(x.to(device)).cpu(), reference.to(device)(x.to(device)).cpu()
    assert float((out - ref).norm() / ref.norm()) < 0.1  # the fp8 class's bound


# -- Quantization Types ------------------------------------------------------------------------------
def test_quantization_types_construct():
    from aitune.torch.backend import TorchAOBackendConfig

    # INT8 weight-only
    config = TorchAOBackendConfig(quantization="int8wo")
    assert config.quantization == "int8wo"

    # FP8 weight-only (default)
    config = TorchAOBackendConfig(quantization="fp8wo")
    assert config.quantization == "fp8wo"

    # INT8 dynamic (activations + weights)
    config = TorchAOBackendConfig(quantization="int8dq")

    # FP8 dynamic (activations + weights)
    config = TorchAOBackendConfig(quantization="fp8dq")

    # Blackwell/Hopper-dependent dynamic quantization presets
    config = TorchAOBackendConfig(quantization="mxfp8dq")
    config = TorchAOBackendConfig(quantization="nvfp4dq")
    assert config.quantization == "nvfp4dq"


# -- Configuration Options -----------------------------------------------------------------------------
def test_the_config_dataclass_has_the_documented_fields_and_defaults():
    from aitune.torch.backend import BackendConfig, TorchAOBackendConfig

    assert issubclass(TorchAOBackendConfig, BackendConfig)
    fields = {f.name: f.default for f in dataclasses.fields(TorchAOBackendConfig)}
    documented = {
        "fullgraph": False,
        "dynamic": None,
        "mode": "max-autotune",
        "quantization": None,
        "quantization_config": None,
        "filter_fn": None,
    }
    assert list(fields)[:6] == list(documented)
    assert {k: fields[k] for k in documented} == documented


def test_using_predefined_types():
    from aitune.torch.backend import TorchAOBackendConfig

    config = TorchAOBackendConfig(
        quantization="int8wo",  # Choose quantization type
    )
    assert config.describe() == "quantization=int8wo"


@needs_torchao
def test_custom_configuration():
    from aitune.torch.backend import TorchAOBackendConfig
    from torchao.quantization import Int8WeightOnlyConfig

    custom_config = Int8WeightOnlyConfig()

    config = TorchAOBackendConfig(
        quantization_config=custom_config,
    )
    assert config.resolved_quantization_config() is custom_config
    with pytest.raises(ValueError, match="Only one of quantization or quantization_config"):
        TorchAOBackendConfig(quantization="int8wo", quantization_config=custom_config)


def test_torch_compile_options():
    from aitune.torch.backend import TorchAOBackendConfig

    config = TorchAOBackendConfig(
        quantization="fp8wo",
        fullgraph=True,
        dynamic=None,  # None lets AITune resolve this from graph metadata
        mode="max-autotune",
    )
    assert config.describe() == "fullgraph=True,quantization=fp8wo"
    for mode in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        TorchAOBackendConfig(quantization="fp8wo", mode=mode)


def test_filtering_modules():
    from aitune.torch.backend import TorchAOBackendConfig
    import torch  # noqa: F811 - as in the guide

    def linear_only(module: torch.nn.Module, fqn: str) -> bool:
        return isinstance(module, torch.nn.Linear) and "embed" not in fqn

    config = TorchAOBackendConfig(
        quantization="fp8dq",
        filter_fn=linear_only,
    )
    assert config.filter_fn(torch.nn.Linear(2, 2), "layers.0") and not config.filter_fn(torch.nn.Linear(2, 2), "embed")
    assert config.describe().startswith("quantization=fp8dq,filter_fn=")
    assert config.describe().endswith(".linear_only")


def test_troubleshooting_snippets():
    from aitune.torch.backend import TorchAOBackendConfig

    # Instead of int8wo, try fp8wo
    config = TorchAOBackendConfig(quantization="fp8wo")
    assert config.quantization == "fp8wo"
    config = TorchAOBackendConfig(quantization="fp8dq")
    assert config.quantization == "fp8dq"
