"""Serving a tuned module: the native dispatcher and what happens on an unknown graph
(docs/reference/dispatch.md)."""

from __future__ import annotations

import logging
import threading
from typing import Callable

from aitune._native import _C
from aitune.exceptions import GraphNotFoundError
from aitune.torch.backend.backend import Backend
from aitune.torch.backend.common.serving import add_graph
from aitune.torch.graph.graph_spec import GraphSpec, TensorsSpec, values_equal
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
        self._warned: set[_C.GraphKey] = set()
        self._warn_lock = threading.Lock()
        self.strict = strict
        self.dispatcher = self._make_dispatcher()

    def _make_dispatcher(self) -> _C.Dispatcher:
        """The dispatcher over the backends' current serving plans (rebuilt on activation, since a
        backend's runners are released when it is deactivated). Each graph is added exactly as the
        strategies' timing dispatcher adds it (backend/common/serving.py)."""
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
            add_graph(dispatcher, graph, backend)
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

    def _on_miss(self, *args: object, **kwargs: object) -> object:
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
