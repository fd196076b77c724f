"""The tuned half of a proxy, shared by ait.Module (module/wrapper.py) and the JIT PatchedModule
(jit/patched_module.py): the instance-forward router, the tuned dispatch, the weights move after
tuning, and restore from a checkpoint (docs/design.md#one-tuned-call).

The two proxies differ in how they record and when they tune; once a module is tuned they serve
the same way, so that part is written once here.
"""

from __future__ import annotations

from typing import Callable

import torch

from aitune.torch.backend.backend import Backend
from aitune.torch.config import config
from aitune.torch.graph.graph_spec import GraphSpec
from aitune.torch.graph.recording import Recorder
from aitune.torch.module.tuned import TunedModule


def install_router(module: torch.nn.Module, original: Callable, router: Callable) -> None:
    """Makes `router` the module's instance `forward` and keeps `original` (the forward backends
    build from) in `_aitune_original_forward`. Instance attributes bypass nn.Module.__setattr__'s
    parameter/module bookkeeping, and calls through any reference to the module are intercepted."""
    object.__setattr__(module, "_aitune_original_forward", original)
    object.__setattr__(module, "forward", router)


def remove_router(module: torch.nn.Module) -> None:
    """Removes both instance attributes: the class forward is used again at no cost."""
    for attr in ("forward", "_aitune_original_forward"):
        if attr in module.__dict__:
            object.__delattr__(module, attr)


class TunedState:
    """The selected backends of one module and the dispatcher that serves them.

    `dispatch` is read on every call by the proxy's router: None means "not serving" (recording,
    passthrough, deactivated), anything else is the native dispatcher to call. It is a slot on a
    small object so that the hot path costs one attribute load."""

    __slots__ = ("module", "original_forward", "tuned", "dispatch", "_mirror")

    def __init__(
        self,
        module: torch.nn.Module,
        original_forward: Callable,
        mirror: Callable[[Callable[..., object] | None], None] | None = None,
    ) -> None:
        """`mirror`, when given, is told every new `dispatch` value: ait.Module keeps a copy on
        the proxy itself, so its __call__ reads one attribute per call as it did before this
        core existed (benchmarks/RESULTS.md, the per-call cost beside 46eec07)."""
        self.module = module
        self.original_forward = original_forward
        self.tuned: TunedModule | None = None
        self.dispatch: Callable[..., object] | None = None
        self._mirror = mirror

    def _set_dispatch(self, dispatch: Callable[..., object] | None) -> None:
        self.dispatch = dispatch
        if self._mirror is not None:
            self._mirror(dispatch)

    def serve(
        self,
        name: str,
        recorder: Recorder,
        backends: list[tuple[GraphSpec, Backend]],
        fallback_policy: str,
        strict: bool,
    ) -> TunedModule:
        """Serves `backends` from now on. When no backend needs the module's weights and no call
        can fall back to the original forward, the weights move to config.device_after_tuning
        (docs/reference/tuning.md#the-tune-call, docs/reference/jit.md TUNED)."""
        self.tuned = TunedModule(name, recorder, backends, self.original_forward, fallback_policy, strict)
        self._set_dispatch(self.tuned.dispatcher)
        if not any(backend.is_jit for _, backend in backends) and fallback_policy == "raise":
            self.module.to(config.device_after_tuning)
        return self.tuned

    def restore(
        self,
        name: str,
        recorder: Recorder,
        graphs: list[GraphSpec],
        backends: list[tuple[GraphSpec, Backend]],
        fallback_policy: str,
        strict: bool,
    ) -> TunedModule:
        """Puts a loaded checkpoint's graphs and active backends in place (ait.load)."""
        recorder.replace_graphs(graphs)
        return self.serve(name, recorder, backends, fallback_policy, strict)

    def activate(self) -> None:
        """Re-activates the backends; their runners were released on deactivation, so the
        dispatcher is rebuilt over the new ones."""
        assert self.tuned is not None
        self.tuned.activate()
        self._set_dispatch(self.tuned.dispatcher)

    def deactivate(self) -> None:
        """Releases the backends' runners; the tuned selection is kept (activate() serves it again)."""
        if self.tuned is not None:
            self.tuned.deactivate()
            self._set_dispatch(None)

    def reset(self) -> None:
        """Forgets the tuned selection (after releasing it)."""
        self.deactivate()
        self.tuned = None
        self._set_dispatch(None)
