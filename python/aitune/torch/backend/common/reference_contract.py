"""Backends written to AITune's contract (docs/guide.md, "Coming from AITune").

AITune's `Backend._build(module, graph_spec, data, cache_dir)` has no device parameter (the
backend reads `self.device`, set before the call) and `_deploy()` none either; aitune's own
backends take the device explicitly. A class's signatures are read once, when it is defined, so
a backend copied from AITune's documentation builds and deploys unchanged. AITune backends also
keep their own checkpoint state (`to_dict()` / classmethod `from_dict(module, state_dict)`),
which ait.save stores without pickle (checkpoint/backend_state.py).

AITune's backends also call two helpers of its base class, `self._set_device(device)` and
`with self._track_build_step(step) as result:`; they are defined here and Backend binds them
under those names (its own lifecycle does not use them)."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import inspect
from typing import Any, Callable, Iterator, Protocol

import torch


class ExecutionMode(str, enum.Enum):
    """AITune 0.6 asks each backend to declare its execution topologies; aitune accepts the
    declaration and runs every backend on one device."""

    SINGLE_GPU = "single_gpu"
    MULTI_GPU = "multi_gpu"


class BuildMode(str, enum.Enum):
    """AITune 0.6's declaration of when a backend builds; informational in aitune (`is_jit` is what
    decides whether the original weights are kept)."""

    AHEAD_OF_TIME = "ahead_of_time"
    JUST_IN_TIME = "just_in_time"


def _positional_count(method: Callable) -> int | None:
    """Positional parameters after `self`, or None when the method takes *args (either form)."""
    try:
        parameters = list(inspect.signature(method).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)


@dataclasses.dataclass(frozen=True)
class Contract:
    """How the lifecycle calls one backend class."""

    build_takes_device: bool = True  # _build(module, graph_spec, data, device, cache_dir)
    deploy_takes_device: bool = True  # _deploy(device)
    own_state: bool = False  # to_dict() / from_dict(module, state_dict) carry the checkpoint state

    @classmethod
    def of(cls, backend_class: type) -> Contract:
        build = getattr(backend_class, "_build", None)
        deploy = getattr(backend_class, "_deploy", None)
        return cls(
            build_takes_device=_positional_count(build) != 4 if build is not None else True,
            deploy_takes_device=_positional_count(deploy) != 0 if deploy is not None else True,
            own_state=callable(getattr(backend_class, "from_dict", None)),
        )


class _DeviceHolder(Protocol):
    _device: torch.device | None


def set_device(backend: _DeviceHolder, device: torch.device | str | None) -> None:
    """AITune's `Backend._set_device`: the device the backend serves on."""
    if device is not None:
        backend._device = torch.device(device)
    if backend._device is None:
        raise ValueError("Device is not set. Please set the device before deploying.")


@contextlib.contextmanager
def track_build_step(backend: object, step: Any) -> Iterator[dict[str, Any]]:
    """AITune's `Backend._track_build_step`: records one build step (`with
    self._track_build_step(step) as result:`) and whether it succeeded, in `backend._build_results`."""
    result: dict[str, Any] = {"step": step}
    steps = backend.__dict__.setdefault("_build_results", [])
    try:
        yield result
        result["success"] = True
    except Exception:
        result["success"] = False
        raise
    finally:
        steps.append(result)
