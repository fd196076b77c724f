"""The compiler caches that the Inductor backends use and fill (docs/reference/configuration.md#compiler-caches)
and what JIT backends (Inductor JIT, Torch-TensorRT JIT) free on deactivation."""

from __future__ import annotations

import gc
import logging
import os
from pathlib import Path

import torch

from aitune.torch.config import config

logger = logging.getLogger("aitune")

INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


def keep_compile_caches_in_aitune() -> Path | None:
    """Inductor's on-disk caches (FX graphs, AOTAutograd, autotuning results, and Triton's kernels,
    which follow it) go to `<cache_dir>/torch/inductor` unless a folder was already chosen: by the
    user, or by torch itself once it compiled something in this process (it then sets
    TORCHINDUCTOR_CACHE_DIR to its default). So a second process tuning the same model compiles
    from aitune's own cache, and clearing aitune's cache clears them too. Returns the folder set,
    or None when an existing choice is kept."""
    if os.environ.get(INDUCTOR_CACHE_ENV):
        return None
    folder = Path(config.cache_dir) / "torch" / "inductor"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # a read-only cache folder: torch keeps its default
        logger.debug("Inductor's caches stay in torch's default folder (%s)", e)
        return None
    os.environ[INDUCTOR_CACHE_ENV] = str(folder)
    return folder


def reset_compiler_caches() -> None:
    """What deactivation frees (as AITune does): Dynamo and compiler caches, then memory."""
    torch._dynamo.reset()
    torch.compiler.reset()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    gc.collect()
