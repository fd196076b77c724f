"""Recording of a module's calls into graph specs and samples (docs/reference/recording.md)."""

from __future__ import annotations

import copy
import logging
from typing import Callable, Mapping, TypeVar

from aitune._native import _C
from aitune.torch.graph import dynamic_shapes as dyn
from aitune.torch.config import config
from aitune.torch.global_context import current_batch_size
from aitune.torch.graph.graph_spec import GraphSpec, Sample, TensorsSpec, values_equal
from aitune.torch.graph.locator import SemanticPath, semantic_path
from aitune.torch.graph.signature import forward_params
from aitune.torch.graph.tree import canonical_call

logger = logging.getLogger("aitune")
T = TypeVar("T")


def copy_inputs(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Deep copy before the forward runs: forwards may mutate inputs (KV caches)."""
    try:
        return copy.deepcopy((args, kwargs))
    except RuntimeError as e:
        raise RuntimeError(
            "Cannot copy model inputs. Model is not in no_grad mode. Tip: run tuning and recorded calls under "
            "`with torch.no_grad(): ...`. Original error: " + str(e)
        ) from e


def llm_param_index(params: list) -> int:
    """Index of the `cache_position` parameter whose phase (prefill/decode) is part of the graph key
    (docs/reference/recording.md), or -1 (none, or the transformers integration is off)."""
    if not config.enable_transformers_integration:
        return -1
    for index, (name, _, _) in enumerate(params):
        if name == "cache_position":
            return index
    return -1


class Recorder:
    """Per-module recording state: the signature, the graphs in discovery order, and samples."""

    def __init__(
        self,
        module_name: str,
        forward: Callable,
        dynamic_shapes: Mapping[dyn.InputPath, dyn.ShapeDefinition] | None = None,
    ) -> None:
        self.module_name = module_name
        self.params = forward_params(forward)
        self.signature = _C.Signature(self.params)
        self.dynamic_shapes = dynamic_shapes
        self._native_defs = dyn.to_native(dynamic_shapes) if dynamic_shapes else None
        self.graphs: list[GraphSpec] = []
        self._by_key: dict[_C.GraphKey, list[GraphSpec]] = {}

    @property
    def llm_param(self) -> int:
        return llm_param_index(self.params)

    def flatten(self, args: tuple, kwargs: dict) -> tuple[_C.GraphKey, list[_C.Leaf]]:
        return _C.flatten_call(self.signature, args, kwargs, config.strict_mode, self.llm_param)

    def find_graph(self, key: _C.GraphKey, leaves: list[_C.Leaf]) -> GraphSpec | None:
        for graph in self._by_key.get(key, ()):
            if all(
                values_equal(leaf.value, const.value)
                for leaf, const in zip(leaves, graph.input_spec.leaves)
                if leaf.needs_eq and not leaf.is_tensor
            ):
                return graph
        return None

    def record(self, args: tuple, kwargs: dict, run: Callable[[], T]) -> T:
        """Records one call: checks declared dynamic shapes, copies the inputs, runs the
        forward through `run`, then files the sample under its graph."""
        key, leaves = self.flatten(args, kwargs)
        batch_size = current_batch_size()
        if self._native_defs is not None:
            tensors = [(repr(_path(leaf.path)), list(leaf.value.shape)) for leaf in leaves if leaf.is_tensor]
            _C.check_call_against_defs(self.module_name, self._native_defs, tensors)
        graph = self.find_graph(key, leaves)
        sample_needed = graph is None or len(graph.samples) < config.max_num_samples_stored
        copied = None
        if sample_needed:  # stored in the canonical layout, so m(x) and m(x=x) give the same sample
            copied = copy_inputs(*canonical_call(self.params, self.signature.bind(args, kwargs)))
        output = run()
        _, out_leaves = _C.flatten_value(output)
        if graph is None:
            graph = self._new_graph(key, leaves, out_leaves, batch_size)
        else:
            for warning in graph.input_spec.update(leaves, batch_size):
                logger.warning("Module '%s', graph '%s': %s", self.module_name, graph.name, warning)
            if len(out_leaves) == len(graph.output_spec.leaves):
                graph.output_spec.update(out_leaves, batch_size)
        graph.num_calls += 1
        if batch_size is not None and batch_size not in graph.observed_batch_sizes:
            graph.observed_batch_sizes.append(batch_size)
        if copied is not None and len(graph.samples) < config.max_num_samples_stored:
            graph.samples.append(Sample(copied[0], copied[1], batch_size))
        return output

    def _new_graph(
        self, key: _C.GraphKey, leaves: list[_C.Leaf], out_leaves: list[_C.Leaf], batch_size: int | None
    ) -> GraphSpec:
        llm_phase = None
        if self.llm_param >= 0:
            name = self.params[self.llm_param][0]
            position = next((leaf.value for leaf in leaves if leaf.is_tensor and leaf.path[0][1] == name), None)
            if position is not None:
                llm_phase = "prefill" if position.numel() == 0 or int(position.reshape(-1)[0]) == 0 else "decode"
        graph = GraphSpec(
            name=str(len(self.graphs)),
            key=key,
            inputs=TensorsSpec.from_flat(leaves, batch_size, is_output=False),
            outputs=TensorsSpec.from_flat(out_leaves, batch_size, is_output=True),
            forward_params=self.params,
            dynamic_shapes=self.dynamic_shapes,
            llm_phase=llm_phase,
        )
        self.graphs.append(graph)
        self._by_key.setdefault(key, []).append(graph)
        return graph

    def replace_graphs(self, graphs: list[GraphSpec]) -> None:
        """Serves `graphs` (a loaded checkpoint's) instead of what was recorded."""
        self.graphs = list(graphs)
        self._by_key = {}
        for graph in self.graphs:
            self._by_key.setdefault(graph.key, []).append(graph)

    def check_dynamic_paths_observed(self) -> None:
        if self._native_defs is None:
            return
        recorded = {repr(t.semantic_path) for g in self.graphs for t in g.input_spec.tensors}
        _C.check_defs_observed(self.module_name, self._native_defs, sorted(recorded))


def _path(steps: tuple) -> SemanticPath:
    return semantic_path(steps)
