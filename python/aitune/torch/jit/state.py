"""Process-wide state of JIT tuning (docs/reference/jit.md): module states, the stack of patched modules whose
forward is running (it decides parent and child), the tuning suspension, the deferred trigger,
the tunable heads and the event history."""

from __future__ import annotations

import contextlib
import enum
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterator, Protocol, Sequence

if TYPE_CHECKING:
    import torch

    from aitune.torch.backend.backend import Backend
    from aitune.torch.graph.graph_spec import GraphSpec
    from aitune.torch.graph.recording import Recorder
    from aitune.torch.module.tuned import TunedModule


class JITModuleState(enum.Enum):
    INIT = "init"
    RECORDING = "recording"
    TUNED = "tuned"
    EAGER = "eager"
    SKIPPED = "skipped"
    DETACHED = "detached"


class Patched(Protocol):
    """What the JIT runtime (this module and jit_tuning.py) uses of a patched module. The class,
    jit/patched_module.py's PatchedModule, imports both; declaring its face here means neither
    of them has to name it back."""

    module: torch.nn.Module
    original_forward: Callable[..., object]
    name: str
    state: JITModuleState
    reason: str  # why EAGER / SKIPPED / unpatched, for the exit diagnostics
    num_calls: int
    recorder: Recorder | None

    @property
    def children(self) -> Sequence[Patched]: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def tuned(self) -> TunedModule | None: ...

    def route(self) -> None: ...

    def unroute(self) -> None: ...

    def detach(self, reason: str) -> None: ...

    def mark_tuned(
        self, backends: list[tuple[GraphSpec, Backend]], device: torch.device, fallback_policy: str
    ) -> None: ...

    def mark_dry_tuned(self) -> None: ...

    def eager_trigger_ready(self) -> bool: ...


# The instance attribute that holds a patched module's PatchedModule. It lives here, below both
# patched_module and jit_tuning, so that neither has to import the other to find a module's state.
_ATTR = "_aitune_patched"


def get_patched(module: torch.nn.Module) -> Patched | None:
    """The PatchedModule attached to `module`, or None when it is not (or no longer) patched."""
    return module.__dict__.get(_ATTR)


def set_patched(module: torch.nn.Module, patched: Patched) -> None:
    # object.__setattr__ bypasses nn.Module.__setattr__'s submodule bookkeeping.
    object.__setattr__(module, _ATTR, patched)


def clear_patched(module: torch.nn.Module) -> None:
    module.__dict__.pop(_ATTR, None)


class _Runtime:
    def __init__(self) -> None:
        self.local = threading.local()  # .stack: patched modules whose forward runs on this thread
        self.suspended = 0  # > 0 while tuning: routers pass through and new modules stay plain
        self.deferred_requested = False
        self.heads: list[Patched] = []  # tunable heads in discovery order
        self.names: set[str] = set()
        self.history: list[tuple[float, str, str]] = []  # (time, module name, event)
        self.lock = threading.RLock()  # first-call decisions and tuning are serialised

    def stack(self) -> list[Patched]:
        stack = getattr(self.local, "stack", None)
        if stack is None:
            stack = self.local.stack = []
        return stack

    def event(self, name: str, text: str) -> None:
        self.history.append((time.time(), name, text))

    def unique_name(self, base: str) -> str:
        name, index = base, 0
        while name in self.names:
            index += 1
            name = f"{base}.{index}"
        self.names.add(name)
        return name

    def reset(self) -> None:
        """Forgets every head and event (tests; a fresh JIT session)."""
        self.deferred_requested = False
        self.heads.clear()
        self.names.clear()
        self.history.clear()


runtime = _Runtime()


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """While a module is tuned, its builds and measurements call forwards and construct modules:
    none of them may be recorded, patched or traced through a router."""
    runtime.suspended += 1
    try:
        yield
    finally:
        runtime.suspended -= 1
