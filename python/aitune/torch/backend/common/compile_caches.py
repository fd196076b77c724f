"""The compiler caches that JIT backends (Inductor JIT, Torch-TensorRT JIT) fill and free on deactivation."""

from __future__ import annotations

import gc

import torch


def reset_compiler_caches() -> None:
    """What deactivation frees (as AITune does): Dynamo and compiler caches, then memory."""
    torch._dynamo.reset()
    torch.compiler.reset()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    gc.collect()
