"""TorchAOBackend: torchao quantization of the module's Linear weights, then torch.compile
(docs/reference/backends.md#torchao-torchaobackend).

The build quantizes a structural copy of the module (quantized_state.py: it shares every tensor
with the original, so only the quantized weights are new memory), compiles the copy's original
forward and warms it up on every stored sample. torchao's quantize_ changes process-wide torch
settings for the compile it expects (`torch.set_float32_matmul_precision("high")` and some
Inductor options). They are put back as soon as quantize_ returns, so the user's own TF32 choice
and later candidates are not changed behind their back; the Inductor options it set go to this
backend's torch.compile as its own options instead, so every compile of it (the build's, a later
shape's) gets them. The compile itself runs under the user's precision switches: Dynamo guards on
them, and a graph compiled under torchao's "high" would be compiled again at the first call after
they were put back (a second compile of every quantized candidate, without torchao's options).

A checkpoint keeps the original weights and the config (with the modules a user's filter_fn
selected, as names) plus a digest of the quantized weights; loading quantizes again and refuses a
result with another digest (IncompatibleCheckpointError). The C++ runtime does not run these
graphs: they need Python (exit 5).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import logging
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from aitune.exceptions import AITuneUserInputError, BackendUnavailableError, IncompatibleCheckpointError
from aitune.torch.backend.backend import Backend
from aitune.torch.backend.common.compile_caches import reset_compiler_caches
from aitune.torch.backend.common.jit_warmup import run_warmup, specialize_float_patch, warmup_calls
from aitune.torch.backend.registry import register_backend
from aitune.torch.backend.torchao.presets import DEFAULT_QUANTIZATION, device_refusal
from aitune.torch.backend.torchao.quantized_state import (
    QuantizedDigest,
    RecordingFilter,
    digest,
    module_names,
    quantized_parameters,
    structural_copy,
)
from aitune.torch.backend.torchao.torchao_config import SAVED_STATE_KEY, TorchAOBackendConfig
from aitune.torch.graph.graph_spec import GraphSpec
from aitune.torch.utils import precision_switches
from aitune.torch.validation import NumericTolerance

logger = logging.getLogger("aitune")

# The Inductor options torchao's recommended_inductor_config_setter changes (torchao 0.12-0.18).
_INDUCTOR_OPTIONS = (
    "coordinate_descent_tuning",
    "coordinate_descent_check_all_directions",
    "force_fuse_int_mm_with_mul",
    "fx_graph_cache",
    "triton.unique_kernel_names",
)
# Of those, the ones that shape the compiled kernels, which the compile gets as options. The
# FX-graph cache is a cache policy, the user's and aitune's (compile_caches.py), not a preset's.
_COMPILE_OPTIONS = tuple(name for name in _INDUCTOR_OPTIONS if name != "fx_graph_cache")
NOT_INSTALLED = "torchao is not installed. Please install `torchao` (pip install 'aitune[torchao]')."


def torchao_version() -> str | None:
    try:
        return importlib.metadata.version("torchao")
    except importlib.metadata.PackageNotFoundError:
        return None


def _inductor_values(names: tuple[str, ...]) -> dict[str, Any]:
    """The current values of those of Inductor's options that this torch has."""
    import torch._inductor.config as inductor_config

    current = inductor_config.get_config_copy()
    return {name: current[name] for name in names if name in current}


@contextlib.contextmanager
def torchao_settings_scope() -> Iterator[None]:
    """Puts back the process-wide settings torchao's quantize_ changes (module docstring)."""
    import torch._inductor.config as inductor_config

    saved = _inductor_values(_INDUCTOR_OPTIONS)
    try:
        with precision_switches.preserved():  # exactly: the FX-graph cache keys by them
            yield
    finally:
        inductor_config.load_config(saved)


def _compile_option_values() -> dict[str, Any]:
    return _inductor_values(_COMPILE_OPTIONS)


def graph_is_dynamic(graph: GraphSpec) -> bool:
    return graph.input_spec.has_dynamic_axis() or bool(graph.dynamic_shapes)


