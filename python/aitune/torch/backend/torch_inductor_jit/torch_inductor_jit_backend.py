"""TorchInductorJitBackend: torch.compile of the module's original forward
(docs/reference/backends.md#inductor-jit-torchinductorjitbackend).

The build compiles the ORIGINAL forward (the wrapped module's instance `forward` is aitune's
router; compiling it would recurse into aitune) and warms up on every stored sample. With
``dynamic=None`` on a graph with batch or dim axes it also compiles a specialised
``dynamic=False`` variant, because dynamic shapes are not free, and keeps whichever serves the
stored shapes faster; the reference page says how the two are compared and which calls each one
serves, and why a shape with a size-1 dynamic axis is not timed.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import logging
import statistics
import threading
import time
import types
from pathlib import Path
from typing import Callable, Iterator

import torch

from aitune._native import _C
from aitune.exceptions import BackendUnavailableError
from aitune.torch.backend.common.autocast import AutocastMixin
from aitune.torch.backend.backend import Backend, cost_factor
from aitune.torch.backend.common.compile_caches import keep_compile_caches_in_aitune, reset_compiler_caches
from aitune.torch.backend.common.export_shapes import has_size_one_dynamic_axis
from aitune.torch.backend.common.jit_warmup import original_forward, run_warmup, specialize_float_patch, warmup_calls
from aitune.torch.backend.registry import register_backend
from aitune.torch.backend.torch_inductor_jit.torch_inductor_jit_config import TorchInductorJitBackendConfig
from aitune.torch.graph.graph_spec import GraphSpec, Sample
from aitune.torch.validation import NumericTolerance

logger = logging.getLogger("aitune")

# dynamic=None policy: how many shapes are compared and how each is timed (build-time cost bound).
MAX_COMPARED_SHAPES = 8
COMPARE_WARMUP_CALLS = 3
COMPARE_MEASURED_CALLS = 10
SPECIALISED, DYNAMIC = "specialised", "dynamic"
_specialised_ids = itertools.count()
_SCALARS = (bool, int, float, str, type(None))
# Keeps two serving threads from both compiling a deferred dynamic build (module-level: backends
# are deep-copied, and Dynamo compiles one frame at a time anyway).
_DEFERRED_COMPILE_LOCK = threading.Lock()


def graph_is_dynamic(graph: GraphSpec) -> bool:
    """True when some tensor input has a batch or dim axis (docs/reference/backends.md#per-backend-behaviour
    dynamic=None)."""
    return graph.input_spec.has_dynamic_axis() or bool(graph.dynamic_shapes)


def recompile_limit() -> int:
    """Dynamo's per-code-object recompile limit (`cache_size_limit` before torch 2.6)."""
    limit = getattr(torch._dynamo.config, "recompile_limit", None)
    if limit is None:
        limit = getattr(torch._dynamo.config, "cache_size_limit", 8)
    return int(limit)


def shape_key(args: tuple, kwargs: dict) -> tuple:
    """The dispatch key of a call: the shapes of its tensor leaves (in the native flattening
    order) and its scalar constants. Dynamo's static guards specialise on both."""
    _, leaves = _C.flatten_value((args, kwargs))
    return tuple(
        tuple(leaf.value.shape)
        if leaf.is_tensor
        else (leaf.value if isinstance(leaf.value, _SCALARS) else type(leaf.value))
        for leaf in leaves
    )


def _private_forward(forward: Callable) -> Callable:
    """A function that calls `forward` and has a code object of its own: Dynamo keeps its cache
    (and counts recompiles) per code object, so the specialised variant neither shares the
    recompile limit with the dynamic build of the original forward nor adds its guards to that
    build's cache lookups, and its cache can be cleared alone."""

    def specialised_forward(*args: object, **kwargs: object) -> object:
        return forward(*args, **kwargs)

    name = f"aitune_specialised_forward_{next(_specialised_ids)}"
    code = specialised_forward.__code__.replace(co_name=name, co_qualname=name)
    return types.FunctionType(code, specialised_forward.__globals__, name, None, specialised_forward.__closure__)


