"""Helpers shared by the unit tests: finding the C++ CLI, and recording calls into a wrapped
module with their batch sizes published (as ait.tune does)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

import aitune.torch as ait
from aitune.torch.global_context import published_batch_size

BUILD_TREE_CLI = Path("/tmp/full-build/cpp/cli/aitune")  # the development build (README)


def aitune_cli() -> str:
    """The `aitune` executable: the installed one on PATH, else the development build; skips the
    test when neither exists."""
    found = shutil.which("aitune")
    if found:
        return found
    if BUILD_TREE_CLI.is_file() and os.access(BUILD_TREE_CLI, os.X_OK):
        return str(BUILD_TREE_CLI)
    pytest.skip(f"the C++ CLI `aitune` is neither on PATH nor built at {BUILD_TREE_CLI}")


def record_calls(
    model: torch.nn.Module, calls: list[tuple[int, tuple, dict]], name: str = "m", **module_kwargs: Any
) -> Any:
    """Wraps `model` and records (batch_size, args, kwargs) calls under no_grad; returns the
    wrapped module."""
    m = ait.Module(model, name, **module_kwargs)
    with torch.no_grad():
        for bs, args, kwargs in calls:
            with published_batch_size(bs):
                m(*args, **kwargs)
    return m
