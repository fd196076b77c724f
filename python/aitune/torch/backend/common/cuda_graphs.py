"""Serving a backend through the shared native CUDA-graph runner (docs/reference/dispatch.md#cuda-graph-runner).

`CudaGraphs` is the part of a backend that does it: every Backend owns one (`backend.cuda_graphs`),
which knows whether the config asks for CUDA graphs (`ServingOptions`) and holds the runner while
the backend serves. `CudaGraphServing` is that runner's Python side.

The native runner works on flat tensor lists. A backend with a native runner of its own
(AOTInductor) is wrapped directly; for the others this adapter turns the graph's call structure
into the flat list (the tensor leaves, in the dispatcher's flattening order) and back, so one C++
implementation gives every backend CUDA graphs."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol

import torch

from aitune._native import _C
from aitune.exceptions import AITuneUserInputError
from aitune.torch.config import config
from aitune.torch.backend.common.serving_plan import OutputStructure, ServingPlan
from aitune.torch.graph.graph_spec import GraphSpec
from aitune.torch.graph.tree import canonical_call, map_tensors
from aitune.torch.utils.env import env_bool


def _key(path: object) -> tuple:
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


class ServingOptions:
    """Marks a config whose backend can serve through aitune's CUDA-graph runner
    (docs/reference/dispatch.md#cuda-graph-runner). The config dataclass declares the field itself,
    `use_cuda_graphs: bool = False`, in its own field order; this base only names the switch."""

    use_cuda_graphs: bool = False

    @staticmethod
    def declared_by(config: object) -> bool:
        """The config has the switch: it derives from ServingOptions or, as a config written before
        this base existed does, declares a `use_cuda_graphs` dataclass field."""
        if isinstance(config, ServingOptions):
            return True
        return dataclasses.is_dataclass(config) and any(f.name == "use_cuda_graphs" for f in dataclasses.fields(config))

    @staticmethod
    def requested_by(config: Any) -> bool:
        """CUDA-graph serving is switched on in `config`."""
        return ServingOptions.declared_by(config) and bool(config.use_cuda_graphs)


class ServedBackend(Protocol):
    """What CudaGraphs reads from the backend that owns it (backend.py's Backend)."""

    config: Any
    _graph_spec: GraphSpec | None

    def _infer(self, *args: Any, **kwargs: Any) -> Any: ...

    def _native_plan(self) -> ServingPlan | None: ...

    def describe(self) -> str: ...


def _disabled() -> bool:
    return env_bool("AITUNE_DISABLE_CUDA_GRAPHS", False)


class CudaGraphs:
    """One backend's CUDA-graph serving: whether its config asks for it (`requested`), the runner
    serving its calls while it is active (`serving`, None otherwise) and the runner's settings,
    fixed at the first start. The Backend starts it when it starts serving and stops it when it
    is deactivated; a serving sibling (backend.py's serving_variant) gets its own."""

    def __init__(self, backend: ServedBackend) -> None:
        self._backend = backend
        self.serving: CudaGraphServing | None = None
        # (cache size, clone outputs), fixed at the first start: a later activation (ait.tune
        # activates every tuned module) must not pick up a config changed since.
        self.settings: tuple[int, bool] | None = None

    @property
    def requested(self) -> bool:
        """True when the config asks for serving through the CUDA-graph runner."""
        return ServingOptions.requested_by(self._backend.config)

    def for_sibling(self, sibling: ServedBackend) -> CudaGraphs:
        """A fresh, stopped one for a serving sibling of the backend (no settings yet)."""
        return type(self)(sibling)

    def check_device(self, device: torch.device) -> None:
        """Refuses a build for CUDA-graph serving on a device that is not a CUDA device."""
        if self.requested and device.type != "cuda":
            raise AITuneUserInputError(
                f"{self._backend.describe()} needs a CUDA device for use_cuda_graphs=True; the tuning device is {device}"
            )

    def start(self) -> None:
        """A new runner over the backend's serving, when requested (and not switched off by
        AITUNE_DISABLE_CUDA_GRAPHS); wraps the backend's native plan when it has one."""
        if self.requested and not _disabled():
            backend = self._backend
            self.serving = CudaGraphServing(backend._infer, backend._graph_spec, self.settings, backend._native_plan())
            self.settings = self.serving.settings

    def stop(self) -> None:
        """Drops the runner: frees the captured graphs and their memory pool."""
        self.serving = None

    def release_captures(self) -> None:
        """Drops every captured CUDA graph (and its memory pool) but keeps serving through CUDA
        graphs: the next call of each input signature captures again. For a measured candidate
        that is kept for a later selection, so a sweep over many batch sizes does not hold a pool
        per size per candidate."""
        if self.serving is not None:
            self.serving = None
            self.start()

    def capture_failure(self) -> str | None:
        """Why a CUDA-graph capture of the backend's calls failed, or None when every capture so
        far succeeded (or CUDA graphs are off). A failed capture makes the shared runner fall back
        to plain calls for that input signature, so the candidate would not be what it claims."""
        return None if self.serving is None else self.serving.capture_failure()

    def stats(self) -> dict[str, int] | None:
        """The runner's counters (docs/reference/dispatch.md#cuda-graph-runner), or None when not serving."""
        return None if self.serving is None else self.serving.stats()

    def plan(self) -> ServingPlan | None:
        """The serving plan through the runner, or None when not serving."""
        return None if self.serving is None else self.serving.plan()
