"""The AITune paths added by issue 28 work as AITune's users call them: the profiling loop of
`aitune.torch.task.profiling.profiling`, `jit_reset` and `GraphBreakException`,
`aitune.global_context`, `aitune.utils` and the monitoring annotation its examples put on their
inference functions (docs/guide.md, "Coming from AITune")."""

from __future__ import annotations

import logging

import pytest
import torch

import aitune.torch as ait
from aitune.torch.backend import TorchEagerBackend
from aitune.torch.global_context import published_batch_size
from aitune.torch.graph.recording import Recorder
from aitune.torch.task.profiling.config import ProfilingConfig
from aitune.torch.task.profiling.measuring_stop_strategy import NumStepsMeasuringStopStrategy
from aitune.torch.task.profiling.profiling import ProfilingResults, ProfilingStatus, profile, profile_backend
from aitune.torch.task.profiling.profiling_stop_strategy import AllSamplesProfilingStopStrategy


def _config(batch_sizes, **kwargs) -> ProfilingConfig:
    return ProfilingConfig(
        batch_sizes=batch_sizes,
        measurement_stop_strategy=NumStepsMeasuringStopStrategy(num_steps=3, warmup_samples=1),
        profiling_stop_strategy=AllSamplesProfilingStopStrategy(),
        **kwargs,
    )


def test_profile_sweeps_the_batch_sizes_with_the_configured_rules():
    model = torch.nn.Linear(4, 2)
    status = profile(model, [torch.randn(4) for _ in range(8)], _config([1, 2, 4]), model_name="lin")
    assert status.status is ProfilingStatus.Status.SUCCESS and status.error is None
    assert isinstance(status.results, ProfilingResults)
    events = status.results.entries
    assert [e.batch_size for e in events] == [1] * 4 + [2] * 4 + [4] * 4  # 1 warm-up + 3 steps each
    assert all(e.execution_time > 0 and e.model_name == "lin" and e.phase == "inference" for e in events)


def test_profile_stops_at_the_batch_size_whose_calls_fail():
    def model(x):
        if x.shape[0] > 2:
            raise RuntimeError("too large")
        return x * 2

    status = profile(model, [torch.randn(3) for _ in range(8)], _config([1, 2, 4, 8]))
    assert status.status is ProfilingStatus.Status.SUCCESS
    assert sorted({e.batch_size for e in status.results.entries}) == [1, 2]


def test_a_failing_stop_rule_is_a_failure_status_with_the_events_so_far():
    class Exploding(AllSamplesProfilingStopStrategy):
        def should_stop(self, results):
            raise ValueError("rule broke")

    config = _config([1, 2])
    config.profiling_stop_strategy = Exploding()
    status = profile(torch.nn.Identity(), [torch.randn(2)], config)
    assert status.status is ProfilingStatus.Status.FAILURE
    assert isinstance(status.error, ValueError) and len(status.results.entries) == 4


def test_profile_backend_resizes_the_graphs_first_sample(tmp_path):
    model = torch.nn.Linear(4, 2).eval()
    recorder = Recorder("lin", model.forward)
    for batch in (1, 2):
        with published_batch_size(batch), torch.no_grad():
            x = torch.randn(batch, 4)
            recorder.record((x,), {}, lambda x=x: model(x))
    graph = recorder.graphs[0]
    backend = TorchEagerBackend().build(model, graph, graph.samples, "cpu", tmp_path)
    backend.activate()
    status = profile_backend(backend, "lin", graph, graph.samples, _config([1, 4, 8]))
    assert status.status is ProfilingStatus.Status.SUCCESS
    assert [e.batch_size for e in status.results.entries] == [1] * 4 + [4] * 4 + [8] * 4
    assert {e.backend_details for e in status.results.entries} == {backend.describe()}
    unbatched = profile_backend(backend, "lin", graph, graph.samples, _config([1, 4], batching=False))
    assert {e.batch_size for e in unbatched.results.entries} == {1}
    with pytest.raises(ValueError, match="data is empty"):
        profile_backend(backend, "lin", graph, [], _config([1]))


