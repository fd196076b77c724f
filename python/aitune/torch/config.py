"""Global aitune configuration (docs/reference/configuration.md).

``config`` is a process-wide singleton. Environment variables provide the
initial values; ``reset_to_defaults()`` re-reads them. Paths derived from
``cache_dir`` (the telemetry JSON and HTML report) are computed when read, so
setting ``config.cache_dir`` relocates them too, unlike the reference, where
they stayed under the environment's cache directory.
"""

from __future__ import annotations

import math
import os
import re
from enum import Enum
from pathlib import Path
from typing import Dict, Optional, Union

import torch

from aitune.exceptions import InvalidValueError
from aitune.torch.utils.env import env_bool, env_float, env_int, env_str

__all__ = [
    "AITuneConfig",
    "AITuneMode",
    "DEFAULT_DEVICE",
    "aitune_cache_dir",
    "config",
    "normalize_device",
]

DEFAULT_DEVICE = "cuda:0"
DEFAULT_MIN_NUM_SAMPLES = 100
DEFAULT_MAX_NUM_SAMPLES_STORED = 1
DEFAULT_DEVICE_AFTER_TUNING = "meta"
DEFAULT_CUDA_GRAPH_CACHE_SIZE = 8
DEFAULT_MAX_BATCH_SEARCH_S = 20.0
DEFAULT_AOTI_LOAD_CHECK_TIMEOUT_S = 120.0
FALLBACK_POLICIES = ("raise", "eager")
MAX_CUDA_INDEX = 127

PathLike = Union[str, os.PathLike]

_CUDA_RE = re.compile(r"cuda:(\d{1,3})")
_ACCEPTED_DEVICES = "'cuda', 'cuda:N' (0 <= N <= 127), 'cpu' or 'meta'"


class AITuneMode(str, Enum):
    """How tuning was started; recorded in telemetry."""

    JIT = "JIT"
    DECLARATIVE = "DECLARATIVE"


def normalize_device(device: Union[str, torch.device]) -> str:
    """Return the canonical device string (docs/reference/tuning.md#the-tune-call step 2).

    ``"cuda"`` becomes ``"cuda:0"`` so that one device has one spelling in
    cache keys and reports. CUDA availability is not checked here; callers
    that run on the device do that.
    """
    if isinstance(device, torch.device):
        if device.type in ("cpu", "meta"):
            return device.type
        if device.type == "cuda":
            # torch stores the index in 8 bits, so an out-of-range index may read negative.
            index = 0 if device.index is None else device.index
            if 0 <= index <= MAX_CUDA_INDEX:
                return f"cuda:{index}"
        raise InvalidValueError(f"Invalid device {str(device)!r}; expected {_ACCEPTED_DEVICES}.")
    if isinstance(device, str):
        if device in ("cpu", "meta"):
            return device
        if device == "cuda":
            return DEFAULT_DEVICE
        match = _CUDA_RE.fullmatch(device)
        if match and int(match.group(1)) <= MAX_CUDA_INDEX:
            return f"cuda:{int(match.group(1))}"
    raise InvalidValueError(f"Invalid device {device!r}; expected {_ACCEPTED_DEVICES}.")