def _cache_entries(fn: Callable | None) -> int | None:
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        return None
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        return len(_debug_get_cache_entry_list(code))
    except Exception:  # noqa: BLE001 - a private helper; without it the check is skipped
        return None


def _clear_code_cache(fn: Callable | None) -> None:
    """Drops Dynamo's compiled entries of a private code object (not a global reset)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    try:
        from torch._dynamo.eval_frame import reset_code

        reset_code(code)
    except Exception:  # noqa: BLE001 - best effort; dropping the references is what matters
        pass


@register_backend("torch_inductor_jit")
class TorchInductorJitBackend(AutocastMixin, Backend):
    config_class = TorchInductorJitBackendConfig
    # Settings that make Inductor compile longer, by about how much: freezing folds the weights
    # first, coordinate descent re-tunes every kernel's launch parameters, max-autotune benchmarks
    # GEMM/conv templates. Read from the config's fields (set one to a listed value) and from
    # Inductor's own `options` (expected_build_cost).
    _build_cost_factors = {
        "freezing": ((True,), 1.2),
        "coordinate_descent_tuning": ((True,), 2.0),
        "max_autotune": ((True,), 6.0),
        "mode": (("max-autotune", "max-autotune-no-cudagraphs"), 6.0),
    }

    def expected_build_cost(self) -> float:
        options = dict(self.config.options or {})
        return super().expected_build_cost() * cost_factor(options, self._build_cost_factors)

    def __init__(
        self, config: TorchInductorJitBackendConfig | None = None, *, tolerance: NumericTolerance | None = None
    ) -> None:
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
        # dynamic=None policy (module docstring): the specialised variant and its shapes.
        self._compare_calls: list[tuple[tuple, tuple[tuple, dict]]] = []  # (shape key, call)
        self._specialised: Callable | None = None
        self._specialised_forward: Callable | None = None
        self._specialised_keys: frozenset = frozenset()
        self._dynamic_choice: str | None = None
        self._dynamic_totals_ms: dict[str, float] | None = None
        # Stored shapes with a size-1 dynamic axis: specialised untimed (module docstring); their
        # warm-up calls of the dynamic build wait until the dynamic variant serves them.
        self._untimed_keys: frozenset = frozenset()
        self._deferred_warmups: list[tuple[tuple, dict]] = []
        # A rebuild from a checkpoint or the results store serves the variant chosen when tuning
        # (follow_record): no second comparison, which could time the other one faster this time.
        self._recorded_choice: str | None = None
        # The dynamic build compiles on its first call when no stored shape needs it (module
        # docstring): pending until then.
        self._dynamic_deferred = False
        self._dynamic_pending = False

    # -- identity ----------------------------------------------------------------------------
    @property
    def is_jit(self) -> bool:
        return True  # runs the original module's weights

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
        """The `dynamic` value torch.compile got (after resolving None) for the build that serves
        every shape outside the specialised set (all shapes unless dynamic_choice is "specialised")."""
        return self._dynamic

    @property
    def dynamic_choice(self) -> str | None:
        """With dynamic=None on a graph with batch or dim axes: "specialised" (recorded shapes
        are served by static per-shape graphs) or "dynamic". None when no choice was made
        (dynamic set in the config, or a graph without dynamic axes)."""
        return self._dynamic_choice

    @property
    def dynamic_totals_ms(self) -> dict[str, float] | None:
        """The summed median times (ms) of the two variants over the compared shapes, keyed by
        "specialised" and "dynamic"; None when they were not compared."""
        return dict(self._dynamic_totals_ms) if self._dynamic_totals_ms is not None else None

    @property
    def specialised_shapes(self) -> list[tuple]:
        """The shape keys (see shape_key) served by the specialised variant."""
        return [key for key, _ in self._compare_calls if key in self._specialised_keys]

    def to_dict(self) -> dict[str, object]:
        data = super().to_dict()
        if self._dynamic_choice is not None:
            data["dynamic_choice"] = self._dynamic_choice
        return data

    def follow_record(self, record: dict[str, object]) -> None:
        choice = record.get("dynamic_choice")
        if choice in (SPECIALISED, DYNAMIC):
            self._recorded_choice = str(choice)

    # -- lifecycle ---------------------------------------------------------------------------
    def _build(
        self, module: torch.nn.Module, graph_spec: GraphSpec, data: list, device: torch.device, cache_dir: Path
    ) -> None:
        config = self.config
        if device.type == "cuda":
            try:
                import triton  # noqa: F401
            except ImportError as e:
                raise BackendUnavailableError(
                    "triton is not installed. Please install `triton` (Inductor needs it on CUDA)."
                ) from e
        keep_compile_caches_in_aitune()  # first: a reset may already compute torch's cache folder
        torch._dynamo.reset()
        module.to(device)
        self._module = module
        self._forward = original_forward(module)
        self._graph_name = getattr(graph_spec, "name", "")
        self._dynamic = (
            config.dynamic
            if config.dynamic is not None
            else (graph_is_dynamic(graph_spec) if graph_spec is not None else False)
        )
        self._warmup_calls = self._warmup_inputs(graph_spec, data)
        self._detect_cast_back(self._forward, data)
        compare = config.dynamic is None and self._dynamic and graph_spec is not None and bool(data)
        if compare:
            self._compare_calls = self._comparison_calls(graph_spec, data)
            self._defer_size_one_warmups(graph_spec, data)
        self._dynamic_deferred = compare and self._stored_shapes_need_no_dynamic_build()
        self._compile_and_warm_up()
        if compare:
            self._choose_variant(device)

    def _warmup_inputs(self, graph: GraphSpec | None, data: list[Sample]) -> list[tuple[tuple, dict]]:
        return warmup_calls(graph, data, widen=bool(self._dynamic), backend_name=self.name)

    def _comparison_calls(self, graph: GraphSpec, data: list[Sample]) -> list[tuple[tuple, tuple[tuple, dict]]]:
        """The calls the variants are compared on: one per distinct shape of the stored samples
        (by default one sample: the first call ait.tune recorded, at its smallest batch size).
        Every further shape costs a whole static compile (on the H200 this build of ResNet-50 took
        85 s of a 98 s default tuning with three compiles: dynamic, batch 1 and batch 2), so other
        shapes are served by the dynamic build; store more samples (config.max_num_samples_stored)
        to specialise more."""
        calls = [(tuple(s.args), dict(s.kwargs)) for s in data]
        unique: dict[tuple, tuple[tuple, dict]] = {}
        for args, kwargs in calls:
            try:
                key = shape_key(args, kwargs)
            except Exception as e:  # noqa: BLE001 - a call the flattener rejects is not compared
                logger.debug("TorchInductorJitBackend: no shape key for a comparison sample: %s", e)
                continue
            unique.setdefault(key, (args, kwargs))
        return list(unique.items())

    def _defer_size_one_warmups(self, graph: GraphSpec, data: list[Sample]) -> None:
        """Marks the compared shapes with a size-1 dynamic axis as untimed and takes their calls
        out of the dynamic build's warm-up (module docstring), keeping at least one warm-up call
        (the widened sample) so the dynamic build still compiles now."""
        untimed = set()
        for sample in data:
            try:
                if has_size_one_dynamic_axis(graph, sample):
                    untimed.add(shape_key(tuple(sample.args), dict(sample.kwargs)))
            except Exception as e:  # noqa: BLE001 - such a shape is then simply timed
                logger.debug("TorchInductorJitBackend: no size-1 check for a sample: %s", e)
        keep, deferred = [], []
        for call in self._warmup_calls:
            try:
                key = shape_key(*call)
            except Exception:  # noqa: BLE001 - unkeyable calls stay in the warm-up
                key = None
            (deferred if key in untimed else keep).append(call)
        if not keep:  # no widened sample to compile the dynamic build on: nothing is deferred
            return
        self._untimed_keys = frozenset(untimed)
        self._warmup_calls, self._deferred_warmups = keep, deferred

    def _stored_shapes_need_no_dynamic_build(self) -> bool:
        """True when the specialised graphs will serve every stored shape without a timed
        comparison: the choice recorded when tuned is "specialised", or every stored shape has a
        size-1 dynamic axis (untimed). Then the dynamic build serves only shapes tuning never saw,
        and compiles on the first such call instead of now (on the H100 it was most of a warm
        ResNet-50 rebuild)."""
        if not self._compare_calls or len(self._compare_calls) > MAX_COMPARED_SHAPES:
            return False
        if len(self._compare_calls) >= recompile_limit() or self._recorded_choice == DYNAMIC:
            return False
        if self._recorded_choice == SPECIALISED:
            return True
        return all(key in self._untimed_keys for key, _ in self._compare_calls)

    def _serve_deferred_by_dynamic(self) -> None:
        """The dynamic build serves every shape after all: warm it up (and so compile it, if its
        compile was deferred) on the deferred calls now, so the first real call at such a shape
        does not recompile (and is not logged as one)."""
        self._untimed_keys = frozenset()
        pending, self._dynamic_deferred, self._dynamic_pending = self._dynamic_pending, False, False
        if not self._deferred_warmups and not pending:
            return
        self._warmup_calls = self._warmup_calls + self._deferred_warmups
        self._deferred_warmups = []
        self._warm_up_dynamic()

    def _warm_up_dynamic(self) -> None:
        """The dynamic build's warm-up calls (which compile it if it has not compiled yet), with
        the recompile warning off: these compiles are the build's own."""
        armed, self._recompile_armed = self._recompile_armed, False
        try:
            run_warmup(self._compiled, self._warmup_calls, self._tracing)
        finally:
            self._recompile_armed = armed

    def _choose_variant(self, device: torch.device) -> None:
        """dynamic=None: times the dynamic build against static per-shape graphs and keeps the
        faster for the compared shapes (module docstring)."""
        limit = recompile_limit()
        num_shapes = len(self._compare_calls)
        self._dynamic_choice = DYNAMIC
        if self._recorded_choice == DYNAMIC:
            logger.info(
                "TorchInductorJitBackend (graph '%s'): dynamic=None: serving by the dynamic build, as chosen when "
                "tuned (no specialised variant built)",
                self._graph_name,
            )
            self._compare_calls = []
            self._serve_deferred_by_dynamic()
            return
        if num_shapes >= limit:
            logger.info(
                "TorchInductorJitBackend (graph '%s'): dynamic=None: %d distinct input shapes reach Dynamo's "
                "recompile limit (%d), so no specialised per-shape variant is built; keeping dynamic",
                self._graph_name,
                num_shapes,
                limit,
            )
            self._compare_calls = []
            self._serve_deferred_by_dynamic()
            return
        if num_shapes > MAX_COMPARED_SHAPES:
            self._compare_calls = self._compare_calls[:MAX_COMPARED_SHAPES]
            num_shapes = MAX_COMPARED_SHAPES
        self._recompile_armed = False
        try:
            self._compile_specialised()
            entries = _cache_entries(self._specialised_forward)
            if entries is not None and entries > num_shapes:
                raise RuntimeError(
                    f"it compiled {entries} static graphs for {num_shapes} shapes (Dynamo specialised on more "
                    "than the input shapes)"
                )
            self._specialised_keys = frozenset(key for key, _ in self._compare_calls)
            if self._recorded_choice == SPECIALISED:
                self._dynamic_choice = SPECIALISED
                logger.info(
                    "TorchInductorJitBackend (graph '%s'): dynamic=None: serving the %d stored shape(s) by static "
                    "per-shape graphs, as chosen when tuned (not timed again)",
                    self._graph_name,
                    num_shapes,
                )
                return
            cuda_index = None
            if device.type == "cuda":
                cuda_index = device.index if device.index is not None else torch.cuda.current_device()
            use_device_time = self.cuda_graphs.requested and cuda_index is not None
            totals = {SPECIALISED: 0.0, DYNAMIC: 0.0}
            variants = {SPECIALISED: self._route, DYNAMIC: self._compiled}
            timed = [(key, call) for key, call in self._compare_calls if key not in self._untimed_keys]
            for i, (_, call) in enumerate(timed):
                order = (SPECIALISED, DYNAMIC) if i % 2 == 0 else (DYNAMIC, SPECIALISED)  # alternate: no order bias
                for name in order:
                    totals[name] += self._median_ms(variants[name], call, cuda_index, use_device_time)
        except Exception as e:  # noqa: BLE001 - the dynamic build is complete; the comparison is optional
            logger.info(
                "TorchInductorJitBackend (graph '%s'): dynamic=None: no specialised per-shape variant (%s: %s); "
                "keeping dynamic",
                self._graph_name,
                type(e).__name__,
                e,
            )
            self._drop_specialised()
            self._serve_deferred_by_dynamic()
            return
        finally:
            self._recompile_armed = True
        if not timed:
            self._dynamic_choice = SPECIALISED
            logger.info(
                "TorchInductorJitBackend (graph '%s'): dynamic=None: the %d stored shape(s) have size-1 dynamic axes, "
                "which Dynamo would specialise in the dynamic build as well; serving them by static per-shape graphs "
                "and every other shape by the dynamic build",
                self._graph_name,
                num_shapes,
            )
            return
        self._dynamic_totals_ms = totals
        keep = SPECIALISED if totals[SPECIALISED] < totals[DYNAMIC] else DYNAMIC
        self._dynamic_choice = keep
        if keep == DYNAMIC:
            self._drop_specialised()
            self._serve_deferred_by_dynamic()
        logger.info(
            "TorchInductorJitBackend (graph '%s'): dynamic=None: specialised per shape %.3f ms vs dynamic %.3f ms "
            "over %d shapes; keeping %s",
            self._graph_name,
            totals[SPECIALISED],
            totals[DYNAMIC],
            len(timed),
            keep,
        )

    def _median_ms(
        self, fn: Callable, call: tuple[tuple, dict], cuda_index: int | None, use_device_time: bool
    ) -> float:
        """docs/reference/measurement.md#one-measured-call calls of `fn` on a fresh copy of `call` each: the median of
        the measured ones."""
        times = []
        for i in range(COMPARE_WARMUP_CALLS + COMPARE_MEASURED_CALLS):
            args, kwargs = copy.deepcopy(call)  # outside the timed window

            def run(args: tuple = args, kwargs: dict = kwargs) -> object:
                with self._autocast():
                    return fn(*args, **kwargs)

            host_ns, device_ms = _C.time_call(run, cuda_index)
            if i >= COMPARE_WARMUP_CALLS:
                times.append(device_ms if use_device_time and device_ms is not None else host_ns / 1e6)
        return statistics.median(times)

    def _compile_specialised(self) -> None:
        """dynamic=False on a private code object, warmed up on every compared shape."""
        self._specialised_forward = _private_forward(self._forward)
        self._specialised = self._compile(self._specialised_forward, dynamic=False)
        with torch.no_grad(), self._tracing():
            for _, call in self._compare_calls:
                args, kwargs = copy.deepcopy(call)
                self._specialised(*args, **kwargs)

    def _drop_specialised(self) -> None:
        """Drops the specialised variant; its Dynamo cache is its own code object's, so clearing
        it touches nothing else (no global reset)."""
        forward = self._specialised_forward
        self._specialised = None
        self._specialised_forward = None
        self._specialised_keys = frozenset()
        self._compare_calls = []  # only the specialised variant's re-warm-up (activate) needs them
        _clear_code_cache(forward)

    def _route(self, *args: object, **kwargs: object) -> object:
        """Dispatch by shape: specialised static graphs for the compared shapes, the dynamic
        build for every other call."""
        key = shape_key(args, kwargs)
        if key in self._specialised_keys:
            return self._specialised(*args, **kwargs)
        if self._dynamic_pending:
            self._compile_deferred_dynamic(key)
        return self._compiled(*args, **kwargs)

    def _compile_deferred_dynamic(self, key: tuple) -> None:
        """The first call at a shape tuning did not store: compiles the deferred dynamic build on
        its warm-up calls, in the build's context (freezing's switch is read while tracing)."""
        with _DEFERRED_COMPILE_LOCK:
            if not self._dynamic_pending:
                return
            logger.info(
                "TorchInductorJitBackend (graph '%s'): first call at input shapes %s, which no stored sample has: "
                "compiling the dynamic build now (once; store a call at every shape you serve before tuning to "
                "compile it then)",
                self._graph_name,
                key,
            )
            started = time.monotonic()
            self._warm_up_dynamic()
            self._dynamic_pending = False
            logger.info(
                "TorchInductorJitBackend (graph '%s'): dynamic build compiled in %.1f s",
                self._graph_name,
                time.monotonic() - started,
            )

    def _compile(self, forward: Callable | None = None, dynamic: bool | None = None) -> Callable:
        forward = forward if forward is not None else self._forward
        dynamic = self._dynamic if dynamic is None else dynamic
        config = self.config
        options = config.inductor_options()  # a fresh dict: torch.compile pops keys
        compiled = None
        simple_options = options is None or not ({"guard_filter_fn", "use_aoti"} & options.keys())
        if simple_options and hasattr(torch, "_TorchCompileInductorWrapper"):
            # torch.compile(backend="inductor") is exactly this call; going one level down lets
            # Dynamo tell us about recompiles of this function alone (guard_fail_fn). The wrapper
            # applies the mode's settings, then the options (the settings fields among them).
            try:
                backend = torch._TorchCompileInductorWrapper(config.mode, options, dynamic)
                compiled = torch._dynamo.optimize(
                    backend=backend,
                    nopython=config.fullgraph,
                    dynamic=dynamic,
                    guard_fail_fn=self._on_guard_fail,
                )(forward)
            except TypeError:
                compiled = None
        if compiled is None:
            kwargs: dict[str, object] = {"fullgraph": config.fullgraph, "dynamic": dynamic}
            if options is not None:
                # torch.compile takes mode or options, not both: the mode's settings go in first.
                kwargs["options"] = {**config.mode_settings(), **options}
            elif config.mode is not None:
                kwargs["mode"] = config.mode
            compiled = torch.compile(forward, **kwargs)
        return compiled

    @contextlib.contextmanager
    def _tracing(self) -> Iterator[None]:
        """The context of the calls that compile (warm-ups): the backend's autocast; with
        `freezing`, Inductor's global freezing switch (Dynamo decides while tracing whether the
        weights become graph constants: torch._dynamo.utils.is_parameter_freezing reads the global
        config, so freezing passed only in torch.compile's options would freeze nothing); and, in
        strict mode, Python floats specialised (specialize_float_patch)."""
        with (
            self._autocast(),
            torch._inductor.config.patch(freezing=True) if self.config.freezing else contextlib.nullcontext(),
            specialize_float_patch(),
        ):
            yield

    def _compile_and_warm_up(self) -> None:
        """torch.compile is lazy: the warm-up calls compile. A deferred dynamic build is wrapped
        here and compiled by its first call (_compile_deferred_dynamic)."""
        self._recompile_armed = False
        self._compiled = self._compile()
        self._dynamic_pending = self._dynamic_deferred
        if not self._dynamic_pending:
            run_warmup(self._compiled, self._warmup_calls, self._tracing)
        self._recompile_armed = True

    def _on_guard_fail(self, failure: object) -> None:
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
            self._graph_name,
            reason.strip().splitlines()[0] if reason else "unknown reason",
            limit,
        )

    def _infer(self, *args: object, **kwargs: object) -> object:
        return self._call_autocast(self._route if self._specialised is not None else self._compiled, *args, **kwargs)

    def _activate(self) -> None:
        if self._module is not None and self._device is not None:
            self._module.to(self._device)
        if self._forward is not None:
            keep_compile_caches_in_aitune()
            self._compile_and_warm_up()
            if self._dynamic_choice == SPECIALISED:
                self._recompile_armed = False
                try:
                    self._compile_specialised()
                finally:
                    self._recompile_armed = True

    def _deactivate(self) -> None:
        self._recompile_armed = False
        self._compiled = None
        self._specialised = None
        self._specialised_forward = None  # its compiled entries go with the reset below
        reset_compiler_caches()
