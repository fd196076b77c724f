"""AITune's base-class helpers for backends written to its contract (docs/reference/backends.md, "Custom backends
and loading"): `self._set_device`, `self._track_build_step` and `self._logger` keep working on a Backend
subclass although they live in backend/common/reference_contract.py."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from aitune.torch.backend.backend import Backend


class StepsBackend(Backend):
    """Written to AITune's contract: `_build` without a device (it reads self.device)."""

    fail_step = False

    def _build(self, module: torch.nn.Module, graph_spec: object, data: list, cache_dir: Path) -> None:
        self._set_device(None)  # keeps the device build() set
        with self._track_build_step("export") as result:
            result["size_bytes"] = 3
        self._logger.info("exported for %s", self.device)
        if self.fail_step:
            with self._track_build_step("engine"):
                raise RuntimeError("engine build failed")
        self._module = module

    def _infer(self, x: torch.Tensor) -> torch.Tensor:
        return self._module(x)


def test_build_steps_are_recorded_with_their_outcome(tmp_path, caplog):
    backend = StepsBackend()
    with caplog.at_level(logging.INFO, logger=__name__):
        backend.build(torch.nn.Identity(), None, [], "cpu", tmp_path)
    assert backend._build_results == [{"step": "export", "size_bytes": 3, "success": True}]
    assert backend.device == torch.device("cpu")
    assert backend._logger.name == __name__  # the logger of the backend's own module
    assert any(r.name == __name__ and "exported for cpu" in r.getMessage() for r in caplog.records)

    failing = StepsBackend()
    failing.fail_step = True
    with pytest.raises(RuntimeError, match="engine build failed"):
        failing.build(torch.nn.Identity(), None, [], "cpu", tmp_path / "failing")
    assert [(r["step"], r["success"]) for r in failing._build_results] == [("export", True), ("engine", False)]


def test_set_device_needs_a_device_once():
    backend = StepsBackend()
    with pytest.raises(ValueError, match="Device is not set"):
        backend._set_device(None)
    backend._set_device("cpu")
    assert backend.device == torch.device("cpu")
    backend._set_device(None)  # keeps it
    assert backend.device == torch.device("cpu")
