"""Serving a tuned module: the native dispatcher and what happens on an unknown graph
(docs/reference/dispatch.md)."""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from aitune._native import _C
from aitune.exceptions import GraphNotFoundError
from aitune.torch.backend.backend import Backend
from aitune.torch.graph.graph_spec import ConstantLeaf, GraphSpec, TensorLeaf, TensorsSpec, values_equal
from aitune.torch.graph.recording import Recorder

logger = logging.getLogger("aitune")


class TunedModule:
    """Graph -> backend for one module, served through one native Dispatcher."""

    def __init__(
        self,
        module_name: str,
        recorder: Recorder,
        backends: list[tuple[GraphSpec, Backend]],
        original_forward: Callable,
        fallback_policy: str,
        strict: bool,
    ) -> None:
        self.module_name = module_name
        self.recorder = recorder
        self.backends = backends
        self.original_forward = original_forward
        self.fallback_policy = fallback_policy
        self._warned: set[Any] = set()
        self._warn_lock = threading.Lock()
        self.strict = strict
        self.dispatcher = self._make_dispatcher()

    def _make_dispatcher(self) -> Any:
        """The dispatcher over the backends' current runners (rebuilt on activation, since a
        backend's runners are released when it is deactivated)."""
        dispatcher = _C.Dispatcher(
            self.recorder.signature,
            self.strict,
            self.recorder.llm_param,
            self.module_name,
            self._on_miss,
            values_equal,
            self._on_outside,
        )
        for graph, backend in self.backends:
            native = backend.native_runner()
            extra = {} if native is None else dict(zip(("native", "input_order", "rebuild"), native))
            rules = _input_rules(graph.input_spec, backend.input_profile())
            dispatcher.add_graph(
                graph.key,
                graph.name,
                backend.runner(),
                _eq_checks(graph.input_spec),
                rules,
                backend_desc=backend.describe(),
                **extra,
            )
        return dispatcher

    def _on_outside(self, graph: str, path: str, shape: list, min_shape: list, max_shape: list) -> None:
        logger.info(
            "Module '%s', graph '%s': input %s has shape %s, outside the tuned range min %s, max %s; the backend "
            "accepts it but may recompile or run slower (logged once per input)",
            self.module_name,
            graph,
            path,
            shape,
            min_shape,
            max_shape,
        )

    def _on_miss(self, *args: Any, **kwargs: Any) -> Any:
        key, leaves = self.recorder.flatten(args, kwargs)
        call = TensorsSpec.from_flat(leaves, None, is_output=False)
        known = "\n".join(f"  graph {g.display_name}: {g.input_spec.describe_structure()}" for g, _ in self.backends)
        message = (
            f"No backend found for a graph with metadata: {call.describe_structure()} "
            f"(module '{self.module_name}'). Known graphs:\n{known}\n"
            "Each distinct structure of inputs (paths, ranks and, in strict mode, non-tensor values) is tuned as "
            "its own graph: record calls of this structure before tuning, or set fallback_policy='eager'."
        )
        if self.fallback_policy != "eager":
            raise GraphNotFoundError(message)
        with self._warn_lock:
            first = key not in self._warned
            self._warned.add(key)
        if first:
            logger.warning("⚠️ %s; falling back to eager for module '%s'", message, self.module_name)
        return self.original_forward(*args, **kwargs)

    def activate(self) -> None:
        for _, backend in self.backends:
            backend.activate()
        self.dispatcher = self._make_dispatcher()

    def deactivate(self) -> None:
        for _, backend in self.backends:
            backend.deactivate()


def _eq_checks(spec: TensorsSpec) -> list[tuple[int, Any]]:
    return [(i, leaf.value) for i, leaf in enumerate(spec.leaves) if isinstance(leaf, ConstantLeaf) and leaf.needs_eq]


def _input_rules(spec: TensorsSpec, profile: list | None) -> list[Any]:
    """Per tensor input, a `_C.InputRule`: accepted dtypes and the shape range. With a backend
    profile (AOT backends) the range is hard (ProfileShapeError); otherwise it is the recorded
    envelope, reported once when left (docs/reference/dispatch.md#input-check)."""
    rules = []
    for k, (i, leaf) in enumerate((i, leaf) for i, leaf in enumerate(spec.leaves) if isinstance(leaf, TensorLeaf)):
        dtypes = [str(d).removeprefix("torch.") for d in leaf.dtypes]
        if profile is not None and profile[k] is not None:
            low, high = profile[k]
            shape_range, min_shape, max_shape = _C.ShapeRange.PROFILE, list(low), list(high)
        else:
            shape_range, min_shape, max_shape = _C.ShapeRange.ENVELOPE, leaf.spec.min_shape, leaf.spec.max_shape
        rules.append(
            _C.InputRule(
                leaf=i,
                dtypes=dtypes,
                path=repr(leaf.semantic_path),
                tensor_name=leaf.name,
                range=shape_range,
                min_shape=min_shape,
                max_shape=max_shape,
            )
        )
    return rules
