"""Bad input: every error names the input, what was expected and what was given
(docs/reference/recording.md#explicit-dynamic-shapes, docs/reference/tuning.md#the-tune-call,
docs/reference/dispatch.md, docs/reference/errors.md)."""

from __future__ import annotations

import pytest
import torch

import aitune.torch as ait
from aitune.exceptions import AITuneError, AITuneUserInputError, GraphNotFoundError, ProfileShapeError
from aitune.torch import BatchDim, DynamicDim
from aitune.torch.backend import TorchEagerBackend
from aitune.torch.config import config
from aitune.torch.module.state import ModuleState


class ImageNet(torch.nn.Module):
    def forward(self, x):
        return x.mean(dim=(-1, -2))


class Pair(torch.nn.Module):
    def forward(self, x, z=None):
        return x * 2


class Linear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(5, 2)

    def forward(self, x):
        return self.linear(x)


SPATIAL = {"x": (BatchDim("batch", 1, 8), 3, DynamicDim("spatial", 4, 16), DynamicDim("spatial", 4, 16))}


def _declared_module():
    return ait.Module(ImageNet(), "m", dynamic_shapes=SPATIAL)


def _call(m, *args, **kwargs):
    with torch.no_grad():
        return m(*args, **kwargs)


def _tuned_linear(**module_kwargs):
    torch.manual_seed(0)
    model = Linear().eval()
    m = ait.Module(model, "m", strategy=ait.OneBackendStrategy(TorchEagerBackend()), **module_kwargs)
    ait.tune(m, [torch.randn(5) for _ in range(2)], batch_sizes=[1, 2], device="cpu")
    assert m.state is ModuleState.TUNED
    return m, model


# -- wrapping -------------------------------------------------------------------------------


@pytest.mark.parametrize("obj", [object(), lambda x: x, torch.ones(2)])
def test_wrapping_a_non_module(obj):
    with pytest.raises(AITuneUserInputError) as info:
        ait.Module(obj)
    assert str(info.value).startswith("Only torch modules are supported.")


# -- declared dynamic shapes: on every recorded call ---------------------------------------


def test_declared_shape_accepts_a_valid_call():
    m = _declared_module()
    _call(m, torch.ones(2, 3, 8, 8))
    assert len(m.graph_specs) == 1


def test_declared_shape_wrong_rank():
    m = _declared_module()
    with pytest.raises(AITuneUserInputError) as info:
        _call(m, torch.ones(2, 3, 8))
    assert str(info.value).startswith("Dynamic shape for module 'm', input 'x' expects rank 4, got shape [2, 3, 8]")
    assert m.graph_specs == []  # the rejected call is not recorded


def test_declared_shape_static_axis_mismatch():
    m = _declared_module()
    with pytest.raises(AITuneUserInputError) as info:
        _call(m, torch.ones(2, 4, 8, 8))
    message = str(info.value)
    assert message.startswith("Dynamic shape for module 'm', input 'x' axis 1 expects size 3, got 4")
    assert "[2, 4, 8, 8]" in message


@pytest.mark.parametrize(
    "shape, expected",
    [
        ((2, 3, 20, 20), "expects 'spatial' between 4 and 16, got 20"),
        ((2, 3, 2, 2), "expects 'spatial' between 4 and 16, got 2"),
        ((9, 3, 8, 8), "expects 'batch' between 1 and 8, got 9"),
    ],
)
def test_declared_shape_out_of_range(shape, expected):
    m = _declared_module()
    with pytest.raises(AITuneUserInputError) as info:
        _call(m, torch.ones(*shape))
    message = str(info.value)
    assert message.startswith("Dynamic shape for module 'm', input 'x' axis ")
    assert expected in message
    assert str(list(shape)) in message


def test_declared_shape_unequal_shared_dim():
    m = _declared_module()
    with pytest.raises(AITuneUserInputError) as info:
        _call(m, torch.ones(2, 3, 8, 10))
    message = str(info.value)
    assert message.startswith("Dynamic dimension 'spatial'")
    assert "must have the same size across inputs" in message
    assert "8" in message and "10" in message and "'x'" in message


