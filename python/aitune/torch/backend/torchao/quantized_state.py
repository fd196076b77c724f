"""The quantized copy of a module, what it selected, and a digest of its quantized weights
(docs/reference/checkpoint.md#torchao-graphs).

A checkpoint keeps the original weights and the config; loading quantizes them again and compares
this digest with the one saved, so a torchao that quantizes differently (another version, another
device type) is refused instead of served.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import types
from typing import Any, Callable, Iterator

import torch

_ROUTER_ATTRIBUTES = ("forward", "_aitune_original_forward")  # aitune's instance attributes (module/tuned_state.py)


class SelectedModules:
    """A `filter_fn` that selects modules by their qualified names. A saved config holds this in
    place of the user's function (which cannot be saved without pickle): the names the function
    selected when the backend was built."""

    def __init__(self, names: Any) -> None:
        if isinstance(names, (str, bytes)) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"SelectedModules takes a list of module names (str), got {names!r}"[:300])
        self.names = tuple(sorted(set(names)))
        self._set = frozenset(self.names)

    def __call__(self, module: torch.nn.Module, fqn: str) -> bool:
        return fqn in self._set

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SelectedModules) and other.names == self.names

    def __hash__(self) -> int:
        return hash(self.names)

    def __repr__(self) -> str:
        return f"SelectedModules({len(self.names)} modules)"


class RecordingFilter:
    """Wraps a user's filter_fn and keeps the names it selected (torchao calls it once per module)."""

    def __init__(self, fn: Callable[[torch.nn.Module, str], bool]) -> None:
        self.fn = fn
        self.selected: list[str] = []

    def __call__(self, module: torch.nn.Module, fqn: str) -> bool:
        chosen = bool(self.fn(module, fqn))
        if chosen:
            self.selected.append(fqn)
        return chosen


def structural_copy(module: torch.nn.Module) -> tuple[torch.nn.Module, Callable]:
    """A copy of the module tree that shares every tensor with `module`, and the forward to compile.

    torchao's quantize_ swaps a selected Linear's weight for a quantized tensor; on this copy the
    swap leaves the original module (which eager fallback and the checkpoint need) untouched, while
    embeddings, norms and biases are not duplicated as a deepcopy would. aitune's router attributes
    on the root are dropped and the original forward is bound to the copy.
    """
    memo: dict[int, torch.nn.Module] = {}

    def clone(m: torch.nn.Module) -> torch.nn.Module:
        if id(m) in memo:  # a submodule used twice stays shared
            return memo[id(m)]
        c = copy.copy(m)
        memo[id(m)] = c
        c._parameters = type(m._parameters)(m._parameters)
        c._buffers = type(m._buffers)(m._buffers)
        c._non_persistent_buffers_set = set(m._non_persistent_buffers_set)
        c._modules = type(m._modules)((k, clone(v) if v is not None else None) for k, v in m._modules.items())
        return c

    root = clone(module)
    original = module.__dict__.get("_aitune_original_forward")
    for attr in _ROUTER_ATTRIBUTES:
        root.__dict__.pop(attr, None)
    if isinstance(original, types.MethodType) and original.__self__ is module:
        forward: Callable = types.MethodType(original.__func__, root)
    elif original is not None:
        forward = original
    else:
        forward = root.forward
    return root, forward


def quantized_parameters(module: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """The parameters torchao replaced by its tensor subclasses, by qualified name."""
    return sorted(
        (name, p) for name, p in module.named_parameters(remove_duplicate=True) if hasattr(p, "__tensor_flatten__")
    )


def _plain_leaves(path: str, tensor: Any, depth: int = 0) -> Iterator[tuple[str, str | None, torch.Tensor | None]]:
    """(path, subclass name, None) for a tensor subclass and then its inner tensors; (path, None,
    tensor) for a plain tensor."""
    if depth > 8 or not hasattr(tensor, "__tensor_flatten__"):
        yield path, None, tensor
        return
    names, _ = tensor.__tensor_flatten__()
    yield path, type(tensor).__name__, None
    for name in names:
        yield from _plain_leaves(f"{path}.{name}", getattr(tensor, name), depth + 1)


@dataclasses.dataclass(frozen=True)
class QuantizedDigest:
    """SHA-256 over the quantized parameters' inner tensors (names, dtypes, shapes and bytes)."""

    sha256: str
    modules: tuple[str, ...]  # the quantized modules' qualified names
    num_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "modules": len(self.modules), "bytes": self.num_bytes}


def digest(module: torch.nn.Module) -> QuantizedDigest:
    h = hashlib.sha256()
    total = 0
    entries = quantized_parameters(module)
    for name, parameter in entries:
        for path, subclass, tensor in _plain_leaves(name, parameter):
            if not isinstance(tensor, torch.Tensor):
                h.update(f"{path}:{subclass or type(tensor).__name__}\n".encode())
                continue
            data = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
            h.update(f"{path}:{tensor.dtype}:{list(tensor.shape)}\n".encode())
            h.update(memoryview(data.numpy()))
            total += data.numel()
    return QuantizedDigest(h.hexdigest(), module_names(entries), total)


def module_names(entries: list[tuple[str, torch.Tensor]]) -> tuple[str, ...]:
    """The qualified names of the modules that hold the given parameters."""
    return tuple(name.rsplit(".", 1)[0] if "." in name else "" for name, _ in entries)
