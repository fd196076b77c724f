"""`jit_config` (docs/reference/jit.md): the settings of JIT tuning, a process-wide singleton.

Exposed as `aitune.torch.jit_config` (an attribute; no submodule of that name may exist)."""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from aitune.torch.tune_strategy import FirstWinsStrategy
from aitune.torch.utils.env import env_str

if TYPE_CHECKING:
    from aitune.torch.tune_strategy.tune_strategy import TuneStrategy

logger = logging.getLogger("aitune")


class JITMode(enum.Enum):
    INSPECT = "inspect"
    TUNE_EAGER = "tune_eager"
    TUNE_DEFERRED = "tune_deferred"


def _default_cache_dir() -> Path:
    """`$AITUNE_JIT_CACHE_DIR`, else `$XDG_CACHE_HOME/aitune.jit`, else `~/.cache/aitune.jit`."""
    explicit = env_str("AITUNE_JIT_CACHE_DIR")
    if explicit is not None:
        return Path(explicit).expanduser()
    xdg = env_str("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg is not None else Path.home() / ".cache") / "aitune.jit"


def default_strategy() -> TuneStrategy:
    """FirstWins over its default candidates for the tuning device — TensorRT (dynamo, then
    trace export) and Inductor JIT, and on CUDA their CUDA-graph variants, Inductor AOT and eager
    with CUDA graphs first — with the eager performance gate (at batch size 1: a JIT call's batch
    size is unknown)."""
    return FirstWinsStrategy().enable_performance_validation(True)


@dataclasses.dataclass
class Config:
    """docs/reference/jit.md table; `reset_to_defaults()` restores every field (re-reading the environment)."""

    mode: JITMode = JITMode.TUNE_EAGER
    dry_run: bool = False
    dry_run_failure_probability: float = 0.2
    device: str | None = "cuda:0"
    min_samples: int = 1
    batch_axis_required: bool = True
    max_depth_level: int = 1
    min_parameters: int = 0
    detect_graph_breaks: bool = False
    skip_modules: list[str] = dataclasses.field(default_factory=list)
    patch_exclude: tuple[str, ...] = ()
    cache_dir: Path = dataclasses.field(default_factory=_default_cache_dir)
    strategy: TuneStrategy | None = None

    def resolve_strategy(self) -> TuneStrategy:
        """The user's `strategy`, or the default one (a fresh object each call)."""
        if self.strategy is not None:
            return self.strategy
        return default_strategy()

    def reset_to_defaults(self) -> None:
        for f in dataclasses.fields(self):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            setattr(self, f.name, default)

    def validate(self) -> None:
        """Raises ValueError naming the field, the expected and the actual value."""
        if not isinstance(self.mode, JITMode):
            try:
                self.mode = JITMode(self.mode)
            except ValueError:
                raise ValueError(
                    f"jit_config.mode must be one of {[m.name for m in JITMode]}, got {self.mode!r}"
                ) from None
        for name, minimum in (("min_samples", 1), ("max_depth_level", 1), ("min_parameters", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"jit_config.{name} must be an integer >= {minimum}, got {value!r}")
        if not 0.0 <= float(self.dry_run_failure_probability) <= 1.0:
            raise ValueError(
                "jit_config.dry_run_failure_probability must be between 0 and 1, "
                f"got {self.dry_run_failure_probability!r}"
            )
        self.cache_dir = Path(os.fspath(self.cache_dir)).expanduser()

    def to_dict(self) -> dict[str, object]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "strategy"}
        out["mode"] = self.mode.value if isinstance(self.mode, JITMode) else str(self.mode)
        out["cache_dir"] = str(self.cache_dir)
        out["patch_exclude"] = list(self.patch_exclude)
        out["strategy"] = None if self.strategy is None else self.strategy.describe()
        return out


config = Config()
