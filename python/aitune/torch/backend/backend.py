"""The backend interface (docs/reference/api.md#backend-classes, docs/reference/backends.md#common-behaviour): a
blueprint that a strategy deep-copies and builds for one graph; the built copy serves the graph's calls."""

from __future__ import annotations

import abc
import contextlib
import copy
import dataclasses
import enum
import hashlib
import json
import logging
import typing
from pathlib import Path
from typing import Any, ClassVar, Iterator

import torch

from aitune.exceptions import AITuneUserInputError, BackendUnavailableError, CudaGraphCaptureError
from aitune.torch.backend import registry
from aitune.torch.backend.common.reference_contract import BuildMode, Contract, ExecutionMode
from aitune.torch.checkpoint.artifact import ArtifactPath
from aitune.torch.utils.env import env_bool
from aitune.torch.backend.common.cuda_graphs import CudaGraphServing
from aitune.torch.backend.common.serving_plan import OutputStructure, ServingPlan

__all__ = [
    "ArtifactPath",
    "Backend",
    "BackendConfig",
    "BackendState",
    "BuildMode",
    "ExecutionMode",
    "OutputStructure",
    "ServingOptions",
    "ServingPlan",
]

logger = logging.getLogger("aitune")


def _cuda_graphs_disabled() -> bool:
    return env_bool("AITUNE_DISABLE_CUDA_GRAPHS", False)


class BackendState(enum.Enum):
    INIT = "init"
    ACTIVE = "active"
    INACTIVE = "inactive"
    CHECKPOINT_LOADED = "checkpoint_loaded"
    DEPLOYED = "deployed"


def _json_value(value: Any) -> Any:
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _json_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(_json_value(v) for v in value)
    return value


@dataclasses.dataclass
class BackendConfig:
    """Base of every backend config: one dataclass per backend, default member values."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _json_value(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BackendConfig:
        """Inverse of to_dict(): dtypes saved as "torch.float16" come back as torch dtypes."""
        values = {}
        for key, value in data.items():
            if (
                isinstance(value, str)
                and value.startswith("torch.")
                and isinstance(getattr(torch, value[6:], None), torch.dtype)
            ):
                value = getattr(torch, value[6:])
            values[key] = value
        _check_scalar_types(cls, values)
        return cls(**values)

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()

    def describe(self) -> str:
        """The fields that differ from a default-constructed config, as `name=value`."""
        try:
            default = type(self)()
        except TypeError:
            default = None
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if default is not None and getattr(default, f.name) == value:
                continue
            parts.append(f"{f.name}={value!r}")
        return ", ".join(parts)

    def to_json(self, path: Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True))


_SCALAR_HINTS = {bool: (bool,), int: (int,), float: (int, float), str: (str,), torch.dtype: (torch.dtype,)}


def _check_scalar_types(cls: type, values: dict[str, Any]) -> None:
    """A saved config comes from a file: a field declared bool, int, float, str or dtype (or an
    Optional of one) must hold that type, so `autocast_enabled: "cuda:0"` is refused rather than
    read as True (a fuzzer find). Other annotations (lists, enums, nested configs) are left to the
    config's own checks."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - unresolvable annotations: nothing to check against
        return
    for key, value in values.items():
        hint = hints.get(key)
        allowed: tuple = ()
        optional = False
        if hint in _SCALAR_HINTS:
            allowed = _SCALAR_HINTS[hint]
        else:
            args = typing.get_args(hint)
            if type(None) in args and len(args) == 2:
                inner = next(a for a in args if a is not type(None))
                allowed, optional = _SCALAR_HINTS.get(inner, ()), True
        if not allowed or (optional and value is None):
            continue
        if isinstance(value, bool) and bool not in allowed or not isinstance(value, allowed):
            raise TypeError(
                f"{cls.__name__}.{key} must be {' or '.join(t.__name__ for t in allowed)}"
                f"{' or None' if optional else ''}, got {type(value).__name__} {value!r}"[:300]
            )


def cost_factor(settings: dict[str, Any], factors: dict[str, tuple[tuple[Any, ...], float]]) -> float:
    """The product of the factors whose setting holds one of its values (expected_build_cost)."""
    product = 1.0
    for name, (values, factor) in factors.items():
        if name in settings and settings[name] in values:
            product *= factor
    return product


