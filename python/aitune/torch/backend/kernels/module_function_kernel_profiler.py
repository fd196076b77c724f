"""ModuleFunctionKernelProfiler (AITune's `ait.ModuleFunctionKernelProfiler`, docs/guide.md
"Profiling a call"): attributes every CUDA kernel a run launches to the module and the
`torch.nn.functional` call it ran in, and collects the distinct inputs of those calls.

While profiling, every submodule of `module` runs inside a `record_function` labelled
`ait_nn_module:<name>` (forward hooks) and every public `torch.nn.functional` function inside
`ait_torch.nn.functional:<function>` (the module attribute is swapped for a recording wrapper and
restored afterwards). A kernel belongs to the nearest labels above the operator that launched it.
Results are pandas DataFrames, as in AITune; pandas is imported when results are built."""

from __future__ import annotations

import contextlib
import functools
import inspect
import types
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.nn.functional as F

from aitune.torch.performance.regions import Region, RegionHooks

MODULE_PREFIX = "ait_nn_module:"
FUNCTIONAL_PREFIX = "ait_torch.nn.functional:"
ROW_COLUMNS = ("module_name", "module", "function_name", "op", "kernel", "kernel_us")
SUMMARY_COLUMNS = (
    "function_name",
    "calls",
    "num_distinct_samples",
    "num_modules",
    "time_spent_us",
    "time_spent_pct",
    "tensor_size_MB",
)

FunctionData = list  # [(call_count, (args, kwargs)), ...] per distinct input


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise ImportError("ModuleFunctionKernelProfiler returns pandas DataFrames: pip install pandas") from None
    return pandas


def _sample_key(value: Any) -> Any:
    """Identity of an input: tensors by shape, dtype and device; other values by value."""
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype), str(value.device))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_sample_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _sample_key(v)) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))))
    try:
        hash(value)
        return ("value", value)
    except TypeError:
        return ("object", type(value).__qualname__, id(value))


def _detached(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_detached(v) for v in value) if not hasattr(value, "_fields") else value
    if isinstance(value, dict):
        return {k: _detached(v) for k, v in value.items()}
    return value


def tensor_size_bytes(args: Any, kwargs: Any = None) -> int:
    total = 0
    for value in (args, kwargs or {}):
        if isinstance(value, torch.Tensor):
            total += value.numel() * value.element_size()
        elif isinstance(value, (list, tuple)):
            total += sum(tensor_size_bytes(v) for v in value)
        elif isinstance(value, dict):
            total += sum(tensor_size_bytes(v) for v in value.values())
    return total


def _nearest_label(event: Any, prefix: str) -> str | None:
    while event is not None:
        name = getattr(event, "name", "")
        if name.startswith(prefix):
            return name[len(prefix) :]
        event = getattr(event, "cpu_parent", None)
    return None


def attribute_kernels(events: Sequence[Any], modules_by_name: dict[str, torch.nn.Module]) -> list[dict[str, Any]]:
    """One row per kernel launched inside both a module label and a functional label."""
    rows = []
    for event in events:
        kernels = getattr(event, "kernels", None) or []
        if not kernels or str(getattr(event, "device_type", "DeviceType.CPU")) != "DeviceType.CPU":
            continue
        function = _nearest_label(event, FUNCTIONAL_PREFIX)
        module_name = _nearest_label(event, MODULE_PREFIX)
        if function is None or module_name is None:
            continue  # launched outside the instrumented calls (e.g. the profiler's own warm-up kernel)
        for kernel in kernels:
            rows.append(
                {
                    "module_name": module_name,
                    "module": modules_by_name.get(module_name),
                    "function_name": function,
                    "op": event.name,
                    "kernel": kernel.name,
                    "kernel_us": float(kernel.duration),
                }
            )
    return rows


