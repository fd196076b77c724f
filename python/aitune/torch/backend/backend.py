"""The backend interface (docs/reference/api.md#backend-classes, docs/reference/backends.md#common-behaviour): a
blueprint that a strategy deep-copies and builds for one graph; the built copy serves the graph's calls."""

from __future__ import annotations

import abc
import copy
import dataclasses
import enum
import hashlib
import json
import logging
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from aitune.exceptions import BackendUnavailableError, CudaGraphCaptureError
from aitune.torch.backend import registry
from aitune.torch.backend.common import reference_contract
from aitune.torch.backend.common.cuda_graphs import CudaGraphs, ServingOptions
from aitune.torch.backend.common.reference_contract import BuildMode, Contract, ExecutionMode
from aitune.torch.backend.common.serving_plan import OutputStructure, ServingPlan
from aitune.torch.checkpoint.artifact import ArtifactPath

if TYPE_CHECKING:
    from aitune.torch.graph.graph_spec import GraphSpec
    from aitune.torch.validation import ToleranceSetting

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
    "availability",
    "saved_plan",
    "serving_variant",
    "sibling_key",
]


class BackendState(enum.Enum):
    INIT = "init"
    ACTIVE = "active"
    INACTIVE = "inactive"
    CHECKPOINT_LOADED = "checkpoint_loaded"
    DEPLOYED = "deployed"


def _json_value(value: object) -> object:
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


class _SharedBuild:
    """One build, served by one backend or by several serving variants of it (a CUDA-graph
    variant and its plain sibling, see serving_variant()). `users` counts the active ones: the
    build's resources are released when the last one is deactivated, not before."""

    __slots__ = ("users",)

    def __init__(self) -> None:
        self.users = 0