def test_declared_shared_dim_across_two_inputs():
    m = ait.Module(Pair(), "m", dynamic_shapes={"x": (DynamicDim("n", 1, 8),), "z": (DynamicDim("n", 1, 8),)})
    _call(m, torch.ones(3), z=torch.ones(3))
    with pytest.raises(AITuneUserInputError) as info:
        _call(m, torch.ones(3), z=torch.ones(4))
    message = str(info.value)
    assert "Dynamic dimension 'n'" in message and "must have the same size across inputs" in message
    assert "'x'" in message and "'z'" in message


def test_declared_path_never_observed_fails_at_tune_time(cpu_eager_strategy):
    m = ait.Module(
        Pair(),
        "m",
        strategy=cpu_eager_strategy,
        dynamic_shapes={"x": (BatchDim("batch", 1, 8), 3), "z": (DynamicDim("q", 1, 4),)},
    )
    _call(m, torch.ones(2, 3))
    with pytest.raises(AITuneUserInputError) as info:
        m.tune(device="cpu")
    assert str(info.value) == "Dynamic shape paths for module 'm' did not match any recorded tensor inputs: ['z']"
    assert m.state is ModuleState.RECORDING


# -- declared dynamic shapes: at construction ----------------------------------------------


def test_dim_min_must_be_below_max():
    with pytest.raises(AITuneUserInputError) as info:
        DynamicDim("d", 8, 8)
    assert str(info.value) == "Dynamic dimension 'd' must satisfy min < max, got min=8, max=8."


def test_dim_opt_must_be_in_range():
    with pytest.raises(AITuneUserInputError) as info:
        DynamicDim("d", 1, 8, opt=9)
    message = str(info.value)
    assert message.startswith("Dynamic dimension 'd' must satisfy min <= opt <= max")
    assert "opt=9" in message


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("", 1, 8), "name"),
        (("d", 0, 8), "positive"),
        (("d", 1.5, 8), "int"),
        (("d", True, 8), "int"),
    ],
)
def test_dim_bad_fields(args, fragment):
    with pytest.raises(AITuneUserInputError) as info:
        BatchDim(*args)
    assert fragment in str(info.value)


def test_valid_dims_are_frozen():
    dim = DynamicDim("d", 1, 8, opt=4)
    assert (dim.name, dim.min, dim.max, dim.opt) == ("d", 1, 8, 4)
    with pytest.raises(Exception):
        dim.min = 2  # type: ignore[misc]
    assert BatchDim("b", 1, 8).opt is None


@pytest.mark.parametrize(
    "shapes",
    [
        {"x": (DynamicDim("s", 1, 8), DynamicDim("s", 1, 9))},
        {"x": (DynamicDim("s", 1, 8),), "z": (BatchDim("s", 1, 8),)},
    ],
    ids=["different-bounds", "different-type"],
)
def test_conflicting_definitions(shapes):
    with pytest.raises(AITuneUserInputError) as info:
        ait.Module(Pair(), "m", dynamic_shapes=shapes)
    message = str(info.value)
    assert message.startswith("Dynamic dimension 's' has conflicting definitions: ")
    assert " and " in message


def test_negative_static_size():
    with pytest.raises(AITuneUserInputError) as info:
        ait.Module(Pair(), "m", dynamic_shapes={"x": (2, -1)})
    assert "'x'" in str(info.value) and "-1" in str(info.value)


# -- unknown graph at run time -------------------------------------------------------------


def test_unseen_graph_raises_graph_not_found():
    m, _ = _tuned_linear()
    with pytest.raises(GraphNotFoundError) as info:
        _call(m, torch.ones(2, 7, 5))
    error = info.value
    assert isinstance(error, RuntimeError) and isinstance(error, AITuneError)
    message = str(error)
    assert message.startswith("No backend found for a graph with metadata: ")
    assert "[2, 7, 5]" in message  # the call's structure
    assert "['batch0', 5]" in message  # the tuned graph's structure
    assert "'m'" in message


def _fallback_warnings(caplog):
    return [
        r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "falling back to eager" in r.getMessage()
    ]


