"""Quantized candidates, opt-in (docs/reference/strategies.md#quantized-candidates).

Quantization changes a model's numbers, so no default list holds a quantized candidate: a user
allows them by adding this helper's blueprints to a strategy's list, where they are built,
checked against eager under their own precision class (int8 or fp8, docs/reference/validation.md)
and measured beside the fp16/fp32 candidates:

    ait.MinLatencyStrategy(backends=profiling_defaults("cuda") + quantized_candidates("cuda"))
"""

from __future__ import annotations

from typing import Sequence

import torch

from aitune.torch.backend import TorchAOBackend, TorchAOBackendConfig
from aitune.torch.backend.backend import Backend
from aitune.torch.backend.torchao import QUANTIZATION_PRESETS

# The presets a Hopper GPU runs; mxfp8dq and nvfp4dq need Blackwell (sm_100) and are added by name.
DEFAULT_QUANTIZED_PRESETS = ("int8wo", "int8dq", "fp8wo", "fp8dq")


def quantized_candidates(
    device: torch.device | str | None = None,
    presets: Sequence[str] = DEFAULT_QUANTIZED_PRESETS,
    *,
    mode: str | None = None,
) -> list[Backend]:
    """One TorchAOBackend blueprint per preset. On CUDA each comes as its CUDA-graph variant
    followed by its plain sibling (one build serves both), compiled with
    `mode="max-autotune-no-cudagraphs"` (Inductor's kernel search, aitune's graph runner); on
    the CPU with `mode="default"` (max-autotune on the CPU costs minutes for little). `mode`
    overrides either. A preset the device cannot run is skipped by the strategy with its reason."""
    if isinstance(presets, str):
        presets = (presets,)
    unknown = [p for p in presets if p not in QUANTIZATION_PRESETS]
    if unknown:
        raise ValueError(f"Unknown quantization preset(s) {unknown}; expected some of {list(QUANTIZATION_PRESETS)}")
    on_cuda = device is not None and torch.device(device).type == "cuda"
    if mode is None:
        mode = "max-autotune-no-cudagraphs" if on_cuda else "default"
    candidates: list[Backend] = []
    for preset in presets:
        if on_cuda:
            candidates.append(
                TorchAOBackend(TorchAOBackendConfig(quantization=preset, mode=mode, use_cuda_graphs=True))
            )
        candidates.append(TorchAOBackend(TorchAOBackendConfig(quantization=preset, mode=mode)))
    return candidates
