"""Serving a backend through the shared native CUDA-graph runner (docs/reference/dispatch.md#cuda-graph-runner).

The native runner works on flat tensor lists; this adapter turns the graph's call structure
into the flat list (the tensor leaves, in the dispatcher's flattening order) and back, so one
C++ implementation gives every backend CUDA graphs."""

from __future__ import annotations

from typing import Any, Callable

import torch

from aitune._native import _C
from aitune.torch.config import config
from aitune.torch.graph.graph_spec import GraphSpec
from aitune.torch.graph.locator import semantic_path
from aitune.torch.graph.tree import canonical_call, map_tensors


def _key(path: Any) -> tuple:
    return path if isinstance(path, tuple) else (path,)


class CudaGraphServing:
    def __init__(self, infer: Callable, graph: GraphSpec, settings: tuple[int, bool] | None = None) -> None:
        """`settings` = (cache size, clone outputs); None reads them from the config now."""
        if graph.input_spec.constants and not config.strict_mode:
            raise ValueError(
                "use_cuda_graphs needs config.strict_mode=True when a graph has non-tensor inputs: a captured graph "
                "replays the non-tensor values it was captured with"
            )
        self._infer = infer
        self._params = graph.forward_params
        self._signature = _C.Signature(graph.forward_params)
        sample = graph.samples[0]
        self._bound_template = self._signature.bind(sample.args, sample.kwargs)
        self._input_paths = [_key(leaf.semantic_path) for leaf in graph.input_spec.tensors]
        self._output_template: Any = None
        self._output_paths: list[tuple] = []
        cache_size, clone = settings or (config.cuda_graph_cache_size, config.cuda_graph_clone_outputs)
        self.settings = (cache_size, clone)
        self.runner = _C.CudaGraphRunner(self._flat_call, cache_size=cache_size, clone_outputs=clone)

    def _flat_call(self, *tensors: torch.Tensor) -> list[torch.Tensor]:
        """The backend's call on flat inputs (used for warm-up and capture)."""
        by_path = dict(zip(self._input_paths, tensors))
        bound = map_tensors(self._bound_template, lambda path, t: by_path.get(path, t))
        args, kwargs = canonical_call(self._params, bound)
        output = self._infer(*args, **kwargs)
        _, leaves = _C.flatten_value(output)
        if self._output_template is None:
            self._output_template = output
            self._output_paths = [_key(semantic_path(s)) if s else () for s, _, is_t, _ in leaves if is_t]
        return [value for _, value, is_tensor, _ in leaves if is_tensor]

    def rebuild(self, outputs: list[torch.Tensor]) -> Any:
        if self._output_template is None:
            raise RuntimeError("CUDA-graph runner produced outputs before its first capture")
        if self._output_paths == [()]:
            return outputs[0]
        by_path = dict(zip(self._output_paths, outputs))
        return map_tensors(self._output_template, lambda path, t: by_path.get(path, t))

    def num_outputs(self) -> int:
        """How many tensors the runner returns per call (known after the first call)."""
        if self._output_template is None:
            raise RuntimeError("CUDA-graph runner has not run yet: its outputs are unknown")
        return len(self._output_paths)

    def native(self) -> tuple[Any, list[int], Callable | None]:
        # A single-tensor output needs no rebuild: the dispatcher returns it directly.
        single = self._output_template is not None and self._output_paths == [()]
        return self.runner, list(range(len(self._input_paths))), None if single else self.rebuild

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The served path from Python (tuning measures this)."""
        _, leaves = _C.flatten_call(self._signature, args, kwargs, config.strict_mode, -1)
        tensors = [value for _, value, is_tensor, _ in leaves if is_tensor]
        return self.rebuild(self.runner.run(tensors))

    def stats(self) -> dict[str, int]:
        return dict(self.runner.stats())

    def capture_failure(self) -> str | None:
        """The runner's warning for its last failed capture, or None if none failed."""
        if not self.runner.stats().get("capture_failures", 0):
            return None
        return self.runner.last_warning or "the CUDA graph capture failed"