def test_unseen_graph_with_eager_fallback_warns_once_per_key(aitune_log):
    m, model = _tuned_linear(fallback_policy="eager")
    first, second = torch.randn(2, 7, 5), torch.randn(4, 1, 5)  # same key: rank 3
    with torch.no_grad():
        assert torch.equal(_call(m, first), model.linear(first))
        assert torch.equal(_call(m, second), model.linear(second))
    warnings = _fallback_warnings(aitune_log)
    assert len(warnings) == 1
    assert warnings[0].startswith("⚠️ No backend found for a graph with metadata: ")
    assert "[2, 7, 5]" in warnings[0]
    assert warnings[0].endswith("falling back to eager for module 'm'")
    other = torch.randn(1, 1, 1, 5)  # another unknown key warns again
    with torch.no_grad():
        assert torch.equal(_call(m, other), model.linear(other))
    assert len(_fallback_warnings(aitune_log)) == 2
    with torch.no_grad():
        assert torch.equal(_call(m, torch.ones(3, 5)), model.linear(torch.ones(3, 5)))  # tuned graph still served
    assert len(_fallback_warnings(aitune_log)) == 2


def test_eager_fallback_from_config_is_captured_at_tune_time():
    config.fallback_policy = "eager"
    m, model = _tuned_linear()
    config.fallback_policy = "raise"
    x = torch.randn(2, 7, 5)
    with torch.no_grad():
        assert torch.equal(_call(m, x), model.linear(x))


# -- input check before execution ---------------------------------------------------------


def test_wrong_dtype_raises_profile_shape_error():
    m, _ = _tuned_linear()
    with pytest.raises(ProfileShapeError) as info:
        _call(m, torch.ones(2, 5, dtype=torch.float16))
    assert isinstance(info.value, RuntimeError)
    assert str(info.value).startswith(
        "Input dtype torch.float16 does not match tuned dtype torch.float32 for input 'x'"
    )


# -- ait.tune arguments --------------------------------------------------------------------


@pytest.mark.parametrize("device", ["gpu", "cuda:128", "cuda:-1", "cuda0", ""])
def test_bad_device_string(device):
    with pytest.raises(AITuneUserInputError) as info:
        ait.tune(lambda x: None, [torch.ones(1)], device=device)
    assert repr(device) in str(info.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message; CUDA is available here")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:3"])
def test_cuda_device_without_cuda(device):
    with pytest.raises(RuntimeError) as info:
        ait.tune(lambda x: None, [torch.ones(1)], device=device)
    assert str(info.value) == "CUDA is not available. Please check your CUDA installation."


@pytest.mark.parametrize("batch_sizes", [[0], [1, -2], [1.5]])
def test_bad_batch_sizes(batch_sizes):
    with pytest.raises(AITuneUserInputError) as info:
        ait.tune(lambda x: None, [torch.ones(1)], batch_sizes=batch_sizes, device="cpu")
    assert str(batch_sizes) in str(info.value)


def test_not_enough_strategies(cpu_eager_strategy):
    m = ait.Module(Linear().eval(), "m", strategies=[cpu_eager_strategy])
    _call(m, torch.ones(1, 5))
    _call(m, torch.ones(1, 2, 5))
    assert len(m.graph_specs) == 2
    with pytest.raises(RuntimeError) as info:  # AITune's type; also an AITuneUserInputError
        m.tune(device="cpu")
    assert isinstance(info.value, AITuneUserInputError)
    assert str(info.value) == "Not enough strategies for multi-graph. Expected at least 2, got 1."
    assert m.state is ModuleState.RECORDING


def test_bad_fallback_policy():
    with pytest.raises(AITuneUserInputError) as info:
        ait.Module(Linear(), "m", fallback_policy="ignore")
    assert "'ignore'" in str(info.value)


def test_no_grad_missing_for_recording_copy_is_explained():
    """Deep copies of non-leaf tensors that require grad fail; the error says what to do."""
    m = ait.Module(Linear(), "m")
    x = torch.ones(1, 5, requires_grad=True) * 2  # non-leaf: deepcopy raises under autograd
    with pytest.raises(RuntimeError) as info:
        m(x)
    assert str(info.value).startswith("Cannot copy model inputs. Model is not in no_grad mode. Tip:")
    assert "torch.no_grad()" in str(info.value)