def _default_cache_dir() -> Path:
    """``$AITUNE_CACHE_DIR``, else ``$XDG_CACHE_HOME/aitune``, else ``~/.cache/aitune``."""
    explicit = env_str("AITUNE_CACHE_DIR")
    if explicit is not None:
        return Path(explicit).expanduser()
    xdg = env_str("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg is not None else Path.home() / ".cache"
    return base / "aitune"


def _optional_path(value: Optional[PathLike]) -> Optional[Path]:
    return None if value is None else Path(value).expanduser()


def _env_seconds(name: str, default: float) -> float:
    """A positive number of seconds from the environment (unset or empty: `default`)."""
    text = env_str(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise InvalidValueError(f"Environment variable {name} must be a number of seconds > 0, got {text!r}.")
    return value


def _require_int(name: str, value: object, minimum: int) -> int:
    """Validate an integer knob; ``bool`` is rejected although it is an ``int``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


class AITuneConfig:
    """Process-wide tuning settings; see docs/reference/configuration.md for each field's meaning."""

    def __init__(self) -> None:
        self.reset_to_defaults()

    def reset_to_defaults(self) -> None:
        """Restore every field to its default, re-reading the environment."""
        self._cache_dir: Path = _default_cache_dir()
        self._tuning_data_output_path = _optional_path(env_str("AITUNE_TUNING_DATA_PATH"))
        self._tuning_report_path = _optional_path(env_str("AITUNE_TUNING_REPORT_PATH"))
        self.min_num_samples = DEFAULT_MIN_NUM_SAMPLES
        self.max_num_samples_stored = DEFAULT_MAX_NUM_SAMPLES_STORED
        self.device_after_tuning = DEFAULT_DEVICE_AFTER_TUNING
        self.strict_mode: bool = True
        self.enable_transformers_integration: bool = env_bool("AITUNE_TRANSFORMERS_INTEGRATION", True)
        self.enable_diffusers_integration: bool = env_bool("AITUNE_DIFFUSERS_INTEGRATION", False)
        self.fallback_policy = "raise"
        self.cuda_graph_cache_size = env_int("AITUNE_CUDA_GRAPH_CACHE_SIZE", DEFAULT_CUDA_GRAPH_CACHE_SIZE)
        self.cuda_graph_clone_outputs: bool = True
        self.reuse_tuning_results: bool = env_bool("AITUNE_REUSE_TUNING_RESULTS", True)
        self.max_batch_search_s = DEFAULT_MAX_BATCH_SEARCH_S
        self.tuning_budget_s = env_float("AITUNE_TUNING_BUDGET_S", None)
        self.aoti_load_check_timeout_s = _env_seconds(
            "AITUNE_AOTI_LOAD_CHECK_TIMEOUT_S", DEFAULT_AOTI_LOAD_CHECK_TIMEOUT_S
        )
        self.mode = AITuneMode.DECLARATIVE

    # -- paths ---------------------------------------------------------------

    @property
    def cache_dir(self) -> Path:
        """Root of build dirs, results store, extraction cache and default telemetry."""
        return self._cache_dir

    @cache_dir.setter
    def cache_dir(self, value: Optional[PathLike]) -> None:
        # None restores the environment-derived default.
        self._cache_dir = _default_cache_dir() if value is None else Path(value).expanduser()

    @property
    def tuning_data_output_path(self) -> Path:
        """Telemetry JSON; follows ``cache_dir`` unless set explicitly or by env."""
        if self._tuning_data_output_path is not None:
            return self._tuning_data_output_path
        return self._cache_dir / "tuning_data" / "report.json"

    @tuning_data_output_path.setter
    def tuning_data_output_path(self, value: Optional[PathLike]) -> None:
        self._tuning_data_output_path = _optional_path(value)

    @property
    def tuning_report_path(self) -> Path:
        """HTML report; defaults to the telemetry path with an ``.html`` suffix."""
        if self._tuning_report_path is not None:
            return self._tuning_report_path
        return self.tuning_data_output_path.with_suffix(".html")

    @tuning_report_path.setter
    def tuning_report_path(self, value: Optional[PathLike]) -> None:
        self._tuning_report_path = _optional_path(value)

    # -- validated knobs -------------------------------------------------------

    @property
    def min_num_samples(self) -> int:
        """Kept for API compatibility; has no effect (as in the reference)."""
        return self._min_num_samples

    @min_num_samples.setter
    def min_num_samples(self, value: int) -> None:
        self._min_num_samples = _require_int("min_num_samples", value, 1)

    @property
    def max_num_samples_stored(self) -> Union[int, float]:
        """Samples kept per graph; ``float("inf")`` keeps all."""
        return self._max_num_samples_stored

    @max_num_samples_stored.setter
    def max_num_samples_stored(self, value: Union[int, float]) -> None:
        if isinstance(value, float) and math.isinf(value) and value > 0:
            self._max_num_samples_stored = value
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"max_num_samples_stored must be an integer >= 1 or float('inf'), got {value!r}")
        self._max_num_samples_stored = value

    @property
    def device_after_tuning(self) -> str:
        """Where the original module goes after non-JIT tuning and on load."""
        return self._device_after_tuning

    @device_after_tuning.setter
    def device_after_tuning(self, value: Union[str, torch.device]) -> None:
        self._device_after_tuning = normalize_device(value)

    @property
    def fallback_policy(self) -> str:
        """``"raise"`` or ``"eager"`` for calls no tuned graph accepts (docs/reference/dispatch.md#input-check)."""
        return self._fallback_policy

    @fallback_policy.setter
    def fallback_policy(self, value: str) -> None:
        if value not in FALLBACK_POLICIES:
            raise ValueError(f"fallback_policy must be 'raise' or 'eager', got {value!r}")
        self._fallback_policy = value

    @property
    def cuda_graph_cache_size(self) -> int:
        """Captured CUDA graphs kept per runner (docs/reference/dispatch.md#cuda-graph-runner)."""
        return self._cuda_graph_cache_size

    @cuda_graph_cache_size.setter
    def cuda_graph_cache_size(self, value: int) -> None:
        self._cuda_graph_cache_size = _require_int("cuda_graph_cache_size", value, 1)

    @property
    def max_batch_search_s(self) -> Optional[float]:
        """Wall-time budget in seconds of find-max-batch-size; None for no limit."""
        return self._max_batch_search_s

    @max_batch_search_s.setter
    def max_batch_search_s(self, value: Optional[float]) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
            raise ValueError(f"max_batch_search_s must be a number of seconds > 0 or None, got {value!r}")
        self._max_batch_search_s = None if value is None or math.isinf(value) else float(value)

    @property
    def tuning_budget_s(self) -> Optional[float]:
        """Wall-time budget in seconds of one ``ait.tune`` for the strategies that walk candidates
        (docs/reference/strategies.md#tuning-budget); None for no limit. A strategy's own ``budget_s`` wins."""
        return self._tuning_budget_s

    @tuning_budget_s.setter
    def tuning_budget_s(self, value: Optional[float]) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
            raise ValueError(f"tuning_budget_s must be a number of seconds > 0 or None, got {value!r}")
        self._tuning_budget_s = None if value is None or math.isinf(value) else float(value)

    @property
    def aoti_load_check_timeout_s(self) -> float:
        """Seconds an AOTInductor package's load check (its load and first call in a child
        process) may take before the package is refused (docs/guide.md "Threat model")."""
        return self._aoti_load_check_timeout_s

    @aoti_load_check_timeout_s.setter
    def aoti_load_check_timeout_s(self, value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise ValueError(f"aoti_load_check_timeout_s must be a number of seconds > 0, got {value!r}")
        self._aoti_load_check_timeout_s = float(value)

    @property
    def mode(self) -> AITuneMode:
        """Declarative (``ait.tune``) or JIT tuning."""
        return self._mode

    @mode.setter
    def mode(self, value: Union[AITuneMode, str]) -> None:
        try:
            self._mode = AITuneMode(value)
        except ValueError:
            raise ValueError(f"mode must be one of {[m.value for m in AITuneMode]}, got {value!r}") from None

    # -- snapshot --------------------------------------------------------------

    def to_dict(self) -> Dict[str, object]:
        """Return a JSON-serialisable snapshot for reports (paths as ``str``)."""
        max_stored = self.max_num_samples_stored
        return {
            "cache_dir": str(self.cache_dir),
            "min_num_samples": self.min_num_samples,
            "max_num_samples_stored": "inf" if isinstance(max_stored, float) else max_stored,
            "device_after_tuning": self.device_after_tuning,
            "strict_mode": self.strict_mode,
            "tuning_data_output_path": str(self.tuning_data_output_path),
            "tuning_report_path": str(self.tuning_report_path),
            "enable_transformers_integration": self.enable_transformers_integration,
            "enable_diffusers_integration": self.enable_diffusers_integration,
            "fallback_policy": self.fallback_policy,
            "cuda_graph_cache_size": self.cuda_graph_cache_size,
            "cuda_graph_clone_outputs": self.cuda_graph_clone_outputs,
            "reuse_tuning_results": self.reuse_tuning_results,
            "max_batch_search_s": self.max_batch_search_s,
            "tuning_budget_s": self.tuning_budget_s,
            "aoti_load_check_timeout_s": self.aoti_load_check_timeout_s,
            "mode": self.mode.value,
        }

    def __repr__(self) -> str:
        fields = ", ".join(f"{key}={value!r}" for key, value in self.to_dict().items())
        return f"AITuneConfig({fields})"


config = AITuneConfig()


def aitune_cache_dir() -> Path:
    """Return ``config.cache_dir``, so that setting it moves every cache (docs/reference/api.md#top-level-names)."""
    return config.cache_dir