class ModuleFunctionKernelProfiler:
    def __init__(self, function_names: set[str] | None = None) -> None:
        """`function_names`: the functional calls whose inputs are collected (None: all, an
        empty set: none); it does not filter the profiled calls."""
        self.function_names = function_names

    def get_functions_to_patch(self, module: types.ModuleType = F) -> list[tuple[str, Callable]]:
        """The public functions of `module` (torch.nn.functional) that get a recording wrapper."""
        # Python functions defined there and the C++ builtins it re-exports (F.linear is
        # torch._C._nn.linear); helpers imported from elsewhere (handle_torch_function) are not calls.
        homes = {module.__name__, "torch", "torch._C._nn"}
        return [
            (name, func)
            for name, func in vars(module).items()
            if not name.startswith("_")
            and (inspect.isfunction(func) or inspect.isbuiltin(func))
            and getattr(func, "__module__", None) in homes
        ]

    def profile(
        self,
        function: Callable,
        data: Sequence[Any] | None = None,
        *,
        module: torch.nn.Module | None = None,
        warmup_iterations: int = 3,
    ) -> tuple[Any, dict[str, FunctionData]]:
        """Runs `function` (on each `(args, kwargs)` of `data`, or once without arguments)
        `warmup_iterations` times unprofiled, then once profiled. Returns (DataFrame with
        ROW_COLUMNS, {function name: [(calls, sample)]})."""
        if module is None and isinstance(function, torch.nn.Module):
            module = function
        if module is None:
            raise ValueError("module must be provided when function is not an nn.Module.")
        if isinstance(warmup_iterations, bool) or not isinstance(warmup_iterations, int) or warmup_iterations < 0:
            raise ValueError(
                f"warmup_iterations must be greater than or equal to 0 (an integer), got {warmup_iterations!r}"
            )
        if not torch.cuda.is_available():
            raise RuntimeError("CUDA is required to profile module and function kernel candidates.")
        pandas = _pandas()
        named = {(name or type(module).__name__): m for name, m in module.named_modules()}
        with torch.no_grad():
            for _ in range(warmup_iterations):
                self._run(function, data)
            torch.cuda.synchronize()
        samples: dict[str, dict[Any, list]] = {}
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with (
            self._module_labels(named),
            self._functional_labels(samples),
            torch.profiler.profile(activities=activities) as prof,
            torch.no_grad(),
        ):
            torch.zeros(1, device="cuda").relu_()  # some profiler builds drop a session's first kernel
            self._run(function, data)
            torch.cuda.synchronize()
        rows = attribute_kernels(prof.events(), named)
        frame = pandas.DataFrame(rows) if rows else pandas.DataFrame(columns=ROW_COLUMNS)
        return frame, {name: [tuple(entry) for entry in found.values()] for name, found in samples.items()}

    def describe_results(self, profiling_df: Any, function_data: dict[str, FunctionData], top_k: int = 10) -> Any:
        """Per functional call (the `top_k` by kernel time): calls, distinct inputs, modules,
        kernel time in µs and its share, and the inputs' tensor size in MB."""
        pandas = _pandas()
        if profiling_df.empty:
            return pandas.DataFrame(columns=SUMMARY_COLUMNS)
        times = profiling_df.groupby("function_name")["kernel_us"].sum()
        total = float(times.sum())
        summary = []
        for name, spent in times.nlargest(top_k).items():
            found = function_data.get(name)
            summary.append(
                {
                    "function_name": name,
                    "calls": sum(count for count, _ in found) if found is not None else float("nan"),
                    "num_distinct_samples": len(found) if found is not None else float("nan"),
                    "num_modules": int(
                        profiling_df.loc[profiling_df["function_name"] == name, "module_name"].nunique()
                    ),
                    "time_spent_us": float(spent),
                    "time_spent_pct": 100.0 * spent / total if total else 0.0,
                    "tensor_size_MB": sum(tensor_size_bytes(*s) for _, s in found) / 1024**2
                    if found is not None
                    else float("nan"),
                }
            )
        return pandas.DataFrame(summary, columns=SUMMARY_COLUMNS)

    @staticmethod
    def _run(function: Callable, data: Sequence[Any] | None) -> None:
        if data is None:
            function()
            return
        for args, kwargs in data:
            function(*args, **kwargs)

    @contextlib.contextmanager
    def _module_labels(self, named: dict[str, torch.nn.Module]) -> Iterator[None]:
        # The same forward hooks as ait.profile, with this profiler's labels.
        with RegionHooks(
            [Region(name, m, "module") for name, m in named.items()],
            label_of=lambda region: MODULE_PREFIX + region.name,
        ):
            yield

    @contextlib.contextmanager
    def _functional_labels(self, samples: dict[str, dict[Any, list]]) -> Iterator[None]:
        originals = self.get_functions_to_patch(F)
        for name, func in originals:
            setattr(F, name, self._recording(name, func, samples))
        try:
            yield
        finally:
            for name, func in originals:
                setattr(F, name, func)

    def _recording(self, name: str, func: Callable, samples: dict[str, dict[Any, list]]) -> Callable:
        collect = self.function_names is None or name in self.function_names

        @functools.wraps(func)
        def wrapper(*args: object, **kwargs: object) -> Any:
            with torch.profiler.record_function(FUNCTIONAL_PREFIX + name):
                if collect:
                    found = samples.setdefault(name, {})
                    key = _sample_key((args, kwargs))
                    if key in found:
                        found[key][0] += 1
                    else:
                        found[key] = [1, (_detached(args), _detached(kwargs))]
                return func(*args, **kwargs)

        return wrapper
