"""PatchedModule (docs/reference/jit.md): the JIT state machine attached to every patched nn.Module.

The module's instance `forward` becomes a `_Router` (it keeps the original signature), and
`_aitune_original_forward` holds the class forward that backends build from, as for ait.Module.
Unpatching removes both instance attributes, so the class forward is used again at no cost.
"""

from __future__ import annotations

import copy
import inspect
import logging
import time
from typing import Callable, ClassVar

import torch

from aitune.exceptions import GraphBreakException  # noqa: F401 - AITune imports it from this module
from aitune.torch.backend.backend import Backend
from aitune.torch.config import config
from aitune.torch.jit.config import JITMode
from aitune.torch.jit.config import config as jit_config
from aitune.torch.jit.inspection import CallStats, timed_call
from aitune.torch.jit.jit_tuning import tune_patched
from aitune.torch.jit.state import JITModuleState, clear_patched, get_patched, runtime, set_patched
from aitune.torch.graph.recording import Recorder
from aitune.torch.graph.graph_spec import GraphSpec
from aitune.torch.module.tuned import TunedModule
from aitune.torch.module.tuned_state import TunedState, install_router, remove_router

logger = logging.getLogger("aitune")
# print_hierarchy()'s first line, as in AITune (docs/guide.md, "Coming from AITune").
PRINT_HIERARCHY_HEADER = "JIT Tuning Hierarchy:"
PRINT_HIERARCHY_NO_MODULES_HEADER = "No modules in hierarchy"
# The state markers of AITune's hierarchy lines.
_STATE_MARKS = {
    JITModuleState.INIT: "⏳",
    JITModuleState.RECORDING: "🔴",
    JITModuleState.TUNED: "🎯",
    JITModuleState.EAGER: "⚠️",
    JITModuleState.SKIPPED: "🚫",
    JITModuleState.DETACHED: "☑️",
}


class _Router:
    """The instance `forward` of a patched module. A callable object rather than a closure, so
    that `copy.deepcopy(module)` gives the copy its own (fresh) PatchedModule."""

    def __init__(self, patched: PatchedModule, original: Callable) -> None:
        self.patched = patched
        self.core = patched.core
        self.__wrapped__ = original
        self.__name__ = getattr(original, "__name__", "forward")
        self.__doc__ = getattr(original, "__doc__", None)
        try:
            self.__signature__ = inspect.signature(original)  # e.g. HF generate() inspects forward
        except (TypeError, ValueError):
            pass

    def __call__(self, *args: object, **kwargs: object) -> object:
        dispatch = self.core.dispatch
        if dispatch is not None:  # TUNED: straight into the native dispatcher
            return dispatch(*args, **kwargs)
        return self.patched._route(args, kwargs)

    def __reduce__(self) -> tuple:
        # Pickling a patched module (torch.save(model)) stores a plain forward, not JIT state.
        return _class_forward, (self.patched.module,)


def _class_forward(module: torch.nn.Module) -> Callable:
    return type(module).forward.__get__(module)


def _none() -> None:
    return None


def _tracing() -> bool:
    """True while torch.compile / torch.export or torch.fx trace through a forward: the call is
    not a real one and must be neither recorded nor routed."""
    return torch.compiler.is_compiling() or _is_fx_symbolic_tracing()


# Newer torch names fx's own tracing apart (is_fx_tracing also covers torch.export and warns).
_is_fx_symbolic_tracing = getattr(
    torch.fx._symbolic_trace, "is_fx_symbolic_tracing", torch.fx._symbolic_trace.is_fx_tracing
)


def attach(module: torch.nn.Module) -> PatchedModule:
    """Patches `module` (called from the wrapped nn.Module.__init__)."""
    existing = get_patched(module)
    return existing if existing is not None else PatchedModule(module)


