"""ait.Module: a transparent proxy around an nn.Module that records, then serves through the
tuned backends (docs/reference/api.md#top-level-names, docs/reference/recording.md#module-states)."""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, NoReturn, Sequence, Union

import torch
import torch.nn.modules.module as _nn_module
import wrapt

from aitune.exceptions import AITuneUserInputError, InvalidUsageError, InvalidValueError
from aitune.torch import module_registry
from aitune.torch.backend.backend import Backend
from aitune.torch.config import config, normalize_device
from aitune.torch.graph.graph_spec import GraphSpec
from aitune.torch.module.graph_tuning import tune_graphs
from aitune.torch.graph.recording import Recorder
from aitune.torch.module.state import ModuleState
from aitune.torch.module.tuned import TunedModule
from aitune.torch.module.tuned_state import TunedState, install_router
from aitune.torch.tune_strategy import FirstWinsStrategy
from aitune.torch.tune_strategy.tune_strategy import TuneStrategy
from aitune.torch.utils.tensors import to_device

if TYPE_CHECKING:
    from aitune.torch.graph.dynamic_shapes import InputPath, ShapeDefinition

# ait.Module(strategies=...): one per graph in order, or keyed by graph, input spec or graph name.
Strategies = Union[Sequence[TuneStrategy], Mapping[object, TuneStrategy]]

logger = logging.getLogger("aitune")


def _default_name(module: torch.nn.Module) -> str:
    cls = type(module)
    return f"{cls.__module__}.{cls.__qualname__}"


