"""The program TorchTensorRTAotBackend exports takes the graph's tensors alone (docs/guide.md,
Torch-TensorRT backends).

torch.export keeps a placeholder for every argument of the call, constants included, and
Torch-TensorRT 2.11 saves a compiled program (retrace=False) by declaring every placeholder a
tensor: a None, float, bool or str argument then fails in torch's serializer (a KeyError naming
it). So the exported module is an adapter whose parameters are the graph's tensor inputs, in graph
order, and which calls the module's forward with the non-tensor values of the recorded call. That
is what torch.export does with them anyway (it specialises constants), and a graph's non-tensor
values are part of its identity (config.strict_mode), so every call served by the graph has them.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import torch

from aitune.torch.backend.common.jit_warmup import original_forward
from aitune.torch.graph.tree import canonical_call, map_tensors


def _identifier(text: str) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in text).strip("_") or "input"
    return f"input_{cleaned}" if cleaned[0].isdigit() else cleaned


def parameter_names(paths: list[tuple]) -> list[str]:
    """`input_<path>` per tensor, made unique identifiers (the exported placeholders' names)."""
    names: list[str] = []
    for path in paths:
        name = _identifier("input_" + "_".join(str(part) for part in path))
        while name in names:
            name += "_"
        names.append(name)
    return names


class _TensorInputsAdapter(torch.nn.Module):
    """Holds the module (its parameters and buffers become the program's) and calls its original
    forward with the recorded call's structure and non-tensor values, and the given tensors."""

    def __init__(
        self, module: torch.nn.Module, forward: Callable, params: list, template: dict, paths: list[tuple]
    ) -> None:
        super().__init__()
        self.module = module
        # Plain attributes, not registered: the template's tensors are placeholders for the inputs.
        object.__setattr__(self, "_aitune_forward", forward)
        object.__setattr__(self, "_aitune_template", template)
        object.__setattr__(self, "_aitune_params", params)
        object.__setattr__(self, "_aitune_paths", paths)

    def call_with(self, tensors: tuple) -> Any:
        by_path = dict(zip(self._aitune_paths, tensors))
        bound = map_tensors(self._aitune_template, lambda path, _tensor: by_path[path])
        args, kwargs = canonical_call(self._aitune_params, bound)
        return self._aitune_forward(*args, **kwargs)


def make_tensor_inputs_adapter(
    module: torch.nn.Module, params: list, template: dict, paths: list[tuple]
) -> torch.nn.Module:
    """An nn.Module whose forward takes one tensor per path of `paths` (named as parameter_names
    says) and runs `module`'s original forward on `template` (the call bound to the signature)
    with those tensors in place."""
    forward = original_forward(module)

    def adapter_forward(self: Any, *tensors: Any) -> Any:
        return self.call_with(tensors)

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    parameters += [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in parameter_names(paths)]
    adapter_forward.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    cls = type(f"AITuneTensorInputs_{type(module).__name__}", (_TensorInputsAdapter,), {"forward": adapter_forward})
    return cls(module, forward, params, template, paths)


def graph_tensors(bound: dict, paths: list[tuple]) -> list[torch.Tensor]:
    """The tensors of a bound call, in the order of `paths` (the graph's tensor inputs)."""
    found: dict[tuple, torch.Tensor] = {}

    def collect(path: tuple, tensor: torch.Tensor) -> torch.Tensor:
        found[path] = tensor
        return tensor

    map_tensors(bound, collect)
    return [found[path] for path in paths]
