"""TorchInductorJitBackend: torch.compile of the module's original forward (SPEC §4.2).

The build resets Dynamo, compiles the ORIGINAL forward (the wrapped module's instance `forward`
is aitune's router; compiling it would recurse into aitune), and warms up on every stored
sample, plus the sample with size-1 dynamic axes widened to 2 so that Dynamo's 0/1
specialisation does not recompile on the first real call. After that, the first recompile logs
one warning: once Dynamo's recompile limit is reached the forward silently runs eagerly.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import logging
from pathlib import Path
from typing import Any, Callable

import torch

from aitune.exceptions import BackendUnavailableError
from aitune.torch.backend.backend import Backend
from aitune.torch.backend.torch_eager.torch_eager_backend import _cast_floats, _first_float_dtype
from aitune.torch.backend.torch_inductor_jit.torch_inductor_jit_config import TorchInductorJitBackendConfig
from aitune.torch.module.graph_spec import GraphSpec, Sample

logger = logging.getLogger("aitune")


def graph_is_dynamic(graph: GraphSpec) -> bool:
    """True when some tensor input has a batch or dim axis (SPEC §4.2 dynamic=None)."""
    return graph.input_spec.has_dynamic_axis() or bool(graph.dynamic_shapes)


def reset_compiler_caches() -> None:
    """What deactivation frees (reference §2.9): Dynamo and compiler caches, then memory."""
    torch._dynamo.reset()
    torch.compiler.reset()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    gc.collect()


class TorchInductorJitBackend(Backend):
    config_class = TorchInductorJitBackendConfig

    def __init__(self, config: TorchInductorJitBackendConfig | None = None, *, tolerance: Any = None) -> None:
        super().__init__(config, tolerance=tolerance)
        self._module: torch.nn.Module | None = None
        self._forward: Callable | None = None
        self._compiled: Callable | None = None
        self._cast_back: torch.dtype | None = None
        self._warmup_calls: list[tuple[tuple, dict]] = []
        self._dynamic: bool | None = None
        self._graph_name: str = ""
        self._recompile_armed = False
        self._recompile_warned = False

    # -- identity ----------------------------------------------------------------------------
    @property
    def is_jit(self) -> bool:
        return True  # runs the original module's weights

    @property
    def precision_class(self) -> str:
        if self.config.autocast_enabled:
            dtype = self.config.autocast_dtype or torch.float16
            return "bf16" if dtype == torch.bfloat16 else "fp16"
        return "fp32"

    def is_available(self) -> tuple[bool, str]:
        try:
            supported = torch._dynamo.is_dynamo_supported()
        except Exception as e:  # noqa: BLE001 - any failure means "not usable here"
            return False, f"torch.compile is not supported in this environment: {e}"
        if not supported:
            return False, "torch.compile (TorchDynamo) is not supported in this Python/torch build."
        return True, ""

    @property
    def compiled_dynamic(self) -> bool | None:
        """The `dynamic` value torch.compile got (after resolving None)."""
        return self._dynamic

    # -- lifecycle ---------------------------------------------------------------------------
    def _autocast(self) -> contextlib.AbstractContextManager:
        if not self.config.autocast_enabled:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self._device.type, dtype=self.config.autocast_dtype)

    def _build(self, module: torch.nn.Module, graph_spec: Any, data: list, device: torch.device,
               cache_dir: Path) -> None:
        config = self.config
        if device.type == "cuda":
            try:
                import triton  # noqa: F401
            except ImportError as e:
                raise BackendUnavailableError(
                    "triton is not installed. Please install `triton` (Inductor needs it on CUDA)."
                ) from e
        torch._dynamo.reset()
        module.to(device)
        self._module = module
        self._forward = getattr(module, "_aitune_original_forward", None) or module.forward
        self._graph_name = getattr(graph_spec, "name", "")
        self._dynamic = config.dynamic if config.dynamic is not None else (
            graph_is_dynamic(graph_spec) if graph_spec is not None else False
        )
        self._warmup_calls = self._warmup_inputs(graph_spec, data)
        if config.autocast_enabled and data:
            sample = data[0]
            args, kwargs = copy.deepcopy((sample.args, sample.kwargs))
            with torch.no_grad():
                plain = self._forward(*args, **kwargs)
                with self._autocast():
                    mixed = self._forward(*args, **kwargs)
            plain_dtype, mixed_dtype = _first_float_dtype(plain), _first_float_dtype(mixed)
            if plain_dtype is not None and plain_dtype != mixed_dtype:
                self._cast_back = plain_dtype
        self._compile_and_warm_up()

    def _warmup_inputs(self, graph: GraphSpec | None, data: list[Sample]) -> list[tuple[tuple, dict]]:
        calls = [(tuple(s.args), dict(s.kwargs)) for s in data]
        if graph is not None and data and self._dynamic:
            try:
                from aitune.torch.backend.export_shapes import prepare_export_sample

                widened = prepare_export_sample(graph, data[0])
                calls.append(widened)
            except Exception as e:  # noqa: BLE001 - an optional extra warm-up, never a build failure
                logger.debug("TorchInductorJitBackend: no widened warm-up sample: %s", e)
        return calls

    def _compile(self) -> Callable:
        config = self.config
        options = dict(config.options) if config.options is not None else None  # torch.compile pops keys
        compiled = None
        simple_options = options is None or not ({"guard_filter_fn", "use_aoti"} & options.keys())
        if simple_options and hasattr(torch, "_TorchCompileInductorWrapper"):
            # torch.compile(backend="inductor") is exactly this call; going one level down lets
            # Dynamo tell us about recompiles of this function alone (guard_fail_fn).
            try:
                backend = torch._TorchCompileInductorWrapper(config.mode, options, self._dynamic)
                compiled = torch._dynamo.optimize(
                    backend=backend, nopython=config.fullgraph, dynamic=self._dynamic,
                    guard_fail_fn=self._on_guard_fail,
                )(self._forward)
            except TypeError:
                compiled = None
        if compiled is None:
            kwargs: dict[str, Any] = {"fullgraph": config.fullgraph, "dynamic": self._dynamic}
            if config.mode is not None:
                kwargs["mode"] = config.mode
            if options is not None:
                kwargs["options"] = options
            compiled = torch.compile(self._forward, **kwargs)
        return compiled

    def _compile_and_warm_up(self) -> None:
        self._recompile_armed = False
        self._compiled = self._compile()
        with torch.no_grad(), self._autocast():
            for args, kwargs in self._warmup_calls:
                call_args, call_kwargs = copy.deepcopy((args, kwargs))
                self._compiled(*call_args, **call_kwargs)
        self._recompile_armed = True

    def _on_guard_fail(self, failure: Any) -> None:
        """Dynamo is about to recompile the tuned forward."""
        if not self._recompile_armed or self._recompile_warned:
            return
        self._recompile_warned = True  # under the GIL: at worst two threads both log once
        limit = getattr(torch._dynamo.config, "recompile_limit", None) or getattr(
            torch._dynamo.config, "cache_size_limit", "?"
        )
        reason = getattr(failure, "reason", str(failure))
        logger.warning(
            "⚠️ TorchInductorJitBackend (graph '%s'): torch.compile is recompiling the tuned forward (%s). Once "
            "Dynamo's recompile limit (%s) is reached the forward runs eagerly; record calls with these inputs "
            "before tuning or use dynamic=True. (Logged once.)",
            self._graph_name, reason.strip().splitlines()[0] if reason else "unknown reason", limit,
        )

    def _infer(self, *args: Any, **kwargs: Any) -> Any:
        with torch.no_grad(), self._autocast():
            output = self._compiled(*args, **kwargs)
        if self._cast_back is not None:
            output = _cast_floats(output, self._cast_back)
        return output

    def _activate(self) -> None:
        if self._module is not None and self._device is not None:
            self._module.to(self._device)
        if self._forward is not None:
            self._compile_and_warm_up()

    def _deactivate(self) -> None:
        self._recompile_armed = False
        self._compiled = None
        reset_compiler_caches()