def test_task_package_exports_aitunes_profiling_names():
    from aitune.torch import task

    assert task.profile is profile and task.ProfilingStatus is ProfilingStatus
    assert task.ProfilingConfig is ProfilingConfig


def test_jit_reset_stops_patching_and_forgets_every_module(jit_clean):
    from aitune.torch.jit import patcher
    from aitune.torch.jit.state import get_patched, runtime

    patcher.enable()
    net = torch.nn.Sequential(torch.nn.Linear(2, 2))
    assert patcher.is_patching() and get_patched(net[0]) is not None
    patcher.jit_reset()
    assert not patcher.is_patching()
    assert get_patched(net[0]) is None and not runtime.heads
    assert type(torch.nn.Linear(2, 2)).__init__ is torch.nn.Linear.__init__


def test_graph_break_exception_is_what_the_probe_raises_and_a_runtime_error():
    from aitune.exceptions import AITuneError
    from aitune.torch.jit.patched_module import GraphBreakException

    assert issubclass(GraphBreakException, RuntimeError) and issubclass(GraphBreakException, AITuneError)
    import aitune.torch.jit.jit_tuning as jit_tuning

    assert jit_tuning.GraphBreakException is GraphBreakException


def test_global_context_reads_the_batch_size_ait_tune_runs_at():
    from aitune.global_context import BATCH_SIZE_KEY, global_context

    assert global_context.get(BATCH_SIZE_KEY, 4) == 4
    seen = []

    class Probe(torch.nn.Module):
        def forward(self, x):
            seen.append(global_context.get(BATCH_SIZE_KEY, -1))
            return x + 1

    strategy = ait.OneBackendStrategy(TorchEagerBackend()).enable_find_max_batch_size(False)
    module = ait.Module(Probe(), "probe-global-context", strategy=strategy)
    try:
        ait.tune(module, [torch.randn(3) for _ in range(4)], batch_sizes=[2, 3], device="cpu")
    finally:
        from aitune.torch.module_registry import MODULE_REGISTRY

        MODULE_REGISTRY.clear()
    assert {2, 3} <= set(seen)
    assert global_context.get(BATCH_SIZE_KEY, 4) == 4


def test_global_context_layers():
    from aitune.global_context import GlobalContext

    context = GlobalContext()
    context.set("bs", 1)
    with context:
        context.set("bs", 2)
        with context:
            context.set("bs", 3)
            assert context.get("bs") == 3
        assert context.get("bs") == 2
    assert context.get("bs") == 1 and context.get("missing", "d") == "d"


def test_annotate_marks_a_range_in_the_profiler_trace():
    from aitune.utils.monitoring import annotate

    @annotate(name="inference", color="green")
    def infer(x):
        return x * 2

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        assert torch.equal(infer(torch.ones(2)), torch.full((2,), 2.0))
        with annotate("block"):
            torch.ones(1) + 1
    names = {e.name for e in prof.events()}
    assert {"inference", "block"} <= names
    assert infer.__name__ == "infer"
    with pytest.raises(ValueError, match="needs a name"):
        with annotate():
            pass


def test_utils_logging_helpers(tmp_path):
    from aitune.utils import set_module_level, setup_logging

    log_file = tmp_path / "aitune.log"
    logger = setup_logging(level="DEBUG", log_file=log_file)
    try:
        assert logger is logging.getLogger("aitune") and logger.level == logging.DEBUG
        logger.debug("a debug line")
        for handler in logger.handlers:
            handler.flush()
        assert "a debug line" in log_file.read_text()
        set_module_level("aitune.dynamo", "WARNING")
        assert logging.getLogger("aitune.dynamo").level == logging.WARNING
        with pytest.raises(ValueError, match="Unknown logging level"):
            set_module_level("aitune", "LOUD")
    finally:
        for handler in [h for h in logger.handlers if getattr(h, "baseFilename", None)]:
            logger.removeHandler(handler)
            handler.close()
        logger.setLevel(logging.NOTSET)
        logging.getLogger("aitune.dynamo").setLevel(logging.NOTSET)
