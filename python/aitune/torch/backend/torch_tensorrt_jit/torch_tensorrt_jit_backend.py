"""TorchTensorRTJitBackend: torch.compile(backend="torch_tensorrt") of the module's original
forward (docs/reference/backends.md#per-backend-behaviour).

The build resets Dynamo, compiles with the config's Torch-TensorRT settings plus the tuning
device as ``options``, and warms up on every stored sample (Torch-TensorRT builds its engines
on the first calls, so tuning measures built engines). Each graph Dynamo hands to Torch-TensorRT
is counted with the TensorRT engines it came back with: a build where every graph fell back to
PyTorch is refused, one where some did is logged (common/torch_tensorrt_config.EngineCoverage). The engines live in Dynamo's cache and
are not saved: a loaded checkpoint compiles again from the weights and samples (is_jit).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

import torch
from torch._dynamo.backends.registry import lookup_backend

from aitune.exceptions import BackendUnavailableError
from aitune.torch.backend.common.autocast import AutocastMixin
from aitune.torch.backend.backend import Backend
from aitune.torch.backend.registry import register_backend
from aitune.torch.backend.common.jit_warmup import original_forward, run_warmup, warmup_calls
from aitune.torch.backend.common.compile_caches import reset_compiler_caches
from aitune.torch.backend.common.torch_tensorrt_config import (
    EngineCoverage,
    import_torch_tensorrt,
    settings_precision_class,
    settings_values,
    torch_tensorrt_availability,
)
from aitune.torch.backend.torch_tensorrt_jit.torch_tensorrt_jit_config import TorchTensorRTJitBackendConfig
from aitune.torch.validation import NumericTolerance
from aitune.torch.graph.graph_spec import GraphSpec

logger = logging.getLogger("aitune")
COMPILE_BACKEND = "torch_tensorrt"


@register_backend("torch_tensorrt_jit")
class TorchTensorRTJitBackend(AutocastMixin, Backend):
    config_class = TorchTensorRTJitBackendConfig
    _build_cost = 3.0  # TensorRT engines built per subgraph
    _devices = ("cuda",)

    def __init__(
        self, config: TorchTensorRTJitBackendConfig | None = None, *, tolerance: NumericTolerance | None = None
    ) -> None:
        super().__init__(config, tolerance=tolerance)
        self._module: torch.nn.Module | None = None
        self._forward: Callable | None = None
        self._compiled: Callable | None = None
        self._warmup_calls: list[tuple[tuple, dict]] = []
        self.engine_coverage = EngineCoverage()

    # -- identity ----------------------------------------------------------------------------
    @property
    def is_jit(self) -> bool:
        return True  # runs the original module's weights; loading compiles again

    def _plain_precision_class(self) -> str:
        return settings_precision_class(self.config.compile_config) or "fp32"

    def is_available(self) -> tuple[bool, str]:
        return torch_tensorrt_availability()

    def compile_options(self, device: torch.device) -> dict[str, object]:
        """torch.compile's ``options``: every Torch-TensorRT setting plus the tuning device."""
        options = settings_values(self.config.compile_config)
        options["device"] = device
        return options

    # -- lifecycle ---------------------------------------------------------------------------
    def _build(
        self, module: torch.nn.Module, graph_spec: GraphSpec, data: list, device: torch.device, cache_dir: Path
    ) -> None:
        if import_torch_tensorrt() is None:  # registers the "torch_tensorrt" torch.compile backend
            raise BackendUnavailableError(torch_tensorrt_availability()[1])
        torch._dynamo.reset()
        module.to(device)
        self._module = module
        self._forward = original_forward(module)
        self._warmup_calls = warmup_calls(graph_spec, data, widen=bool(self.config.dynamic), backend_name=self.name)
        self._detect_cast_back(self._forward, data)
        self._compile_and_warm_up()
        self.engine_coverage.check(self.name, graph_spec.name)

    def _compile_and_warm_up(self) -> None:
        config = self.config
        self.engine_coverage = EngineCoverage()
        self._compiled = torch.compile(
            self._forward,
            backend=_counting_backend(self.engine_coverage),
            options=self.compile_options(self._device),
            fullgraph=config.fullgraph,
            dynamic=config.dynamic,
        )
        run_warmup(self._compiled, self._warmup_calls, self._autocast)

    def _infer(self, *args: object, **kwargs: object) -> object:
        return self._call_autocast(self._compiled, *args, **kwargs)

    def _activate(self) -> None:
        if self._module is not None and self._device is not None:
            self._module.to(self._device)
        if self._forward is not None:
            self._compile_and_warm_up()

    def _deactivate(self) -> None:
        self._compiled = None
        reset_compiler_caches()  # frees the engines held by Dynamo's cache


def _counting_backend(coverage: EngineCoverage) -> Callable:
    """The "torch_tensorrt" torch.compile backend, counting the engines of each graph it compiles."""
    compile_graph = lookup_backend(COMPILE_BACKEND)

    def torch_tensorrt_counted(gm: torch.fx.GraphModule, example_inputs: list, **kwargs: object) -> Callable:
        compiled = compile_graph(gm, example_inputs, **kwargs)
        coverage.add(compiled)
        return compiled

    return torch_tensorrt_counted
