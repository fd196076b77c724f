"""The numeric check refuses a real error in every precision class it can run here, and the noise
bound is what refuses it where the class bounds alone would not (docs/reference/validation.md#the-noise-bound).

The candidate computes the model with one layer's weights off by a relative 1e-2 (each weight
times 1 + 1e-2 * N(0, 1)). On the CPU the classes are fp32, fp16 and bf16 (tf32 needs CUDA:
tests/gpu/test_numeric_on_cuda.py)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
import torch

import aitune.torch as ait
from aitune.torch.task.precise_reference import PreciseRunner, native_precision_class
from aitune.torch.validation import DEFAULT_TOLERANCES, NumericTolerance, PrecisionClass
from perturbed_backend import PerturbedBackend, PerturbedConfig


def _mlp(dtype: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 128))
    return model.eval().to(dtype)


def _tune(dtype: torch.dtype, config: PerturbedConfig, tolerance: Any = None) -> ait.Module:
    strategy = ait.OneBackendStrategy(PerturbedBackend(config)).enable_performance_validation(False)
    strategy.enable_find_max_batch_size(False)
    if tolerance is not None:
        strategy.set_tolerance(tolerance)
    m = ait.Module(_mlp(dtype), "mlp", strategy=strategy)
    g = torch.Generator().manual_seed(1)
    ait.tune(m, [torch.randn(64, generator=g).to(dtype) for _ in range(8)], batch_sizes=[8], device="cpu")
    return m


def _refusals(log: Any) -> list[str]:
    return [r.getMessage() for r in log.records if "CorrectnessNumericError" in r.getMessage()]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
def test_a_relative_weight_error_of_1e_2_is_refused(dtype, aitune_log):
    # OneBackendStrategy's correctness error ends the module's tuning: ait.tune keeps the original.
    m = _tune(dtype, PerturbedConfig(relative_error=1e-2))
    assert m.state.name != "TUNED"
    assert any("differs from eager reference" in line for line in _refusals(aitune_log))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
def test_a_correct_candidate_passes_in_the_same_class(dtype):
    m = _tune(dtype, PerturbedConfig(exact_last_layer=True))  # more exact than eager: never refused
    assert m.state.name == "TUNED"


def test_in_bf16_the_noise_bound_is_what_refuses_it(aitune_log):
    # The class bounds alone (the bf16 defaults without the noise bound) let the error through ...
    no_noise = dataclasses.replace(DEFAULT_TOLERANCES[PrecisionClass.BF16], max_noise_ratio=0.0, noise_floor=0.0)
    assert _tune(torch.bfloat16, PerturbedConfig(relative_error=1e-2), {"bf16": no_noise}).state.name == "TUNED"
    assert _refusals(aitune_log) == []
    # ... and with them the message names the float32 reference.
    assert _tune(torch.bfloat16, PerturbedConfig(relative_error=1e-2)).state.name != "TUNED"
    [refusal, *_] = _refusals(aitune_log)
    assert re.search(r"against the float32 reference its rel_l2=.* eager's own", refusal), refusal


def test_user_tolerances_have_no_noise_bound_unless_they_ask_for_it():
    assert NumericTolerance(1e-2, 1e-2, 1e-2, 1e-2).max_noise_ratio == 0.0
    assert DEFAULT_TOLERANCES[PrecisionClass.BF16].max_noise_ratio == 2.0
    assert DEFAULT_TOLERANCES[PrecisionClass.FP32].max_noise_ratio == 0.0
    with pytest.raises(ValueError, match="max_noise_ratio must be a non-negative number"):
        NumericTolerance(1e-2, 1e-2, 1e-2, 1e-2, max_noise_ratio=-1)


def test_the_precise_run_leaves_the_module_alone():
    model = _mlp(torch.bfloat16)
    weights = {name: (p.data_ptr(), p.dtype) for name, p in model.named_parameters()}
    assert native_precision_class(model, torch.device("cpu")) == "bf16"
    x = torch.randn(2, 64).to(torch.bfloat16)
    sample = type("Sample", (), {"args": (x,), "kwargs": {}})()
    out = PreciseRunner(model, model.forward)(sample)
    assert out.dtype == torch.float32  # computed in float32 ...
    exact = _mlp(torch.float32)  # ... from the same weights, upcast
    with torch.no_grad():
        exact.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
        torch.testing.assert_close(out, exact(x.float()), atol=1e-5, rtol=1e-5)
    assert {name: (p.data_ptr(), p.dtype) for name, p in model.named_parameters()} == weights