class Backend(abc.ABC):
    """Lifecycle INIT -build-> ACTIVE <-> INACTIVE (docs/reference/backends.md#common-behaviour).

    What is not the lifecycle or a hook lives beside it: CUDA-graph serving in `self.cuda_graphs`
    (common/cuda_graphs.py), the functions availability(), sibling_key(), serving_variant() and
    saved_plan() below, and AITune's helpers in common/reference_contract.py."""

    # The contract, each hook with its default (docs/design.md#adding-a-backend):
    #   _build(module, graph, data, device, cache_dir)  required: make the artefacts / compiled program
    #   _infer(*args, **kwargs)                         required: serve one call of the graph
    #   _restore(artifacts, graph, device)              with restores_from_artifacts: load the saved artefacts (checked at class definition)
    #   _activate() / _deactivate()                     take / release what serving holds; default: nothing
    #   _artifacts()                                    the files saved with a checkpoint; default: none
    #   is_available(), _unavailable_on(device)         (ok, reason) for the packages; a reason against a device (see availability())
    #   requirements()                                  fingerprint fields the artefacts depend on
    #   is_jit, precision_class, input_profile()        what the strategies and the manifest record (attributes or properties)
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
    _cuda_graphs_class: ClassVar[type[CudaGraphs]] = CudaGraphs  # a test fake serves "graphs" on a CPU
    # Subclasses override these two as attributes or properties.
    is_jit: bool = False  # True when the backend needs the original module at run time
    precision_class: str = "fp32"
    # AITune's helpers for backends written to its contract (reference_contract.py), and its
    # `_logger`, the logger of the backend's own module (set per class in __init_subclass__).
    _set_device = reference_contract.set_device
    _track_build_step = reference_contract.track_build_step
    _logger: ClassVar[logging.Logger] = logging.getLogger(__name__)

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        # A backend written to AITune's contract (4-argument _build, _deploy() without a device,
        # its own to_dict/from_dict) is recognised once, here (reference_contract.py).
        cls._contract = Contract.of(cls)
        if "_logger" not in cls.__dict__:
            cls._logger = logging.getLogger(cls.__module__)
        # The restore contract is checked when the class is defined, not when a checkpoint is
        # loaded: a class that says it restores from artefacts must say how.
        if cls.restores_from_artifacts and not callable(getattr(cls, "_restore", None)):
            raise TypeError(
                f"{cls.__name__} sets restores_from_artifacts = True but defines no "
                "_restore(self, artifacts, graph, device); define it, or leave restores_from_artifacts False "
                "so that a checkpoint is rebuilt from the module and the stored samples"
            )
        registry.register_automatically(cls)

    def __init__(self, config: BackendConfig | None = None, *, tolerance: ToleranceSetting | None = None) -> None:
        if config is None:
            config = self.config_class()
        if not isinstance(config, self.config_class):
            raise TypeError(f"{type(self).__name__} takes a {self.config_class.__name__}, got {type(config).__name__}")
        self.config = config
        self.tolerance = tolerance
        # A plain attribute, as in AITune: its backends set it themselves (from_dict: CHECKPOINT_LOADED).
        self.state = BackendState.INIT
        self._device: torch.device | None = None
        self.cuda_graphs = self._cuda_graphs_class(self)
        self._graph_spec: GraphSpec | None = None
        self.saved_input_profile: list | None = None  # the shape range saved with a checkpoint
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

    def to_dict(self) -> dict[str, Any]:
        data = {"class": f"{type(self).__module__}.{type(self).__qualname__}", "config": self.config.to_dict()}
        data.update({key: artifact for key, artifact in self._artifacts().items() if artifact is not None})
        return data

    def _artifacts(self) -> dict[str, Any]:
        """The built files saved with a checkpoint (ArtifactPath by key); None entries are left out."""
        return {}

    @property
    def device(self) -> torch.device | None:
        return self._device

    @property
    def is_active(self) -> bool:
        return self.state in (BackendState.ACTIVE, BackendState.DEPLOYED)

    def is_available(self) -> tuple[bool, str]:
        """(available, reason) for the backend's packages alone (AITune's name; no device).
        Overridden by backends whose packages may be missing."""
        return True, ""

    def _unavailable_on(self, device: torch.device) -> str | None:
        """Why the backend cannot run on `device` although its packages are present (e.g. a
        CPU-only runtime asked for a CUDA device), or None."""
        return None

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

    # -- lifecycle -------------------------------------------------------------------------
    def build(
        self,
        module: torch.nn.Module,
        graph_spec: GraphSpec,
        data: list,
        device: torch.device | str,
        cache_dir: Path,
        log_file: Path | None = None,
    ) -> Backend:
        if self.state is not BackendState.INIT:
            raise RuntimeError(f"Backend {self.name} build should be called only once")
        device = torch.device(device)
        available, reason = self.is_available()
        if not available:
            raise BackendUnavailableError(reason)
        if device.type not in self._devices:
            raise BackendUnavailableError(f"Device {device.type} is not supported by the backend {self.name}")
        cache_dir = Path(cache_dir)
        cache_dir.mkdir(parents=True, exist_ok=True)
        self.cuda_graphs.check_device(device)
        self.config.to_json(cache_dir / "config.json")
        self._device = device
        if self._contract.build_takes_device:
            self._build(module, graph_spec, data, device, cache_dir)
        else:  # AITune's contract: the device is self.device, set above
            self._build(module, graph_spec, data, cache_dir)
        self._graph_spec = graph_spec
        self._shared.users = 1
        self.state = BackendState.ACTIVE
        try:
            self.cuda_graphs.start()
        except Exception as e:
            # The build itself is complete and usable without CUDA graphs (its plain sibling).
            raise CudaGraphCaptureError(f"{self.describe()}: CUDA-graph serving could not start: {e}") from e
        return self

    def activate(self) -> None:
        if self.state in (BackendState.ACTIVE, BackendState.DEPLOYED):
            return
        if self.state is BackendState.INIT:
            raise RuntimeError(f"Cannot activate backend {self.name}: it was never built")
        if self._shared.users <= 0:  # a serving sibling may still hold the build
            self._activate()
        self._shared.users += 1
        if self._graph_spec is not None:
            self.cuda_graphs.start()
        self.state = BackendState.ACTIVE

    def deactivate(self) -> None:
        if self.state is not BackendState.ACTIVE:
            return
        self.cuda_graphs.stop()
        self._shared.users -= 1
        if self._shared.users <= 0:
            self._shared.users = 0
            self._deactivate()
        self.state = BackendState.INACTIVE

    def deploy(self, device: torch.device | str) -> None:
        if self.state is not BackendState.CHECKPOINT_LOADED:
            raise RuntimeError(f"Cannot deploy backend {self.name}, backend should be loaded from a checkpoint")
        self._device = torch.device(device)
        if self._contract.deploy_takes_device:
            self._deploy(self._device)
        else:  # AITune's contract: _deploy() reads self.device
            self._deploy()
        self.state = BackendState.DEPLOYED

    def infer(self, *args: Any, **kwargs: Any) -> Any:
        if not self.is_active:
            raise RuntimeError(f"Cannot run inference, backend {self.name} should be activated first")
        return self.serving_plan().call(*args, **kwargs)

    def serving_plan(self) -> ServingPlan:
        """How this active backend serves its graph in this process (docs/reference/dispatch.md#serving-plan): through
        the CUDA-graph runner when one is running, else the artefact's own native runner, else
        `_infer` from Python. The dispatcher serves this object and the strategies time it."""
        return self.cuda_graphs.plan() or self._native_plan() or ServingPlan(self._infer)

    def _native_plan(self) -> ServingPlan | None:
        """A plan over the built artefact's own native runner (`_C.Runner`), or None: such a
        backend is served without Python per call, and its CUDA-graph variant wraps that runner."""
        return None

    def input_profile(self) -> list[tuple[list[int], list[int | None]]] | None:
        """The hard shape range per tensor input (graph.input_spec.tensors order) for backends
        whose artifact only accepts a range (AOT exports, TensorRT profiles); None in a max
        means unbounded. None for backends with no hard range (eager, JIT). By default the range
        saved with a checkpoint (`saved_input_profile`), for a backend loaded from its artifact alone."""
        return self.saved_input_profile

    @abc.abstractmethod
    def _build(
        self, module: torch.nn.Module, graph_spec: GraphSpec, data: list, device: torch.device, cache_dir: Path
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
    def restore(
        cls, config: BackendConfig, artifacts: dict[str, Path], graph: GraphSpec, device: torch.device | str
    ) -> Backend:
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
        backend.state = BackendState.ACTIVE
        if device.type == "cuda":
            backend.cuda_graphs.start()
        return backend

    def follow_record(self, record: dict[str, Any]) -> None:
        """Before a rebuild from a checkpoint or the results store: what to_dict() stored beside the
        config and the artefacts (the manifest entry's `extra`), so the rebuild serves what was
        validated when tuning instead of deciding again. Default: nothing to follow."""

    @classmethod
    def _restoring(cls, config: BackendConfig) -> Backend:
        """The blank backend that restore() fills; a config check meant for building only may be skipped here."""
        return cls(config)


def availability(backend: Backend, device: torch.device) -> tuple[bool, str]:
    """(available, reason) of `backend` on `device`: packages present (is_available()), the device
    type among `_devices`, and whatever `_unavailable_on` says. The strategies skip an unavailable
    backend with the reason instead of failing its build; build() refuses it."""
    ok, reason = backend.is_available()
    if not ok:
        return False, reason
    if device.type not in backend._devices:
        return False, f"Device {device.type} is not supported by the backend {backend.name}"
    reason = backend._unavailable_on(device)
    return (False, reason) if reason else (True, "")


def saved_plan(backend: Backend) -> ServingPlan | None:
    """What a runtime without Python (the C++ Runtime, the CLI) runs for the backend's saved
    artefacts: the artefact's own native plan (that runtime adds CUDA graphs itself), or this
    process's plan when it is native; None when nothing serves without Python."""
    plan = backend._native_plan() or backend.serving_plan()
    return plan if plan.native is not None else None


def sibling_key(backend: Backend) -> str | None:
    """Identifies the build `backend` makes: its class and config without use_cuda_graphs, which
    only changes how the build is served. Backends with equal keys are serving siblings and can
    share one build (serving_variant()). None for configs without use_cuda_graphs."""
    data = backend.config.to_dict()
    if "use_cuda_graphs" not in data:
        return None
    data.pop("use_cuda_graphs")
    return f"{type(backend).__module__}.{type(backend).__qualname__}:" + json.dumps(data, sort_keys=True, default=str)


def serving_variant(backend: Backend, use_cuda_graphs: bool) -> Backend:
    """A sibling that serves `backend`'s build with CUDA graphs on or off: no rebuild, its own
    serving state and config. The build's resources stay until every variant sharing it is
    deactivated. Needs a built backend whose build is still held by an active variant."""
    if backend._graph_spec is None or backend._shared.users <= 0:
        raise RuntimeError(f"{backend.describe()} has no live build to serve another way")
    if not ServingOptions.declared_by(backend.config):
        raise TypeError(f"{type(backend.config).__name__} has no use_cuda_graphs switch")
    sibling = copy.copy(backend)
    sibling.config = dataclasses.replace(backend.config, use_cuda_graphs=use_cuda_graphs)
    sibling.cuda_graphs = backend.cuda_graphs.for_sibling(sibling)
    sibling.derived_from = backend.describe()
    backend._shared.users += 1
    sibling.state = BackendState.ACTIVE
    try:
        sibling.cuda_graphs.start()
    except Exception as e:
        sibling.deactivate()
        raise CudaGraphCaptureError(f"{sibling.describe()}: CUDA-graph serving could not start: {e}") from e
    return sibling
