"""Serving a backend through the shared native CUDA-graph runner (docs/reference/dispatch.md#cuda-graph-runner).

The native runner works on flat tensor lists. A backend with a native runner of its own
(AOTInductor) is wrapped directly; for the others this adapter turns the graph's call structure
into the flat list (the tensor leaves, in the dispatcher's flattening order) and back, so one C++
implementation gives every backend CUDA graphs."""

from __future__ import annotations

from typing import Any, Callable

import torch

from aitune._native import _C
from aitune.torch.config import config
from aitune.torch.backend.common.serving_plan import OutputStructure, ServingPlan
from aitune.torch.graph.graph_spec import GraphSpec
from aitune.torch.graph.tree import canonical_call, map_tensors


def _key(path: Any) -> tuple:
    return path if isinstance(path, tuple) else (path,)


class CudaGraphServing:
    def __init__(
        self,
        infer: Callable,
        graph: GraphSpec,
        settings: tuple[int, bool] | None = None,
        native: ServingPlan | None = None,
    ) -> None:
        """`settings` = (cache size, clone outputs); None reads them from the config now. With
        `native` (a backend's own native plan, e.g. AOTInductor's), the runner wraps that native
        runner directly, in its input order and output structure: no Python per call, even for a
        key that is not captured. Otherwise it wraps `infer` on flat inputs (`_flat_call`)."""
        if graph.input_spec.constants and not config.strict_mode:
            raise ValueError(
                "use_cuda_graphs needs config.strict_mode=True when a graph has non-tensor inputs: a captured graph "
                "replays the non-tensor values it was captured with"
            )
        self._infer = infer
        self._params = graph.forward_params
        self._signature = _C.Signature(graph.forward_params)
        cache_size, clone = settings or (config.cuda_graph_cache_size, config.cuda_graph_clone_outputs)
        self.settings = (cache_size, clone)
        if native is not None:
            self._input_order = tuple(native.input_order)
            self.outputs: OutputStructure = native.outputs  # type: ignore[assignment]
            inner: Any = native.native
        else:
            sample = graph.samples[0]
            self._bound_template = self._signature.bind(sample.args, sample.kwargs)
            self._input_paths = [_key(leaf.semantic_path) for leaf in graph.input_spec.tensors]
            self._input_order = tuple(range(len(self._input_paths)))
            self.outputs = OutputStructure()  # learned from the first call
            inner = self._flat_call
        self.runner = _C.CudaGraphRunner(inner, cache_size=cache_size, clone_outputs=clone)

    def _flat_call(self, *tensors: torch.Tensor) -> list[torch.Tensor]:
        """The backend's call on flat inputs (used for warm-up and capture)."""
        by_path = dict(zip(self._input_paths, tensors))
        bound = map_tensors(self._bound_template, lambda path, t: by_path.get(path, t))
        args, kwargs = canonical_call(self._params, bound)
        return self.outputs.learn(self._infer(*args, **kwargs))

    def plan(self) -> ServingPlan:
        """The serving plan through this runner: the dispatcher hands it the tensor inputs natively."""
        return ServingPlan(self, self.runner, self._input_order, self.outputs)

    def __call__(self, *args: object, **kwargs: object) -> Any:
        """The served path from Python (Backend.infer): the same runner and rebuild as the plan's."""
        _, leaves = _C.flatten_call(self._signature, args, kwargs, config.strict_mode, -1)
        tensors = [leaf.value for leaf in leaves if leaf.is_tensor]
        return self.outputs.rebuild(self.runner.run([tensors[i] for i in self._input_order]))

    def stats(self) -> dict[str, int]:
        return dict(self.runner.stats())

    def capture_failure(self) -> str | None:
        """The runner's warning for its last failed capture, or None if none failed."""
        if not self.runner.stats().get("capture_failures", 0):
            return None
        return self.runner.last_warning or "the CUDA graph capture failed"