class Module(wrapt.CallableObjectProxy):
    """Wraps `module` in place: its instance `forward` becomes a router that keeps the original
    signature, so calls through any reference to the module are intercepted."""

    def __init__(
        self,
        module: torch.nn.Module,
        name: str | None = None,
        strategy: TuneStrategy | None = None,
        strategies: Strategies | None = None,
        dynamic_shapes: Mapping[InputPath, ShapeDefinition] | None = None,
        *,
        fallback_policy: str | None = None,
    ) -> None:
        if isinstance(module, Module):
            module = module.__wrapped__
        if not isinstance(module, torch.nn.Module):
            raise AITuneUserInputError(
                f"Only torch modules are supported. ait.Module got a {type(module).__module__}.{type(module).__qualname__}."
            )
        if strategy is not None and strategies is not None:
            raise ValueError("Only one of strategy or strategies should be provided")
        if fallback_policy is not None and fallback_policy not in ("raise", "eager"):
            raise InvalidValueError(f"fallback_policy must be 'raise' or 'eager', got {fallback_policy!r}")
        super().__init__(module)
        self._self_name = (name or _default_name(module)).replace("/", "_")
        self._self_strategy = strategy
        self._self_strategies = strategies
        self._self_fallback_policy = fallback_policy
        self._self_state = ModuleState.INIT
        self._self_device = next((p.device for p in module.parameters()), torch.device("cpu"))
        original = module.__dict__.get("_aitune_original_forward") or module.forward
        self._self_original_forward = original
        self._self_recorder = Recorder(self._self_name, original, dynamic_shapes)
        self._self_dispatch: Callable | None = None  # the core's dispatch, mirrored for __call__
        self._self_core = TunedState(module, original, mirror=self._mirror_dispatch)
        self._install_router(module, original)
        module_registry.register(self._self_name, self)

    # -- routing ---------------------------------------------------------------------------
    def _install_router(self, module: torch.nn.Module, original: Callable) -> None:
        proxy, core = self, self._self_core

        @functools.wraps(original)
        def forward(*args: object, **kwargs: object) -> object:
            dispatch = core.dispatch
            if dispatch is not None:  # TUNED: straight into the native dispatcher
                return dispatch(*args, **kwargs)
            return proxy._route(args, kwargs)

        install_router(module, original, forward)

    def _route(self, args: tuple, kwargs: dict) -> object:
        state = self._self_state
        if state is ModuleState.INIT:
            self._self_state = state = ModuleState.RECORDING
        if state is ModuleState.RECORDING:
            return self._self_recorder.record(args, kwargs, lambda: self._self_original_forward(*args, **kwargs))
        if state is ModuleState.PASSTHROUGH:
            args, kwargs = to_device((args, kwargs), self._self_device)
            return self._self_original_forward(*args, **kwargs)
        raise RuntimeError(f"Cannot run inference: module '{self._self_name}' is deactivated; call activate() first")

    def _mirror_dispatch(self, dispatch: Callable | None) -> None:
        self._self_dispatch = dispatch

    def __call__(self, *args: object, **kwargs: object) -> object:
        """A tuned module without hooks goes straight to the native dispatcher; anything else
        takes nn.Module.__call__ (hooks, tracing, torch.compile'd modules) and then the router.
        The checks are nn.Module._call_impl's own no-hook test: saves its frames (about 1 us
        of a CUDA-graph replay's budget, docs/reference/dispatch.md#per-call-pipeline)."""
        dispatch = self._self_dispatch
        if dispatch is not None:
            module = self.__wrapped__
            if not (
                module._forward_hooks
                or module._forward_pre_hooks
                or module._backward_hooks
                or module._backward_pre_hooks
                or _nn_module._global_forward_hooks
                or _nn_module._global_forward_pre_hooks
                or _nn_module._global_backward_hooks
                or _nn_module._global_backward_pre_hooks
                or module._compiled_call_impl is not None
                or torch._C._get_tracing_state()
            ):
                return dispatch(*args, **kwargs)
        return self.__wrapped__(*args, **kwargs)

    # -- public surface --------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._self_name

    @property
    def module(self) -> torch.nn.Module:
        return self.__wrapped__

    @property
    def state(self) -> ModuleState:
        return self._self_state

    @property
    def device(self) -> torch.device:
        tuned = self._self_core.tuned
        if tuned is not None and tuned.backends:
            return tuned.backends[0][1].device
        return self._self_device

    @property
    def graph_specs(self) -> list[GraphSpec]:
        return list(self._self_recorder.graphs)

    @property
    def recorder(self) -> Recorder:
        """The recording state: the signature, the graphs and their samples (ait.save writes them)."""
        return self._self_recorder

    @property
    def tuned_module(self) -> TunedModule | None:
        return self._self_core.tuned

    def enable_passthrough(self, force: bool = False) -> None:
        if self._self_state is ModuleState.TUNED and not force:
            raise RuntimeError("Module is already tuned. Use force=True to reset tuned module.")
        self._reset_tuned()
        self._self_state = ModuleState.PASSTHROUGH

    def enable_recording(self, force: bool = False) -> None:
        if self._self_state is ModuleState.TUNED and not force:
            raise RuntimeError("Module is already tuned. Use force=True to reset tuned module.")
        self._reset_tuned()
        self._self_state = ModuleState.RECORDING

    def _reset_tuned(self) -> None:
        self._self_core.reset()

    def activate(self) -> None:
        if self._self_state is ModuleState.PASSTHROUGH:
            return
        if self._self_core.tuned is None:
            raise RuntimeError("Module is not tuned. Cannot activate backends.")
        self._self_core.activate()

    def deactivate(self) -> None:
        self._self_core.deactivate()

    def to_dict(self) -> dict[str, object]:
        if self._self_state in (ModuleState.INIT, ModuleState.RECORDING):
            raise RuntimeError("Module is not tuned. Cannot save state_dict.")
        if self._self_state is ModuleState.PASSTHROUGH:
            return self.__wrapped__.state_dict()
        tuned = self._self_core.tuned
        assert tuned is not None
        return {
            "name": self._self_name,
            "graphs": [{"name": g.name, "backend": b.to_dict()} for g, b in tuned.backends],
        }

    def state_dict(self, *args: object, **kwargs: object) -> dict[str, object]:
        if args or kwargs:  # torch's own signature (destination=..., prefix=...) when nested
            return self.__wrapped__.state_dict(*args, **kwargs)
        return self.to_dict()

    # -- tuning ----------------------------------------------------------------------------
    def _strategies_for(
        self, graphs: list[GraphSpec], strategy: TuneStrategy | None, dry_run: bool
    ) -> list[TuneStrategy | None]:
        if strategy is not None:
            return [strategy] * len(graphs)
        strategies = self._self_strategies
        if isinstance(strategies, (list, tuple)):
            if len(strategies) < len(graphs):
                raise InvalidUsageError(
                    f"Not enough strategies for multi-graph. Expected at least {len(graphs)}, got {len(strategies)}."
                )
            return list(strategies[: len(graphs)])
        if isinstance(strategies, dict):
            chosen, missing = [], []
            for graph in graphs:
                found = next(
                    (s for k, s in strategies.items() if k is graph or k is graph.input_spec or k == graph.name), None
                )
                (chosen if found is not None else missing).append(found if found is not None else graph)
            if missing:
                raise InvalidUsageError(  # AITune's words, which its users match on
                    "The are following errors:\n"
                    + "\n".join(
                        f"missing strategy for graph: {g.display_name} ({g.input_spec.describe_structure()})"
                        for g in missing
                    )
                )
            return chosen
        if self._self_strategy is not None:
            return [self._self_strategy] * len(graphs)
        if dry_run:
            return [None] * len(graphs)
        return [FirstWinsStrategy() for _ in graphs]

    def tune(
        self, device: torch.device | str | None = None, strategy: TuneStrategy | None = None, dry_run: bool = False
    ) -> None:
        name = self._self_name
        graphs = self._self_recorder.graphs
        if self._self_state is ModuleState.TUNED:
            raise ValueError(f"Module: '{name}' has already been tuned. Reset it to do it again.")
        if not graphs:
            raise ValueError(f"Module: '{name}' has not recorded any samples. Cannot tune it.")
        self._self_recorder.check_dynamic_paths_observed()
        device = torch.device(normalize_device(device)) if device is not None else self._self_device
        strategies = self._strategies_for(graphs, strategy, dry_run)
        module = self.__wrapped__
        policy = self._self_fallback_policy or config.fallback_policy
        results_root = Path(config.cache_dir) / "results" if config.reuse_tuning_results else None
        selected = tune_graphs(
            module,
            name,
            graphs,
            strategies,
            device,
            policy,
            self._self_recorder.params,
            build_root=Path(config.cache_dir) / name,
            results_root=results_root,
            dry_run=dry_run,
        )
        if dry_run:
            return
        self._self_core.serve(name, self._self_recorder, selected, policy, config.strict_mode)
        self._self_state = ModuleState.TUNED

    def restore(self, graphs: list[GraphSpec], backends: list[tuple[GraphSpec, Backend]], strict: bool) -> None:
        """Puts a loaded checkpoint's graphs and active backends in place (ait.load): the module
        is TUNED and serves `backends` from now on."""
        policy = self._self_fallback_policy or config.fallback_policy
        self._self_core.restore(self._self_name, self._self_recorder, graphs, backends, policy, strict)
        self._self_state = ModuleState.TUNED

    def __repr__(self) -> str:
        return f"aitune.Module(name={self._self_name!r}, state={self._self_state.name}, module={self.__wrapped__!r})"

    def __reduce_ex__(self, protocol: int) -> NoReturn:
        raise TypeError("ait.Module cannot be pickled; use ait.save (the .ait checkpoint format) instead")
