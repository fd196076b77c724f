"""Strategy base (SPEC §1.3, §6): logs the graph block, builds candidates from deep copies in
their own folders with their own build.log, checks them, and returns the one to serve."""

from __future__ import annotations

import abc
import copy
import logging
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from aitune.torch.backend.backend import Backend
from aitune.torch.logging_utils import captured_output, format_duration, indent
from aitune.torch.module.graph_spec import GraphSpec, Sample
from aitune.torch.task.correctness import check_correctness

logger = logging.getLogger("aitune")


class TuneStrategy(abc.ABC):
    def __init__(self, sink: Any = None, profiling_config: Any = None) -> None:
        self.sink = sink
        self.profiling_config = profiling_config
        self.backend_results: list[dict[str, Any]] = []
        self._correctness_check = True

    # -- switches (each returns self so they chain) ----------------------------------------
    def enable_correctness_check(self, enable: bool = True) -> TuneStrategy:
        self._correctness_check = enable
        return self

    def clone(self) -> TuneStrategy:
        return copy.deepcopy(self)

    # -- description -----------------------------------------------------------------------
    @abc.abstractmethod
    def _describe_parts(self) -> list[str]: ...

    @abc.abstractmethod
    def to_json_dict(self) -> dict[str, Any]: ...

    def describe(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(self._describe_parts()) + ")"

    def _log(self, message: str, *args: Any) -> None:
        (self.sink or logger).info(message, *args)

    def _log_graph_block(self, module: torch.nn.Module, module_name: str, graph: GraphSpec, data: list[Sample],
                         device: torch.device, cache_dir: Path, dry_run: bool = False) -> None:
        params = sum(p.numel() for p in module.parameters())
        layers = sum(1 for _ in module.modules())
        precisions = sorted({str(p.dtype) for p in module.parameters()}) or ["none"]
        lines = [
            f"🚀 Tuning graph `{graph.display_name}` for module `{module_name}`{' (DRY RUN)' if dry_run else ''}:",
            f"  number of parameters: {params:,}",
            f"  number of layers: {layers}",
            f"  precisions: {', '.join(precisions)}",
            indent(graph.describe(), 2),
            f"  number of samples: {len(data)}",
            f"  device: {device}",
            f"  cache_dir: {cache_dir}",
            "  strategy:",
            f"    name: {type(self).__name__}",
            f"    description: {self.describe()}",
        ]
        self._log("\n".join(lines))

    # -- tuning ----------------------------------------------------------------------------
    def tune(self, module: torch.nn.Module, module_name: str, graph: GraphSpec, data: list[Sample],
             device: torch.device, cache_dir: Path) -> Backend:
        self.backend_results = []
        self._log_graph_block(module, module_name, graph, data, device, cache_dir)
        self._log("⏳ Executing strategy %s", type(self).__name__)
        start = time.perf_counter()
        backend = self._tune(module, module_name, graph, data, device, cache_dir)
        self._log("⏱️ Tune `%s`: completed in %s", type(self).__name__, format_duration(time.perf_counter() - start))
        return backend

    def tune_dry_run(self, module: torch.nn.Module, module_name: str, graph: GraphSpec, data: list[Sample],
                     device: torch.device, cache_dir: Path) -> None:
        self._log_graph_block(module, module_name, graph, data, device, cache_dir, dry_run=True)

    @abc.abstractmethod
    def _tune(self, module: torch.nn.Module, module_name: str, graph: GraphSpec, data: list[Sample],
              device: torch.device, cache_dir: Path) -> Backend: ...

    def _build_and_validate(self, blueprint: Backend, module: torch.nn.Module, module_name: str, graph: GraphSpec,
                            data: list[Sample], device: torch.device, cache_dir: Path,
                            raise_on_failure: bool) -> Backend | None:
        """Builds a deep copy of `blueprint` in `<cache_dir>/<key>/` and checks it. On failure
        the traceback goes to build.log, the module returns to the tuning device, and the error
        is re-raised or None returned."""
        backend = copy.deepcopy(blueprint)
        build_dir = Path(cache_dir) / backend.key()
        log_file = build_dir / "build.log"
        self._log("🤖 backend: %s", backend.describe())
        self._log("🔄 in progress...please wait")
        start = time.perf_counter()
        result: dict[str, Any] = {"backend": backend.describe(), "success": False}
        self.backend_results.append(result)
        try:
            with captured_output(log_file):
                backend.build(module, graph, copy.deepcopy(data), device, build_dir, log_file)
            self._log("✅ backend built")
            if self._correctness_check:
                description = f"{module_name}.{graph.name}.{backend.describe()}"
                check_correctness(backend, graph, data, description)
                self._log("✅ backend validated")
        except Exception as e:
            build_dir.mkdir(parents=True, exist_ok=True)
            with open(log_file, "a") as f:
                f.write("\n" + "".join(traceback.format_exception(e)))
            self._log("❌ backend failed (log file: %s)", log_file)
            result["error"] = f"{type(e).__name__}: {e}"
            backend.deactivate()
            module.to(device)
            if raise_on_failure:
                if hasattr(e, "log_path") and getattr(e, "log_path") is None:
                    e.log_path = log_file  # type: ignore[attr-defined]
                raise
            return None
        finally:
            self._log("⏱️ completed in %s", format_duration(time.perf_counter() - start))
        result["success"] = True
        return backend
