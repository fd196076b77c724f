"""The float32 reference of the noise bound (docs/reference/validation.md#the-noise-bound).

Eager itself computes in the model's precision (fp16, bf16, or fp32 with TF32 convolutions on
CUDA), so "differs from eager" mixes the candidate's rounding with eager's. The noise bound asks
instead how far each of them is from a run of the same module in float32 without TF32: a
candidate that computes the model's own precision may be at most a few times as far as eager
is. That is what accepts a compiled fp32 model whose TF32 convolutions round differently, and
refuses a real error of 1e-2 in a bf16 model, which the class bounds alone allow."""

from __future__ import annotations

import copy
import logging
from typing import Callable, TypeVar

import torch
import torch.utils._pytree as pytree

from aitune.torch.graph.graph_spec import Sample
from aitune.torch.utils.precision_switches import ieee_fp32, tf32_allowed

logger = logging.getLogger("aitune")
T = TypeVar("T")

LOW_PRECISION_DTYPES = (torch.float16, torch.bfloat16)
# The classes whose default tolerance has a noise bound (cpp/core/select/tolerance.cc): the ones
# eager itself computes in. fp32 eager is its own precise reference; int8/fp8 are never native.
NOISE_CLASSES = ("tf32", "fp16", "bf16")


def native_precision_class(module: torch.nn.Module, device: torch.device) -> str:
    """The precision eager computes the module in: fp16/bf16 for half-precision weights, tf32 for
    an fp32 model on CUDA when torch allows TF32, else fp32 (docs/reference/validation.md#precision-classes,
    steps 2-4)."""
    dtypes = {p.dtype for p in module.parameters()}
    if torch.float16 in dtypes:
        return "fp16"
    if torch.bfloat16 in dtypes:
        return "bf16"
    if device.type == "cuda" and tf32_allowed():
        return "tf32"
    return "fp32"


def _upcast(value: T) -> T:
    """Half-precision tensors anywhere in a pytree (dicts, lists, tuples, registered types) as float32."""
    return pytree.tree_map(
        lambda t: t.float() if isinstance(t, torch.Tensor) and t.dtype in LOW_PRECISION_DTYPES else t, value
    )


class PreciseRunner:
    """Runs a module's forward in float32 without TF32. Half-precision parameters and buffers are
    swapped for float32 copies during the call only (torch.nn.utils.stateless), so the module, and
    any compiled program holding pointers to its tensors, is untouched; half-precision inputs are
    upcast. Costs one float32 copy of the half-precision weights while it runs."""

    def __init__(self, module: torch.nn.Module, forward: Callable) -> None:
        self._module = module
        self._forward = forward
        self._upcast_weights = any(t.dtype in LOW_PRECISION_DTYPES for t in [*module.parameters(), *module.buffers()])

    def __call__(self, sample: Sample) -> object:
        args, kwargs = copy.deepcopy((sample.args, sample.kwargs))
        with torch.no_grad(), ieee_fp32():
            if not self._upcast_weights:
                return self._forward(*args, **kwargs)
            from torch.nn.utils.stateless import _reparametrize_module  # what torch.func.functional_call uses

            tensors = {
                name: t.float() if t.dtype in LOW_PRECISION_DTYPES else t
                for name, t in [
                    *self._module.named_parameters(remove_duplicate=False),
                    *self._module.named_buffers(remove_duplicate=False),
                ]
            }
            with _reparametrize_module(self._module, tensors, tie_weights=True):
                return self._forward(*_upcast(args), **_upcast(kwargs))


def precise_runner(module: torch.nn.Module | None, forward: Callable, device: torch.device) -> PreciseRunner | None:
    """A PreciseRunner when the module's native class has a noise bound, else None."""
    if module is None or native_precision_class(module, device) not in NOISE_CLASSES:
        return None
    return PreciseRunner(module, forward)


def log_no_precise_reference(graph_name: str, error: BaseException) -> None:
    logger.info(
        "🔍 numeric check (graph '%s'): no float32 reference (%s: %s); candidates are judged by the class bounds alone",
        graph_name,
        type(error).__name__,
        str(error).strip().splitlines()[0][:200] if str(error).strip() else "",
    )
