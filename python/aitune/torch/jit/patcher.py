"""Patching `torch.nn.Module.__init__` (docs/reference/jit.md "Activation", "Patching").

Every module constructed while the patch is on, and whose class is not excluded, gets a
PatchedModule. `enable()` patches for the rest of the process (until `disable()`);
`patch_for_jit_tuning` and `prepare_for_jit_tuning()` patch only while the model is built.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import weakref
from typing import Callable, Iterator, TypeVar

import torch

from aitune.torch.config import AITuneMode, config
from aitune.torch.jit.config import config as jit_config
from aitune.torch.jit.exit_report import at_exit
from aitune.torch.jit.patched_module import attach
from aitune.torch.jit.state import JITModuleState, Patched, get_patched, runtime
from aitune.torch.logging_utils import setup_logging

logger = logging.getLogger("aitune")
F = TypeVar("F", bound=Callable[..., object])

# Classes from these packages are torch's own machinery (tracing, compiling, exporting).
BUILTIN_EXCLUDED_PACKAGES = (
    "torch.jit",
    "torch._inductor",
    "torch._dynamo",
    "torch.fx",
    "torch.export",
    "torch_tensorrt",
    "aitune",
)
BUILTIN_EXCLUDED_CLASSES = (
    torch.nn.ModuleList,
    torch.nn.ModuleDict,
    torch.nn.Sequential,
    torch.nn.ParameterList,
    torch.nn.ParameterDict,
)


class _Patcher:
    original_init: Callable | None = None
    global_enabled = False  # enable() (as opposed to a scoped patch)
    scoped_depth = 0
    atexit_registered = False
    patched_modules: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()


_patcher = _Patcher()


def _in_package(module_name: str, prefix: str) -> bool:
    return module_name == prefix or module_name.startswith(prefix + ".")


def is_excluded(cls: type) -> bool:
    """Built-in exclusions, plus `jit_config.patch_exclude` package prefixes or class names."""
    if cls in BUILTIN_EXCLUDED_CLASSES or cls.forward is torch.nn.Module.forward:
        return True
    module_name = cls.__module__ or ""
    if any(_in_package(module_name, p) for p in BUILTIN_EXCLUDED_PACKAGES):
        return True
    qualified = f"{module_name}.{cls.__qualname__}"
    for entry in jit_config.patch_exclude:
        if entry in (cls.__name__, cls.__qualname__, qualified) or _in_package(module_name, entry):
            return True
    return False


def _patched_init(self: torch.nn.Module, *args: object, **kwargs: object) -> None:
    _patcher.original_init(self, *args, **kwargs)  # type: ignore[misc]
    if runtime.suspended or get_patched(self) is not None:
        return
    try:
        if not is_excluded(type(self)):
            attach(self)
            _patcher.patched_modules.add(self)
    except Exception as e:  # noqa: BLE001 - JIT tuning must never break model construction
        logger.debug("JIT: %s was not patched: %s: %s", type(self).__name__, type(e).__name__, e)


def _install() -> None:
    if _patcher.original_init is None:
        _patcher.original_init = torch.nn.Module.__init__
        torch.nn.Module.__init__ = functools.wraps(_patcher.original_init)(_patched_init)  # type: ignore[method-assign]


def _uninstall() -> None:
    if _patcher.original_init is not None:
        torch.nn.Module.__init__ = _patcher.original_init  # type: ignore[method-assign]
        _patcher.original_init = None


def is_patching() -> bool:
    return _patcher.original_init is not None


def _start_session() -> None:
    jit_config.validate()
    config.mode = AITuneMode.JIT
    setup_logging()
    if not _patcher.atexit_registered:
        atexit.register(at_exit)
        _patcher.atexit_registered = True


def enable() -> None:
    """Patches nn.Module construction for the rest of the process."""
    _start_session()
    _install()
    _patcher.global_enabled = True
    logger.info("🧪 JIT tuning enabled (mode %s): modules built from now on are patched", jit_config.mode.name)


def disable() -> None:
    """Stops patching, and returns every patched module that is not tuned to its plain forward
    (a TUNED module keeps serving: its weights may have been offloaded)."""
    _patcher.global_enabled = False
    _patcher.scoped_depth = 0
    _uninstall()
    for module in list(_patcher.patched_modules):
        patched = get_patched(module)
        if patched is not None and patched.state is not JITModuleState.TUNED:
            patched.unpatch("JIT tuning disabled")
            if patched.state is not JITModuleState.INIT:
                patched.state = JITModuleState.DETACHED
    logger.info("JIT tuning disabled")


@contextlib.contextmanager
def prepare_for_jit_tuning() -> Iterator[None]:
    """Patches only the modules constructed inside the block."""
    _start_session()
    _install()
    _patcher.scoped_depth += 1
    try:
        yield
    finally:
        _patcher.scoped_depth = max(0, _patcher.scoped_depth - 1)
        if _patcher.scoped_depth == 0 and not _patcher.global_enabled:
            _uninstall()


def patch_for_jit_tuning(func: F) -> F:
    """Decorator: the modules `func` constructs are patched for JIT tuning."""

    @functools.wraps(func)
    def wrapper(*args: object, **kwargs: object) -> object:
        with prepare_for_jit_tuning():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def jit_reset() -> None:
    """AITune's reset of JIT tuning: stops patching, returns every patched module that is not
    tuned to its plain forward, removes the exit report hook and forgets every head (tests and
    notebooks that start over). The settings in `jit_config` are kept."""
    disable()
    if _patcher.atexit_registered:
        atexit.unregister(at_exit)
        _patcher.atexit_registered = False
    runtime.reset()


class Patcher:
    """AITune's class-level interface to the patching (docs/guide.md, "Coming from AITune"),
    over this module's functions."""

    @classmethod
    def patch_torch(cls) -> None:
        """Patches nn.Module construction for the rest of the process (as `enable()`)."""
        enable()

    @classmethod
    def unpatch_torch(cls, unpatch_modules: bool = False) -> None:
        """Stops patching new modules; with `unpatch_modules`, also returns every patched module
        that is not tuned to its plain forward (as `disable()`)."""
        if unpatch_modules:
            disable()
            return
        _patcher.global_enabled = False
        _patcher.scoped_depth = 0
        _uninstall()

    @classmethod
    def enable_tune_deferred(cls, enable: bool = True) -> None:
        """TUNE_DEFERRED: recording is complete, tune at the next forward (or cancel that)."""
        runtime.deferred_requested = bool(enable)

    @classmethod
    def patched_modules_under(cls, root: torch.nn.Module) -> list[Patched]:
        """The PatchedModules of `root` and its submodules."""
        return [p for p in (get_patched(m) for m in root.modules()) if p is not None]

    @classmethod
    def intercepted_classes(cls) -> list[str]:
        """Qualified names of the classes whose instances were patched."""
        return sorted({f"{type(m).__module__}.{type(m).__name__}" for m in list(_patcher.patched_modules)})

    @classmethod
    def _is_allowed_to_tune(cls, module: torch.nn.Module) -> bool:
        return not is_excluded(type(module))
