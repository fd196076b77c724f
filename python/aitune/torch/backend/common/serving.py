"""A graph served by its backend's ServingPlan through the native dispatcher (docs/reference/dispatch.md#serving-plan):
`add_graph` is how a tuned module's dispatcher gets each graph (module/tuned.py), and
`graph_dispatcher` is the same for one graph alone — the callable the strategies time, so a
candidate is measured through the path that will serve it (bind, flatten, key, input check, native
runner or Python call, output rebuild)."""

from __future__ import annotations

import logging
from typing import Any

from aitune._native import _C
from aitune.torch.backend.backend import Backend
from aitune.torch.config import config
from aitune.torch.graph.graph_spec import ConstantLeaf, GraphSpec, TensorLeaf, TensorsSpec, values_equal
from aitune.torch.graph.recording import llm_param_index

logger = logging.getLogger("aitune")


def eq_checks(spec: TensorsSpec) -> list[tuple[int, Any]]:
    """(leaf index, recorded value) of the constants a call must equal (confirmed with ==)."""
    return [(i, leaf.value) for i, leaf in enumerate(spec.leaves) if isinstance(leaf, ConstantLeaf) and leaf.needs_eq]


def input_rules(spec: TensorsSpec, profile: list | None) -> list[Any]:
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


def add_graph(dispatcher: Any, graph: GraphSpec, backend: Backend) -> None:
    """Adds `graph`, served by the active `backend`'s current plan, to a `_C.Dispatcher`."""
    plan = backend.serving_plan()
    dispatcher.add_graph(
        graph.key,
        graph.name,
        plan.call,
        eq_checks(graph.input_spec),
        input_rules(graph.input_spec, backend.input_profile()),
        native=plan.native,
        input_order=list(plan.input_order),
        rebuild=plan.rebuild,
        backend_desc=backend.describe(),
    )


def graph_dispatcher(graph: GraphSpec, backend: Backend, module_name: str = "") -> Any:
    """A `_C.Dispatcher` serving `graph` alone with `backend`, built as a tuned module's is: calls
    of the graph (its samples, batched) take exactly the served path. A call of another graph is
    refused, since serving it would measure something else."""

    def on_miss(*args: object, **kwargs: object) -> Any:
        raise RuntimeError(
            f"graph '{graph.name}' of module '{module_name}': a call made from its own samples does not select it "
            f"in the serving dispatcher; expected inputs {graph.input_spec.describe_structure()}"
        )

    def on_outside(name: str, path: str, shape: list, min_shape: list, max_shape: list) -> None:
        # Measuring beyond the recorded envelope is expected (the max-batch search, batch sweeps).
        logger.debug(
            "measuring graph %s: input %s has shape %s, outside %s..%s", name, path, shape, min_shape, max_shape
        )

    params = graph.forward_params
    dispatcher = _C.Dispatcher(
        _C.Signature(params),
        config.strict_mode,
        llm_param_index(params),
        module_name,
        on_miss,
        values_equal,
        on_outside,
    )
    add_graph(dispatcher, graph, backend)
    return dispatcher