class PatchedModule:
    """States INIT → RECORDING → TUNED | EAGER; SKIPPED; DETACHED (docs/reference/jit.md)."""

    # The tunable heads in discovery order: the same list object as the JIT runtime's (AITune's
    # class attribute; cleared in place on reset, so the alias stays valid).
    heads: ClassVar[list[PatchedModule]] = runtime.heads

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module
        self.original_forward: Callable = type(module).forward.__get__(module)
        self.state = JITModuleState.INIT
        self.name = ""
        self.level = 0
        self.parent: PatchedModule | None = None
        self.children: list[PatchedModule] = []
        self.recorder: Recorder | None = None
        self.core = TunedState(module, self.original_forward)
        self.tuning_device: torch.device | None = None
        self.reason = ""  # why EAGER / SKIPPED / unpatched, for the exit diagnostics
        self.num_calls = 0
        self.stats: CallStats | None = None  # inspection statistics (INSPECT mode)
        self._dry_tuned = False
        self._router = _Router(self, self.original_forward)
        self.route()
        set_patched(module, self)

    def __reduce__(self) -> tuple:
        return _none, ()  # see _Router.__reduce__

    def __deepcopy__(self, memo: dict) -> PatchedModule | None:
        # Reached from a deep copy of the module (through its router): the copy starts afresh.
        new_module = memo.get(id(self.module))
        if new_module is None:
            new_module = copy.deepcopy(self.module, memo)
        fresh = PatchedModule.__new__(PatchedModule)
        memo[id(self)] = fresh
        fresh.__init__(new_module)
        return fresh

    # -- routing ----------------------------------------------------------------------------
    def route(self) -> None:
        """(Re)installs the router."""
        install_router(self.module, self.original_forward, self._router)

    def unroute(self) -> None:
        remove_router(self.module)

    @property
    def tuned(self) -> TunedModule | None:
        """The selected backends once TUNED (kept, deactivated, once DETACHED)."""
        return self.core.tuned

    def mark_tuned(self, backends: list[tuple[GraphSpec, Backend]], device: torch.device, fallback_policy: str) -> None:
        """RECORDING → TUNED on `device`: calls go to the backends' dispatcher from now on
        (docs/reference/jit.md TUNED)."""
        assert self.recorder is not None
        self.tuning_device = device
        self.state = JITModuleState.TUNED
        self.core.serve(self.name, self.recorder, backends, fallback_policy, config.strict_mode)

    def mark_dry_tuned(self) -> None:
        """A dry run succeeded: TUNED in name, but calls still run the original forward."""
        self.state = JITModuleState.TUNED
        self._dry_tuned = True

    def detach(self, reason: str) -> None:
        """An ancestor was tuned: this module's own backends (if it was tuned earlier as a head) are
        released, and it leaves JIT tuning for good (DETACHED)."""
        self.core.deactivate()
        self.state = JITModuleState.DETACHED
        self.unpatch(reason)

    def unpatch(self, reason: str) -> None:
        """The module becomes plain again and leaves JIT tuning for good."""
        self.unroute()
        clear_patched(self.module)
        if self.name:
            runtime.event(self.name, f"unpatched: {reason}")

    @property
    def is_routed(self) -> bool:
        return self.module.__dict__.get("forward") is self._router

    def _route(self, args: tuple, kwargs: dict) -> object:
        if runtime.suspended or _tracing():
            return self.original_forward(*args, **kwargs)
        if self.state is JITModuleState.INIT:
            with runtime.lock:
                if self.state is JITModuleState.INIT:
                    self._first_call()
            if self.state is JITModuleState.INIT:  # unpatched by the first-call rules
                return self.original_forward(*args, **kwargs)
        state = self.state
        if state is JITModuleState.SKIPPED:  # transparent: its submodules are judged without it
            return self.original_forward(*args, **kwargs)
        if (
            state is JITModuleState.RECORDING
            and self.tunable
            and jit_config.mode is JITMode.TUNE_DEFERRED
            and runtime.deferred_requested
        ):
            self._tune_now()
            dispatch = self.core.dispatch
            if dispatch is not None:
                return dispatch(*args, **kwargs)
            state = self.state
        stack = runtime.stack()
        stack.append(self)
        try:
            if state is JITModuleState.RECORDING:
                output = self._record(args, kwargs)
            else:  # EAGER, or TUNED in a dry run
                output = self.original_forward(*args, **kwargs)
        finally:
            stack.pop()
        self.num_calls += 1
        if state is JITModuleState.RECORDING and self.tunable and self.eager_trigger_ready():
            self._tune_now()
        return output

    # -- the first call ---------------------------------------------------------------------
    def _first_call(self) -> None:
        module = self.module
        cls = type(module)
        stack = runtime.stack()
        parent = stack[-1] if stack else None
        if cls.__name__ in set(jit_config.skip_modules) or cls.__qualname__ in set(jit_config.skip_modules):
            self.state = JITModuleState.SKIPPED
            self.name = runtime.unique_name(cls.__name__)
            self.reason = f"class {cls.__name__} is in jit_config.skip_modules"
            runtime.event(self.name, f"skipped: {self.reason}")
            if parent is None:
                runtime.heads.append(self)  # shown in the hierarchy and the exit diagnostics
            return
        num_params = sum(p.numel() for p in module.parameters())
        if num_params <= jit_config.min_parameters:
            self.unpatch(f"{num_params} parameters <= min_parameters={jit_config.min_parameters}")
            return
        if parent is not None:
            if parent.level + 1 >= jit_config.max_depth_level:
                self.unpatch("below max_depth_level")
                return
            self.parent, self.level = parent, parent.level + 1
            attr = next((n for n, m in parent.module.named_modules() if m is module and n), cls.__name__)
            self.name = runtime.unique_name(f"{parent.name}.{attr}")
            parent.children.append(self)
        else:
            self.name = runtime.unique_name(cls.__name__)
            runtime.heads.append(self)
        self.state = JITModuleState.RECORDING
        if jit_config.mode is not JITMode.INSPECT:
            self.recorder = Recorder(self.name, self.original_forward)
        runtime.event(
            self.name,
            f"{'head' if self.parent is None else 'child'} at level {self.level}, {num_params:,} parameters; recording",
        )

    @property
    def tunable(self) -> bool:
        """Heads, and children whose parent fell back to eager."""
        return jit_config.mode is not JITMode.INSPECT and (
            self.parent is None or self.parent.state is JITModuleState.EAGER
        )

    # -- recording --------------------------------------------------------------------------
    def _record(self, args: tuple, kwargs: dict) -> object:
        if self.recorder is None:  # INSPECT: statistics only
            return timed_call(self, args, kwargs)
        progress = {"started": False, "done": False, "output": None}

        def run() -> object:
            progress["started"] = True
            progress["output"] = self.original_forward(*args, **kwargs)
            progress["done"] = True
            return progress["output"]

        try:
            return self.recorder.record(args, kwargs, run)
        except Exception as e:
            if progress["started"] and not progress["done"]:
                raise  # the user's own forward failed
            self.give_up(f"recording failed: {type(e).__name__}: {e}")
            return progress["output"] if progress["done"] else self.original_forward(*args, **kwargs)

    def eager_trigger_ready(self) -> bool:
        """In TUNE_EAGER mode: enough calls are recorded to tune now (jit_config.min_samples, with
        a batch axis when jit_config.batch_axis_required)."""
        if jit_config.mode is not JITMode.TUNE_EAGER or self.recorder is None:
            return False
        if self.num_calls < jit_config.min_samples:
            return False
        if jit_config.min_samples == 1 or not jit_config.batch_axis_required:
            return True
        return any(g.input_spec.has_dynamic_axis() for g in self.recorder.graphs)

    def give_up(self, reason: str) -> None:
        """EAGER without trying children (recording could not work)."""
        self.state = JITModuleState.EAGER
        self.reason = reason
        runtime.event(self.name, f"eager: {reason}")
        logger.warning("⚠️ JIT: module `%s` runs eagerly: %s", self.name, reason)

    def try_tune(self) -> None:
        """Tunes the module now if its mode's trigger has fired (AITune's name): in TUNE_EAGER
        once `min_samples` calls (and, if required, a dynamic axis) were recorded; in
        TUNE_DEFERRED once `aitune.torch.jit.tune.deferred()` was called and a call recorded."""
        if self.state is not JITModuleState.RECORDING or not self.tunable:
            return
        deferred_ready = jit_config.mode is JITMode.TUNE_DEFERRED and runtime.deferred_requested and self.num_calls >= 1
        if deferred_ready or self.eager_trigger_ready():
            self._tune_now()

    def _tune_now(self) -> None:
        with runtime.lock:
            if self.state is JITModuleState.RECORDING:
                tune_patched(self)

    # -- public surface ---------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        """The tuning device once TUNED, otherwise the device of the module's first parameter."""
        if self.state is JITModuleState.TUNED and self.tuning_device is not None:
            return self.tuning_device
        return next((p.device for p in self.module.parameters()), torch.device("cpu"))

    @property
    def graph_specs(self) -> list:
        return list(self.recorder.graphs) if self.recorder is not None else []

    def descendants(self) -> list[PatchedModule]:
        out = []
        for child in self.children:
            out.append(child)
            out.extend(child.descendants())
        return out

    def describe(self) -> str:
        text = f"{self.name} [{type(self.module).__name__}] {self.state.name}"
        if self.tuned is not None:
            text += " → " + ", ".join(f"graph {g.name}: {b.describe()}" for g, b in self.tuned.backends)
        elif self._dry_tuned:
            text += " (dry run)"
        if self.reason and self.state in (JITModuleState.EAGER, JITModuleState.SKIPPED):
            text += f" ({self.reason})"
        return text

    @staticmethod
    def hierarchy_text() -> str:
        lines: list[str] = []

        def walk(node: PatchedModule, depth: int) -> None:
            lines.append("  " * depth + node.describe())
            for child in node.children:
                walk(child, depth + 1)

        for head in runtime.heads:
            walk(head, 0)
        return "\n".join(lines) if lines else "(no patched module has been called)"

    def __str__(self) -> str:
        """AITune's hierarchy line: `Net level=0🪜 state=tuned🎯 (TorchInductorJitBackend) call_count=3`."""
        extra = ""
        if self.tuned is not None:
            extra = ", ".join(b.name for _, b in self.tuned.backends)
        elif self._dry_tuned:
            extra = "dry-run tuning success"
        elif self.state in (JITModuleState.EAGER, JITModuleState.SKIPPED):
            extra = self.reason
        text = f"{self.name} level={self.level}🪜 state={self.state.value}{_STATE_MARKS[self.state]} "
        return text + (f"({extra}) " if extra else "") + f"call_count={self.num_calls}"

    @staticmethod
    def print_hierarchy(sink: Callable[[str], object] = print) -> None:
        """Prints the tree of heads and children with their states, one line per module through
        `sink` (AITune's form, under PRINT_HIERARCHY_HEADER)."""
        if not runtime.heads:
            sink(PRINT_HIERARCHY_NO_MODULES_HEADER)
            return
        sink(PRINT_HIERARCHY_HEADER)

        def walk(node: PatchedModule, depth: int) -> None:
            sink(f"{'  ' * depth}├─ {node}")
            for child in node.children:
                walk(child, depth + 1)

        for head in runtime.heads:
            walk(head, 0)

    @staticmethod
    def print_history() -> None:
        """Prints every JIT event in order (first calls, tuning, fallbacks, unpatching)."""
        start = runtime.history[0][0] if runtime.history else time.time()
        for when, name, text in runtime.history:
            print(f"+{when - start:8.3f}s  {name}: {text}")

    def __repr__(self) -> str:
        return f"PatchedModule({self.describe()})"