class ServingOptions:
    """Marks a config whose backend can serve through aitune's CUDA-graph runner
    (docs/reference/dispatch.md#cuda-graph-runner). The config dataclass declares the field itself,
    `use_cuda_graphs: bool = False`, in its own field order; this base only names the switch."""

    use_cuda_graphs: bool = False

    @staticmethod
    def declared_by(config: Any) -> bool:
        """The config has the switch: it derives from ServingOptions or, as a config written before
        this base existed does, declares a `use_cuda_graphs` dataclass field."""
        if isinstance(config, ServingOptions):
            return True
        return dataclasses.is_dataclass(config) and any(f.name == "use_cuda_graphs" for f in dataclasses.fields(config))

    @staticmethod
    def requested_by(config: Any) -> bool:
        """CUDA-graph serving is switched on in `config`."""
        return ServingOptions.declared_by(config) and bool(config.use_cuda_graphs)


class _SharedBuild:
    """One build, served by one backend or by several serving variants of it (a CUDA-graph
    variant and its plain sibling, see serving_variant()). `users` counts the active ones: the
    build's resources are released when the last one is deactivated, not before."""

    __slots__ = ("users",)

    def __init__(self) -> None:
        self.users = 0


class Backend(abc.ABC):
    """Lifecycle INIT -build-> ACTIVE <-> INACTIVE (docs/reference/backends.md#common-behaviour)."""

    # The contract, each hook with its default (docs/design.md#adding-a-backend):
    #   _build(module, graph, data, device, cache_dir)  required: make the artefacts / compiled program
    #   _infer(*args, **kwargs)                         required: serve one call of the graph
    #   _restore(artifacts, graph, device)              with restores_from_artifacts: load the saved artefacts (checked at class definition)
    #   _activate() / _deactivate()                     take / release what serving holds; default: nothing
    #   _artifacts()                                    the files saved with a checkpoint; default: none
    #   availability(device)                            (ok, reason) on a device; default: _devices
    #   requirements()                                  fingerprint fields the artefacts depend on
    #   is_jit, precision_class, input_profile()        what the strategies and the manifest record
    #   _build_cost, _build_cost_factors                expected_build_cost(): the order under a tuning budget
    #   _native_plan()                                  a ServingPlan over the artefact's own native runner; default: none
    # A class is registered (registry.py) under `custom:<module>.<qualname>` when it is defined;
    # `@register_backend("name")` gives it a stable name instead.
    _devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")
    config_class: ClassVar[type[BackendConfig]] = BackendConfig
    _contract: ClassVar[Contract] = Contract()
    restores_from_artifacts: ClassVar[bool] = False  # True: restore() loads a checkpoint's artefacts, no rebuild
    # Relative build cost (eager 0.1, Inductor 1, AOTInductor 1.5, TensorRT 3), and config fields
    # that raise it: field -> (the values that do, factor). See expected_build_cost().
    _build_cost: ClassVar[float] = 1.0
    _build_cost_factors: ClassVar[dict[str, tuple[tuple[Any, ...], float]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A backend written to AITune's contract (4-argument _build, _deploy() without a device,
        # its own to_dict/from_dict) is recognised once, here (reference_contract.py).
        cls._contract = Contract.of(cls)
        # The restore contract is checked when the class is defined, not when a checkpoint is
        # loaded: a class that says it restores from artefacts must say how.
        if cls.restores_from_artifacts and not callable(getattr(cls, "_restore", None)):
            raise TypeError(
                f"{cls.__name__} sets restores_from_artifacts = True but defines no "
                "_restore(self, artifacts, graph, device); define it, or leave restores_from_artifacts False "
                "so that a checkpoint is rebuilt from the module and the stored samples"
            )
        registry.register_automatically(cls)

    def __init__(self, config: BackendConfig | None = None, *, tolerance: Any = None) -> None:
        if config is None:
            config = self.config_class()
        if not isinstance(config, self.config_class):
            raise TypeError(f"{type(self).__name__} takes a {self.config_class.__name__}, got {type(config).__name__}")
        self.config = config
        self.tolerance = tolerance
        self._state = BackendState.INIT
        self._device: torch.device | None = None
        self._cuda_graph: Any = None  # CudaGraphServing when config.use_cuda_graphs is on
        self._graph_spec: Any = None
        self._cuda_graph_settings: Any = None  # fixed at the first CUDA-graph start (see _start_cuda_graphs)
        self._restored_profile: list | None = None  # the shape range saved with a checkpoint
        self._shared = _SharedBuild()
        self.derived_from: str | None = None  # describe() of the backend whose build this one serves
        # Set by the strategy's numeric check: {"precision_class": ..., "tf32": {...}}; saved with
        # a checkpoint so every later check judges the outputs by the same class.
        self.validated_precision: dict[str, Any] | None = None

    # -- identity --------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return type(self).__name__

    def describe(self) -> str:
        return f"{self.name}({self.config.describe()})"

    def key(self) -> str:
        return f"{self.name}_{self.config.key()}"

    def sibling_key(self) -> str | None:
        """Identifies the build this backend makes: its class and config without use_cuda_graphs,
        which only changes how the build is served. Backends with equal keys are serving siblings
        and can share one build. None for configs without use_cuda_graphs."""
        data = self.config.to_dict()
        if "use_cuda_graphs" not in data:
            return None
        data.pop("use_cuda_graphs")
        return f"{type(self).__module__}.{type(self).__qualname__}:" + json.dumps(data, sort_keys=True, default=str)

    def to_dict(self) -> dict[str, Any]:
        data = {"class": f"{type(self).__module__}.{type(self).__qualname__}", "config": self.config.to_dict()}
        data.update({key: artifact for key, artifact in self._artifacts().items() if artifact is not None})
        return data

    def _artifacts(self) -> dict[str, Any]:
        """The built files saved with a checkpoint (ArtifactPath by key); None entries are left out."""
        return {}

    @property
    def is_jit(self) -> bool:
        """True when the backend needs the original module at run time."""
        return False

    @property
    def device(self) -> torch.device | None:
        return self._device

    @property
    def state(self) -> BackendState:
        return self._state

    @state.setter
    def state(self, value: BackendState) -> None:
        # AITune backends set their state themselves (from_dict: CHECKPOINT_LOADED).
        self._state = BackendState(value)

    @property
    def _logger(self) -> logging.Logger:
        """The logger of the backend's own module (AITune backends log through it)."""
        return logging.getLogger(type(self).__module__)

    def _set_device(self, device: Any) -> None:
        """AITune's helper: the device the backend serves on."""
        if device is not None:
            self._device = torch.device(device)
        if self._device is None:
            raise ValueError("Device is not set. Please set the device before deploying.")

    @contextlib.contextmanager
    def _track_build_step(self, step: Any) -> Iterator[dict[str, Any]]:
        """AITune's helper: records one build step (`with self._track_build_step(step) as result:`)
        and whether it succeeded; the steps are kept in `self._build_results`."""
        result: dict[str, Any] = {"step": step}
        steps = self.__dict__.setdefault("_build_results", [])
        try:
            yield result
            result["success"] = True
        except Exception:
            result["success"] = False
            raise
        finally:
            steps.append(result)

    @property
    def is_active(self) -> bool:
        return self._state in (BackendState.ACTIVE, BackendState.DEPLOYED)

    @property
    def precision_class(self) -> str:
        return "fp32"

    def is_available(self) -> tuple[bool, str]:
        """(available, reason) for the backend's packages alone (AITune's name; no device).
        Overridden by backends whose packages may be missing."""
        return True, ""

    def availability(self, device: torch.device) -> tuple[bool, str]:
        """(available, reason) on `device`: packages present, the device type among `_devices`,
        and whatever `_unavailable_on` says. The strategies skip an unavailable backend with the
        reason instead of failing its build; build() refuses it."""
        ok, reason = self.is_available()
        if not ok:
            return False, reason
        if device.type not in self._devices:
            return False, f"Device {device.type} is not supported by the backend {self.name}"
        reason = self._unavailable_on(device)
        return (False, reason) if reason else (True, "")

    def _unavailable_on(self, device: torch.device) -> str | None:
        """Why the backend cannot run on `device` although its packages are present (e.g. a
        CPU-only runtime asked for a CUDA device), or None."""
        return None

    def unavailable_on(self, device: torch.device) -> str | None:
        """The public name docs/reference/api.md#backend-classes documents for _unavailable_on."""
        return self._unavailable_on(device)

    def requirements(self) -> list[str]:
        """The environment fingerprint fields the saved artefacts depend on
        (docs/reference/checkpoint.md#integrity-and-compatibility): none for JIT and eager backends
        (they rebuild from weights and samples); torch, plus the GPU SM and CUDA major on CUDA, by default."""
        if self.is_jit:
            return []
        fields = ["torch"]
        if self._device is not None and self._device.type == "cuda":
            fields += ["gpu_sm", "cuda_major"]
        return fields

    def expected_build_cost(self) -> float:
        """How long this candidate takes to build, relative to Inductor JIT's 1.0: `_build_cost`
        times the factor of every `_build_cost_factors` field the config sets to one of its values.
        Under a tuning budget the strategies try cheaper candidates first, and skip one whose cost
        times the seconds per unit measured on the builds so far exceeds the time left
        (docs/reference/strategies.md#tuning-budget). CUDA-graph serving does not change it."""
        return self._build_cost * cost_factor(self.config.to_dict(), self._build_cost_factors)

    @property
    def serves_cuda_graphs(self) -> bool:
        """True when the config asks for serving through the CUDA-graph runner."""
        return ServingOptions.requested_by(self.config)

    # -- lifecycle -------------------------------------------------------------------------
    def build(
        self,
        module: torch.nn.Module,
        graph_spec: Any,
        data: list,
        device: Any,
        cache_dir: Path,
        log_file: Path | None = None,
    ) -> Backend:
        if self._state is not BackendState.INIT:
            raise RuntimeError(f"Backend {self.name} build should be called only once")
        device = torch.device(device)
        available, reason = self.is_available()
        if not available:
            raise BackendUnavailableError(reason)
        if device.type not in self._devices:
            raise BackendUnavailableError(f"Device {device.type} is not supported by the backend {self.name}")
        cache_dir = Path(cache_dir)
        cache_dir.mkdir(parents=True, exist_ok=True)
        self._check_cuda_graphs_device(device)
        self.config.to_json(cache_dir / "config.json")
        self._device = device
        if self._contract.build_takes_device:
            self._build(module, graph_spec, data, device, cache_dir)
        else:  # AITune's contract: the device is self.device, set above
            self._build(module, graph_spec, data, cache_dir)
        self._graph_spec = graph_spec
        self._shared.users = 1
        self._state = BackendState.ACTIVE
        try:
            self._start_cuda_graphs()
        except Exception as e:
            # The build itself is complete and usable without CUDA graphs (its plain sibling).
            raise CudaGraphCaptureError(f"{self.describe()}: CUDA-graph serving could not start: {e}") from e
        return self

    def serving_variant(self, use_cuda_graphs: bool) -> Backend:
        """A sibling that serves this backend's build with CUDA graphs on or off: no rebuild, its
        own serving state and config. The build's resources stay until every variant sharing it is
        deactivated. Needs a built backend whose build is still held by an active variant."""
        if self._graph_spec is None or self._shared.users <= 0:
            raise RuntimeError(f"{self.describe()} has no live build to serve another way")
        if not ServingOptions.declared_by(self.config):
            raise TypeError(f"{type(self.config).__name__} has no use_cuda_graphs switch")
        sibling = copy.copy(self)
        sibling.config = dataclasses.replace(self.config, use_cuda_graphs=use_cuda_graphs)
        sibling._cuda_graph = None
        sibling._cuda_graph_settings = None
        sibling.derived_from = self.describe()
        self._shared.users += 1
        sibling._state = BackendState.ACTIVE
        try:
            sibling._start_cuda_graphs()
        except Exception as e:
            sibling.deactivate()
            raise CudaGraphCaptureError(f"{sibling.describe()}: CUDA-graph serving could not start: {e}") from e
        return sibling

    def release_cuda_graph_captures(self) -> None:
        """Drops every captured CUDA graph (and its memory pool) but keeps serving through CUDA
        graphs: the next call of each input signature captures again. For a measured candidate
        that is kept for a later selection, so a sweep over many batch sizes does not hold a pool
        per size per candidate."""
        if self._cuda_graph is not None:
            self._cuda_graph = None
            self._start_cuda_graphs()

    def cuda_graph_capture_failure(self) -> str | None:
        """Why a CUDA-graph capture of this backend's calls failed, or None when every capture so
        far succeeded (or CUDA graphs are off). A failed capture makes the shared runner fall back
        to plain calls for that input signature, so the candidate would not be what it claims."""
        if self._cuda_graph is None:
            return None
        return self._cuda_graph.capture_failure()

    def _check_cuda_graphs_device(self, device: torch.device) -> None:
        if self.serves_cuda_graphs and device.type != "cuda":
            raise AITuneUserInputError(
                f"{self.describe()} needs a CUDA device for use_cuda_graphs=True; the tuning device is {device}"
            )

    def _start_cuda_graphs(self) -> None:
        if self.serves_cuda_graphs and not _cuda_graphs_disabled():
            # The cache size and cloning are fixed when the backend is built: a later activation
            # (ait.tune activates every tuned module) must not pick up a config changed since.
            self._cuda_graph = CudaGraphServing(
                self._infer, self._graph_spec, self._cuda_graph_settings, native=self._native_plan()
            )
            self._cuda_graph_settings = self._cuda_graph.settings

    def activate(self) -> None:
        if self._state in (BackendState.ACTIVE, BackendState.DEPLOYED):
            return
        if self._state is BackendState.INIT:
            raise RuntimeError(f"Cannot activate backend {self.name}: it was never built")
        if self._shared.users <= 0:  # a serving sibling may still hold the build
            self._activate()
        self._shared.users += 1
        if self._graph_spec is not None:
            self._start_cuda_graphs()
        self._state = BackendState.ACTIVE

    def deactivate(self) -> None:
        if self._state is not BackendState.ACTIVE:
            return
        self._cuda_graph = None  # frees the captured graphs and their memory pool
        self._shared.users -= 1
        if self._shared.users <= 0:
            self._shared.users = 0
            self._deactivate()
        self._state = BackendState.INACTIVE

    def deploy(self, device: Any) -> None:
        if self._state is not BackendState.CHECKPOINT_LOADED:
            raise RuntimeError(f"Cannot deploy backend {self.name}, backend should be loaded from a checkpoint")
        self._device = torch.device(device)
        if self._contract.deploy_takes_device:
            self._deploy(self._device)
        else:  # AITune's contract: _deploy() reads self.device
            self._deploy()
        self._state = BackendState.DEPLOYED

    def infer(self, *args: Any, **kwargs: Any) -> Any:
        if not self.is_active:
            raise RuntimeError(f"Cannot run inference, backend {self.name} should be activated first")
        return self.serving_plan().call(*args, **kwargs)

    def serving_plan(self) -> ServingPlan:
        """How this active backend serves its graph in this process (docs/reference/dispatch.md#serving-plan): through
        the CUDA-graph runner when one is running, else the artefact's own native runner, else
        `_infer` from Python. The dispatcher serves this object and the strategies time it."""
        if self._cuda_graph is not None:
            return self._cuda_graph.plan()
        return self._native_plan() or ServingPlan(self._infer)

    def saved_plan(self) -> ServingPlan | None:
        """What a runtime without Python (the C++ Runtime, the CLI) runs for this backend's saved
        artefacts: the artefact's own native plan (that runtime adds CUDA graphs itself), or this
        process's plan when it is native; None when nothing serves without Python."""
        plan = self._native_plan() or self.serving_plan()
        return plan if plan.native is not None else None

    def _native_plan(self) -> ServingPlan | None:
        """A plan over the built artefact's own native runner (`_C.Runner`), or None: such a
        backend is served without Python per call, and its CUDA-graph variant wraps that runner."""
        return None

    def input_profile(self) -> list[tuple[list[int], list[int | None]]] | None:
        """The hard shape range per tensor input (graph.input_spec.tensors order) for backends
        whose artifact only accepts a range (AOT exports, TensorRT profiles); None in a max
        means unbounded. None for backends with no hard range (eager, JIT)."""
        return self._restored_profile

    def restore_input_profile(self, profile: list) -> None:
        """The range saved with a checkpoint, for a backend loaded from its artifact alone."""
        self._restored_profile = profile

    @property
    def cuda_graph_stats(self) -> dict[str, int] | None:
        return self._cuda_graph.stats() if self._cuda_graph is not None else None

    @abc.abstractmethod
    def _build(
        self, module: torch.nn.Module, graph_spec: Any, data: list, device: torch.device, cache_dir: Path
    ) -> None: ...

    @abc.abstractmethod
    def _infer(self, *args: Any, **kwargs: Any) -> Any: ...

    def _activate(self) -> None:
        pass

    def _deactivate(self) -> None:
        pass

    def _deploy(self, device: torch.device) -> None:
        raise RuntimeError(f"Backend {self.name} cannot be deployed from a checkpoint yet")

    # -- restore: the twin of build, for a checkpoint's artefacts -----------------------------
    @classmethod
    def restore(cls, config: BackendConfig, artifacts: dict[str, Path], graph: Any, device: Any) -> Backend:
        """An active backend serving a checkpoint's extracted, hash-verified artefacts (by key, as
        _artifacts() named them) for `graph` on `device`, without a rebuild. Only for classes with
        restores_from_artifacts; the others are rebuilt from the module and the stored samples."""
        if not cls.restores_from_artifacts:
            raise RuntimeError(f"Backend {cls.__name__} restores by building again, not from artefacts")
        device = torch.device(device)
        backend = cls._restoring(config)
        backend._device = device
        backend._graph_spec = graph
        backend._restore(artifacts, graph, device)  # defined: checked in __init_subclass__
        backend._state = BackendState.ACTIVE
        if device.type == "cuda":
            backend._start_cuda_graphs()
        return backend

    @classmethod
    def _restoring(cls, config: BackendConfig) -> Backend:
        """The blank backend that restore() fills; a config check meant for building only may be skipped here."""
        return cls(config)
