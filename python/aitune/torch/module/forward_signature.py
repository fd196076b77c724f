"""AITune's `ForwardSignature` (docs/guide.md, "Coming from AITune"): a forward's parameters, to
bind a call to them so that positional and keyword spellings of one call give the same
arguments. aitune records the same triples (name, kind, has_default) in graph/signature.py."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, Mapping

from aitune.torch.graph.signature import KIND_NAMES, forward_params


@dataclasses.dataclass(frozen=True)
class ForwardParameter:
    name: str
    kind: str  # inspect.Parameter kind name, e.g. "POSITIONAL_OR_KEYWORD"
    has_default: bool


@dataclasses.dataclass(frozen=True)
class ForwardSignature:
    parameters: tuple[ForwardParameter, ...]

    @staticmethod
    def from_callable(forward: Callable) -> ForwardSignature:
        """The parameters of `forward` (a bound method's `self` left out)."""
        return ForwardSignature(
            tuple(ForwardParameter(name, KIND_NAMES[kind], default) for name, kind, default in forward_params(forward))
        )

    @staticmethod
    def from_dict(data: Mapping[str, list[dict[str, object]]]) -> ForwardSignature:
        return ForwardSignature(tuple(ForwardParameter(**p) for p in data["parameters"]))

    def to_dict(self) -> dict[str, list[dict[str, object]]]:
        return {"parameters": [dataclasses.asdict(p) for p in self.parameters]}

    def normalize(self, args: tuple[object, ...], kwargs: dict[str, object]) -> inspect.BoundArguments:
        """`args` and `kwargs` bound to the parameters (TypeError when they do not fit)."""
        # A parameter with a default gets a placeholder one: binding needs to know it may be left out.
        signature = inspect.Signature(
            [
                inspect.Parameter(
                    p.name,
                    getattr(inspect.Parameter, p.kind),
                    default=None if p.has_default else inspect.Parameter.empty,
                )
                for p in self.parameters
            ]
        )
        return signature.bind(*args, **kwargs)
