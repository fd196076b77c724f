from __future__ import annotations

import dataclasses
from typing import ClassVar

import torch

from aitune.torch.backend.common.autocast import AutocastOptions
from aitune.torch.backend.common.inductor_settings import InductorSettings
from aitune.torch.backend.backend import BackendConfig, ServingOptions

VALID_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# Modes in which Inductor captures CUDA graphs itself (torch._inductor.list_mode_options).
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


@dataclasses.dataclass
class TorchInductorJitBackendConfig(BackendConfig, ServingOptions, AutocastOptions, InductorSettings):
    """torch.compile with the Inductor backend (docs/reference/backends.md#inductor-jit-torchinductorjitbackend).

    Args:
        fullgraph: torch.compile(fullgraph=...): graph breaks become errors.
        dynamic: torch.compile(dynamic=...); None means True when the graph has a batch or dim
            axis (avoids recompile storms), else False.
        mode: one of "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs".
        options: Inductor options dict; exclusive with `mode`.
        autocast_enabled: compile and run under torch.autocast.
        autocast_dtype: autocast dtype (None: torch's default for the device).
        use_cuda_graphs: serve through aitune's CUDA-graph runner (docs/reference/dispatch.md#cuda-graph-runner).
        freezing: Inductor's `freezing`: the weights become constants of the compiled graph
            (conv/batch-norm folding, constant folding, layout optimisation). The module's own
            parameters are kept, so `state_dict()` is unchanged; weights changed after tuning are
            not seen by the compiled graph (docs/reference/backends.md#inductor-settings).
        coordinate_descent_tuning: Inductor's `coordinate_descent_tuning`: each generated Triton
            kernel's launch configuration is searched around its heuristic choice (longer builds).
    """

    fullgraph: bool = False
    dynamic: bool | None = None
    mode: str | None = None
    options: dict[str, object] | None = None
    autocast_enabled: bool = False
    autocast_dtype: torch.dtype | None = None
    use_cuda_graphs: bool = False
    freezing: bool = False
    coordinate_descent_tuning: bool = False

    # max-autotune is chosen through `mode` ("max-autotune-no-cudagraphs" under aitune's graphs).
    _setting_fields: ClassVar[tuple[str, ...]] = ("freezing", "coordinate_descent_tuning")

    def __post_init__(self) -> None:
        if self.mode is not None and self.mode not in VALID_MODES:
            raise ValueError(f"Invalid mode: {self.mode!r}. Valid modes are: {', '.join(map(repr, VALID_MODES))}.")
        if self.mode is not None and self.options is not None:
            raise ValueError(
                "Cannot specify both 'mode' and 'options' parameters in config. Pass the mode's settings in "
                "'options' or drop 'options'."
            )
        if self.options is not None and not isinstance(self.options, dict):
            raise ValueError(f"options must be a dict of Inductor options or None, got {self.options!r}")
        if self.use_cuda_graphs and self.mode in CUDA_GRAPH_MODES:
            raise ValueError(
                f"use_cuda_graphs=True cannot be combined with mode={self.mode!r}: that mode captures CUDA graphs "
                "itself. Use mode='max-autotune-no-cudagraphs' or 'default', or set use_cuda_graphs=False."
            )
        self.check_autocast_options()
        self.check_inductor_settings(self.options, "options")

    def inductor_options(self) -> dict[str, object] | None:
        """The Inductor options torch.compile gets: `options` plus the settings fields that are on
        (None when there are none, as torch.compile's own default)."""
        return self.merged_inductor_options(self.options)

    def mode_settings(self) -> dict[str, object]:
        """The Inductor settings `mode` switches on (torch._inductor.list_mode_options)."""
        if self.mode in (None, "default"):
            return {}
        try:
            return dict(torch._inductor.list_mode_options(self.mode))
        except Exception:  # noqa: BLE001 - an older torch without the helper: the mode's documented settings
            return {"max_autotune": True, "coordinate_descent_tuning": True} if "autotune" in self.mode else {}