@register_backend("torchao")
class TorchAOBackend(Backend):
    config_class = TorchAOBackendConfig

    def __init__(
        self, config: TorchAOBackendConfig | None = None, *, tolerance: NumericTolerance | None = None
    ) -> None:
        # AITune's default: fp8 weight-only (a config needs a preset or a torchao config).
        if config is None:
            config = TorchAOBackendConfig(quantization=DEFAULT_QUANTIZATION)
        super().__init__(config, tolerance=tolerance)
        self._source: torch.nn.Module | None = None  # the module whose weights the build quantized
        self._quantized: torch.nn.Module | None = None
        self._forward: Callable | None = None
        self._compiled: Callable | None = None
        self._warmup_calls: list[tuple[tuple, dict]] = []
        self._dynamic: bool | None = None
        self._selected: tuple[str, ...] | None = None  # what a user's filter_fn selected
        self._digest: QuantizedDigest | None = None
        self._compile_options: dict[str, Any] = {}  # the Inductor options quantize_ set (_COMPILE_OPTIONS)

    # -- identity ----------------------------------------------------------------------------
    @property
    def is_jit(self) -> bool:
        return True  # rebuilt from the original weights on load; they stay with the module

    @property
    def precision_class(self) -> str:
        return self.config.needs.precision_class

    @property
    def compiled_dynamic(self) -> bool | None:
        """The `dynamic` torch.compile got (None resolved from the graph)."""
        return self._dynamic

    @property
    def quantized_modules(self) -> tuple[str, ...]:
        """The qualified names of the modules whose weights were quantized (empty before the build)."""
        if self._quantized is None:
            return ()
        return tuple(module_names(quantized_parameters(self._quantized)))

    def is_available(self) -> tuple[bool, str]:
        if importlib.util.find_spec("torchao") is None:
            return False, NOT_INSTALLED
        return True, ""

    def _unavailable_on(self, device: torch.device) -> str | None:
        return device_refusal(self.config.scheme, self.config.needs, device)

    # -- lifecycle ---------------------------------------------------------------------------
    def _build(
        self, module: torch.nn.Module, graph_spec: GraphSpec, data: list, device: torch.device, cache_dir: Path
    ) -> None:
        reason = self._unavailable_on(device)
        if reason:
            raise BackendUnavailableError(reason)
        torch._dynamo.reset()  # as Inductor JIT: the recompile limit is per code object, shared by candidates
        module.to(device)
        self._source = module
        config = self.config
        if config.dynamic is not None:
            self._dynamic = config.dynamic
        else:
            self._dynamic = graph_is_dynamic(graph_spec) if graph_spec is not None else False
        self._warmup_calls = warmup_calls(graph_spec, data, widen=bool(self._dynamic), backend_name=self.name)
        with torchao_settings_scope():
            self._quantize()
        if config.expected_quantized_state is not None:  # loading: before the (long) compile
            self._check_expected(config.expected_quantized_state)
        self._compile()

    def _quantize(self) -> None:
        """quantize_ on a structural copy of the source module (quantized_state.py)."""
        assert self._source is not None
        self._check_model_constraints(self._source)
        from torchao.quantization import quantize_

        config = self.config
        quantized, forward = structural_copy(self._source)
        recorder = RecordingFilter(config.filter_fn) if config.filter_fn is not None else None
        before = _compile_option_values()
        quantize_(quantized, config.resolved_quantization_config(), filter_fn=recorder)
        self._compile_options = {k: v for k, v in _compile_option_values().items() if before.get(k) != v}
        self._quantized, self._forward, self._compiled = quantized, forward, None
        self._selected = tuple(recorder.selected) if recorder is not None else None
        self._digest = None
        if not any(hasattr(p, "__tensor_flatten__") for p in quantized.parameters()):
            logger.warning(
                "⚠️ %s quantized no weight of %s: its filter selected no module torchao can quantize (torchao's "
                "default filter selects every torch.nn.Linear)",
                self.describe(),
                type(self._source).__name__,
            )

    def _compile(self) -> None:
        """torch.compile of the quantized forward, warmed up on the stored samples, under the
        user's precision switches (the module docstring says why). torch.compile takes a mode or
        options, not both: with options to add, the mode goes in as its own options."""
        config = self.config
        kwargs: dict[str, Any] = {"fullgraph": config.fullgraph, "dynamic": self._dynamic}
        if self._compile_options:
            mode_options = torch._inductor.list_mode_options(config.mode, self._dynamic) if config.mode else {}
            kwargs["options"] = {**mode_options, **self._compile_options}
            logger.info(
                "%s: compiling with the Inductor options torchao's quantize_ set: %s",
                self.describe(),
                ", ".join(f"{k}={v}" for k, v in sorted(self._compile_options.items())),
            )
        elif config.mode is not None:
            kwargs["mode"] = config.mode
        self._compiled = torch.compile(self._forward, **kwargs)
        run_warmup(self._compiled, self._warmup_calls, specialize_float_patch)

    @property
    def compile_options(self) -> dict[str, Any]:
        """The Inductor options torchao's quantize_ set, which this backend's compiles get."""
        return dict(self._compile_options)

    def _check_model_constraints(self, module: torch.nn.Module) -> None:
        """The MX and NVFP4 formats need bf16 weights whose dims are multiples of their block
        (what torchao asserts deep inside quantize_), checked on the modules the filter selects."""
        needs = self.config.needs
        if not needs.bf16_weights and needs.weight_multiple == (1, 1):
            return
        select = self.config.filter_fn or (lambda m, _fqn: isinstance(m, torch.nn.Linear))
        last, second = needs.weight_multiple
        for fqn, sub in module.named_modules():
            weight = getattr(sub, "weight", None)
            if not isinstance(weight, torch.Tensor) or not select(sub, fqn):
                continue
            if needs.bf16_weights and weight.dtype != torch.bfloat16:
                raise AITuneUserInputError(
                    f"{self.config.scheme} for '{fqn}': its weight is {weight.dtype}; expected torch.bfloat16 "
                    "(cast the model with .to(torch.bfloat16), or exclude the module with filter_fn)"
                )
            if weight.ndim >= 2 and (weight.shape[-1] % last or weight.shape[-2] % second):
                raise AITuneUserInputError(
                    f"{self.config.scheme} for '{fqn}': weight shape {tuple(weight.shape)} does not fit its blocks; "
                    f"expected the last dim a multiple of {last}"
                    + (f" and the one before it a multiple of {second}" if second > 1 else "")
                    + " (exclude the module with filter_fn)"
                )

    def quantized_digest(self) -> QuantizedDigest:
        """The digest of the quantized weights (computed once per build; checkpoint.md#torchao-graphs)."""
        if self._digest is None:
            if self._quantized is None:
                raise RuntimeError(f"{self.describe()} holds no quantized module: build or activate it first")
            self._digest = digest(self._quantized)
        return self._digest

    def _check_expected(self, expected: dict[str, Any]) -> None:
        current = self.quantized_digest()
        if current.sha256 == expected["sha256"]:
            return
        where = (
            f"{self.describe()} of {len(current.modules)} modules on {self._device} with torchao {torchao_version()}"
        )
        saved = f"{expected['sha256'][:16]}… (torchao {expected.get('torchao')} on {expected.get('device')})"
        self._release()
        raise IncompatibleCheckpointError(
            [("torchao quantized weights", saved, f"{current.sha256[:16]}…", f"re-quantized by {where}")]
        )

    def _infer(self, *args: object, **kwargs: object) -> object:
        with torch.no_grad():
            return self._compiled(*args, **kwargs)

    def _activate(self) -> None:
        if self._source is None:
            return
        previous = self._digest
        self._source.to(self._device)
        with torchao_settings_scope():
            self._quantize()
        if previous is not None and self.quantized_digest().sha256 != previous.sha256:
            logger.warning("⚠️ %s: quantizing again gave other weights than the build did", self.describe())
        self._compile()

    def _deactivate(self) -> None:
        self._release()
        reset_compiler_caches()

    def _release(self) -> None:
        self._quantized = None
        self._forward = None
        self._compiled = None

    # -- checkpoint --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The config a checkpoint stores: the user's filter_fn as the names it selected, and the
        quantized weights' digest that loading must reproduce (`saved_quantization`)."""
        data = super().to_dict()
        config = data["config"]
        if isinstance(config.get("quantization_config"), dict) and "not_saveable" in config["quantization_config"]:
            raise ValueError(
                f"Cannot save {self.describe()}: its quantization_config cannot be stored without pickle: "
                f"{config['quantization_config']['not_saveable']}"
            )
        if self._selected is not None:
            config["filter_fn"] = {"modules": list(self._selected)}
        if self._quantized is not None or self._digest is not None:
            config[SAVED_STATE_KEY] = {
                **self.quantized_digest().to_dict(),
                "torchao": torchao_version(),
                "device": str(self._device),
                "scheme": self.config.scheme,
            }
        return data
