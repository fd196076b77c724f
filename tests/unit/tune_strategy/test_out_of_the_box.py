"""What a user with no options gets (issue 12; docs/guide.md "Strategies", "The performance gate",
"When nothing qualifies"): the default candidate lists per device, the tolerance table, where
the gate measures, the max-batch search's time budget, the plain kept-eager outcome, and the
dataset hint. Strategy flows use the fake backend (tests/fakes/fake_backend.py)."""

from __future__ import annotations

import json
import logging

import pytest
import torch

import aitune.torch as ait
from aitune._native import _C
from aitune.exceptions import AITuneUserInputError, NoValidBackendError
from aitune.torch.backend import TorchEagerBackend
from aitune.torch.config import config
from aitune.torch.global_context import published_batch_size
from aitune.torch.module.state import ModuleState
from aitune.torch.task.sweep import SweepLimits, profile
from aitune.torch.task.profiling import NumStepsMeasuringStopStrategy, ProfilingConfig

from fake_backend import FakeBackend, FakeBackendConfig, SleepyLinear


def fake(**kwargs) -> FakeBackend:
    return FakeBackend(FakeBackendConfig(**kwargs))


def quick(batch_sizes=(1, 2, 4)) -> ProfilingConfig:
    return ProfilingConfig(batch_sizes=list(batch_sizes), measurement_stop_strategy=NumStepsMeasuringStopStrategy(5, 2))


def recorded(delay_s: float = 0.004, name: str = "m", sizes=(1, 2), strategy=None) -> ait.Module:
    m = ait.Module(SleepyLinear(delay_s).eval(), name, strategy=strategy)
    with torch.no_grad():
        for bs in sizes:
            with published_batch_size(bs):
                m(torch.randn(bs, 8))
    return m


def telemetry() -> dict:
    return json.loads(config.tuning_data_output_path.read_text())


# -- default candidate lists -------------------------------------------------------------------
CUDA_FIRST_WINS = [
    "TensorRTBackend(use_cuda_graphs=True)",
    "TensorRTBackend(use_dynamo=False, use_cuda_graphs=True)",
    "TorchInductorJitBackend(use_cuda_graphs=True, freezing=True)",
    "TorchInductorJitBackend(use_cuda_graphs=True)",
    "TorchInductorAotBackend(use_cuda_graphs=True)",
    "TorchEagerBackend(use_cuda_graphs=True)",
    "TorchInductorJitBackend()",
]
CPU_FIRST_WINS = ["TensorRTBackend()", "TensorRTBackend(use_dynamo=False)", "TorchInductorJitBackend()"]
PROFILING_FAMILIES = [
    "TensorRTBackend({})",
    "TensorRTBackend(use_dynamo=False{})",
    "TorchInductorJitBackend({})",
    "TorchInductorJitBackend({}freezing=True)",
    "TorchInductorJitBackend({}freezing=True, coordinate_descent_tuning=True)",
    "TorchInductorJitBackend(mode='max-autotune-no-cudagraphs', {}freezing=True)",
    "TorchInductorAotBackend({})",
    "TorchTensorRTJitBackend({})",
    "TorchTensorRTAotBackend({})",
    "ONNXRuntimeBackend({})",
    "ONNXRuntimeBackend(use_dynamo=False{})",
]


def names(strategy) -> list[str]:
    return [b.describe() for b in strategy.backends]


def test_first_wins_default_candidates_per_device():
    assert names(ait.FirstWinsStrategy().prepare("cpu")) == CPU_FIRST_WINS
    assert names(ait.FirstWinsStrategy().prepare("cuda:0")) == CUDA_FIRST_WINS
    # prepare follows the device each time; an explicit list is never replaced
    assert names(ait.FirstWinsStrategy().prepare("cuda:1").prepare("cpu")) == CPU_FIRST_WINS
    explicit = ait.FirstWinsStrategy([fake(name="x")])
    assert names(explicit.prepare("cuda:0")) == ["FakeBackend(name='x')"]


@pytest.mark.parametrize(
    "make", [ait.MaxThroughputStrategy, ait.MinLatencyStrategy, lambda: ait.LatencyBudgetStrategy(5.0)]
)
def test_profiling_default_candidates_per_device(make):
    # On the CPU the Inductor settings search is not tried (INDUCTOR_SEARCH is for CUDA).
    plain = [f.format("") for f in PROFILING_FAMILIES if "freezing" not in f]
    assert names(make().prepare("cpu")) == plain
    cuda = []
    for family in PROFILING_FAMILIES:
        if "use_dynamo" in family:
            graph = family.format(", use_cuda_graphs=True")
        elif "freezing" in family:
            graph = family.format("use_cuda_graphs=True, ")
        else:
            graph = family.format("use_cuda_graphs=True")
        cuda += [graph, family.format("")]
    assert names(make().prepare("cuda:0")) == cuda + ["TorchEagerBackend(use_cuda_graphs=True)"]


def test_jit_default_strategy_uses_the_device_lists():
    from aitune.torch.jit.config import Config
    from aitune.torch.jit.jit_tuning import jit_strategy

    strategy = Config().resolve_strategy()
    assert type(strategy).__name__ == "FirstWinsStrategy" and strategy._performance_validation
    assert names(strategy.clone().prepare("cuda:0")) == CUDA_FIRST_WINS
    assert names(strategy.clone().prepare("cpu")) == CPU_FIRST_WINS
    assert not jit_strategy()._find_max_batch_size


# -- tolerances --------------------------------------------------------------------------------
def test_the_deciding_bound_is_logged_and_in_the_telemetry(aitune_log):
    m = recorded(name="tol")
    strategy = ait.FirstWinsStrategy([fake(name="good")], profiling_config=quick())
    strategy.enable_find_max_batch_size(False)
    m.tune(device="cpu", strategy=strategy)
    correctness = telemetry()["modules"][0]["graphs"][0]["builds"][0]["correctness"]
    assert correctness["passed"] and correctness["decided_by"] == "max_rel_l2"  # exact outputs: both zero
    assert "🔍 numeric check (fp32):" in aitune_log.text and "(decided by rel_l2 ≤ 0.0001)" in aitune_log.text
    # the rule itself: the bound that fails, else the one used the most
    fp16 = {"atol": 1e-2, "rtol": 1e-2, "max_rel_l2": 1e-2, "max_mismatch_fraction": 1e-2}
    leaf = {"max_abs_error": 0.1, "max_rel_error": 0.1, "has_nan": False, "numel": 1000}
    assert (
        _C.deciding_bound({**leaf, "rel_l2_error": 1.37e-3, "mismatch_fraction": 6e-3}, fp16) == "max_mismatch_fraction"
    )
    assert _C.deciding_bound({**leaf, "rel_l2_error": 2e-2, "mismatch_fraction": 6e-3}, fp16) == "max_rel_l2"
    assert _C.deciding_bound({**leaf, "rel_l2_error": 0.0, "mismatch_fraction": 0.0, "has_nan": True}, fp16) == "nan"


# -- the gate ----------------------------------------------------------------------------------
def test_gate_measures_at_the_callers_batch_sizes_not_at_the_searched_max():
    config.device_after_tuning = "cpu"  # the ahead-of-time stand-in still serves the module's weights
    m = recorded(delay_s=0.004, name="gate", sizes=(1, 2))
    strategy = ait.FirstWinsStrategy([fake(name="fast", ahead_of_time=True)], profiling_config=quick((1, 2, 4, 8, 16)))
    m.tune(device="cpu", strategy=strategy)  # find-max-batch-size on
    graph = m.graph_specs[0]
    assert graph.observed_batch_sizes == [1, 2]
    assert graph.max_batch_size() > 2, "the search widened the max"
    result = strategy.perf_validation_results[0]
    assert result["batch_sizes"] == [1, 2] and result["passed"]
    report = telemetry()["modules"][0]["graphs"][0]
    assert sorted(r["batch_size"] for r in report["baseline_measurements"]) == [1, 2]


def test_gate_rejects_a_candidate_slower_than_eager_at_one_size(aitune_log):
    m = recorded(delay_s=0.008, name="uneven", sizes=(1, 2))
    # 8x faster than eager at batch 1, half as fast at batch 2: geometric mean 2x, still rejected
    # (the margins are wide so that a loaded machine's timing noise cannot flip the verdict)
    uneven = fake(name="uneven", batch_delays_s=((1, 0.001), (2, 0.016)))
    strategy = ait.FirstWinsStrategy([uneven], profiling_config=quick())
    strategy.enable_find_max_batch_size(False)
    with pytest.raises(NoValidBackendError) as info:
        m.tune(device="cpu", strategy=strategy)
    result = strategy.perf_validation_results[0]
    assert result["speedup"] > 1.5 and not result["passed"] and result["worst_speedup"] < 0.97
    message = info.value.outcome.message()
    assert message.startswith("🟰 uneven.0: kept eager — FakeBackend(name='uneven', batch_delays_s=")
    assert "needs ≥ 1.01×; not slower than eager by more than 3 % at any batch size" in message
    assert "at batch size 2" in message


def test_gate_rule_geomean_and_worst_size():
    assert _C.first_wins_gate([1.5, 0.98], 1.0)["passed"]
    verdict = _C.first_wins_gate([2.0, 0.96], 1.0)
    assert not verdict["passed"] and verdict["too_slow_somewhere"] and verdict["worst_index"] == 1
    assert not _C.first_wins_gate([1.0, 1.0], 1.0)["passed"]


# -- find-max-batch-size time budget -------------------------------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_sweep_stops_at_the_time_budget_with_a_fake_clock():
    clock = FakeClock()
    m = recorded(delay_s=0.0, name="budget", sizes=(1, 2))
    graph = m.graph_specs[0]

    def call(x):
        clock.now += 0.1  # every call "takes" 0.1 s: 3 s per batch size (10 warm-up + 20 measured)
        return x

    config_ = ProfilingConfig(batch_sizes=[2**n for n in range(10)])
    limits = SweepLimits(time_budget_s=20.0, clock=clock)
    results = profile(call, graph, graph.samples, config_, torch.device("cpu"), config_.batch_sizes, limits=limits)
    # after batch 16 the sweep has spent 15 s; batch 32 would take about 6 s more: over 20 s
    assert [r["batch_size"] for r in results] == [1, 2, 4, 8, 16]
    assert limits.stopped_by.startswith("the time budget of 20 s (spent 15.0 s; batch size 32 would take about")
    unlimited = SweepLimits(clock=clock)
    results = profile(
        call,
        graph,
        graph.samples,
        ProfilingConfig(batch_sizes=[1, 2, 4]),
        torch.device("cpu"),
        [1, 2, 4],
        limits=unlimited,
    )
    assert len(results) == 3 and unlimited.stopped_by == "the last batch size to try"


def test_first_wins_searches_only_before_a_candidate_built_for_the_max_shapes(aitune_log):
    """A JIT winner needs no max-batch search; an ahead-of-time candidate gets it before its build."""
    search = "Finding max batch size for module `lazy` graph `0`"
    m = recorded(delay_s=0.004, name="lazy", sizes=(1, 2))
    m.tune(device="cpu", strategy=ait.FirstWinsStrategy([fake(name="jit")], profiling_config=quick((1, 2, 4, 8))))
    assert m.state is ModuleState.TUNED and search not in aitune_log.text
    assert m.graph_specs[0].max_batch_size() == 2, "the recorded max stays"
    config.device_after_tuning = "cpu"
    m = recorded(delay_s=0.004, name="lazy", sizes=(1, 2))
    strategy = ait.FirstWinsStrategy(
        [fake(name="broken", fail_build=True), fake(name="aot", ahead_of_time=True)],
        profiling_config=quick((1, 2, 4, 8)),
    )
    m.tune(device="cpu", strategy=strategy)
    text = aitune_log.text
    assert (
        text.index("fake build failure (broken)")
        < text.index(search)
        < text.index("🤖 backend: FakeBackend(name='aot'")
    )
    assert m.graph_specs[0].max_batch_size() > 2, "the search widened the max before the ahead-of-time build"


def test_max_batch_search_logs_what_stopped_it(aitune_log):
    config.max_batch_search_s = 1e-6  # spent after the first batch size
    config.device_after_tuning = "cpu"
    m = recorded(delay_s=0.0, name="search")
    strategy = ait.FirstWinsStrategy([fake(name="f", ahead_of_time=True)], profiling_config=quick((1, 2, 4, 8)))
    strategy.enable_performance_validation(False)
    m.tune(device="cpu", strategy=strategy)
    assert "(search stopped by the time budget of 1e-06 s (spent" in aitune_log.text
    assert telemetry()["modules"][0]["graphs"][0]["max_batch_search"]["stopped_by"].startswith("the time budget")
    with pytest.raises(ValueError, match="max_batch_search_s must be a number of seconds > 0 or None, got 0"):
        config.max_batch_search_s = 0
    config.max_batch_search_s = None
    assert config.max_batch_search_s is None and config.to_dict()["max_batch_search_s"] is None


# -- kept eager ----------------------------------------------------------------------------------
def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name == "aitune"]


def test_nothing_faster_than_eager_keeps_eager_plainly(aitune_log):
    strategy = ait.FirstWinsStrategy([fake(name="slower", delay_s=0.01)], profiling_config=quick())
    m = recorded(delay_s=0.002, name="slow", strategy=strategy.enable_find_max_batch_size(False))
    ait.tune(lambda x: None, [torch.randn(8)], device="cpu")  # m recorded its calls already
    assert m.state is ModuleState.PASSTHROUGH
    assert "🟰 slow.0: kept eager — FakeBackend(name='slower', delay_s=0.01) was 0." in aitune_log.text
    assert "× eager (needs ≥ 1.01×)" in aitune_log.text
    assert "➤ kept eager: using original module" in aitune_log.text
    assert not _warnings(aitune_log), "keeping eager is not a warning"
    assert "failed" not in aitune_log.text.lower().split("🟰")[1].splitlines()[0]
    data = telemetry()
    module = data["modules"][0]
    assert module["outcome"] == "kept_eager" and module["exception"] is None
    graph = module["graphs"][0]
    assert graph["outcome"] == "kept_eager" and graph["outcome_message"].startswith("🟰 slow.0: kept eager")
    assert graph["exception"] is None
    x = torch.randn(3, 8)
    assert torch.equal(m(x), m.module.compute(x))


def test_no_candidate_built_names_the_counts_and_the_log(aitune_log):
    strategy = ait.FirstWinsStrategy(
        [fake(name="absent", unavailable_reason="fakepkg is not installed"), fake(name="broken", fail_build=True)],
        profiling_config=quick(),
    )
    recorded(name="none", strategy=strategy.enable_find_max_batch_size(False))
    ait.tune(lambda x: None, [torch.randn(8)], device="cpu")
    line = next(line for line in aitune_log.text.splitlines() if "🟰 none.0" in line)
    assert "kept eager — no candidate built (1 unavailable, 1 failed: see " in line
    assert line.rstrip().endswith("build.log)")
    assert not _warnings(aitune_log)


def test_profiling_strategy_keeping_eager_says_so(aitune_log):
    m = recorded(delay_s=0.002, name="prof")
    strategy = ait.MinLatencyStrategy([fake(name="slower", delay_s=0.01)], profiling_config=quick())
    m.tune(device="cpu", strategy=strategy)
    assert m.tuned_module.backends[0][1].describe() == "TorchEagerBackend()"
    assert "🟰 prof.0: kept eager — FakeBackend(name='slower', delay_s=0.01) was 0." in aitune_log.text
    assert "(needs > 1.00×)" in aitune_log.text
    assert telemetry()["modules"][0]["graphs"][0]["outcome"] == "kept_eager"


def test_an_unexpected_failure_is_still_a_warning(aitune_log):
    recorded(
        name="boom",
        strategy=ait.OneBackendStrategy(fake(name="broken", fail_build=True)).enable_find_max_batch_size(False),
    )
    ait.tune(lambda x: None, [torch.randn(8)], device="cpu")
    assert any("Tuning module: `boom` failed" in w for w in _warnings(aitune_log))
    assert telemetry()["modules"][0]["outcome"] == "failed"


# -- the dataset hint -----------------------------------------------------------------------------
class TinyConv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def test_batched_dataset_items_get_a_hint():
    eager = ait.OneBackendStrategy(TorchEagerBackend())
    m = ait.Module(
        TinyConv().eval(), "conv", strategy=eager.enable_performance_validation(False).enable_find_max_batch_size(False)
    )
    already_batched = [torch.randn(1, 3, 8, 8) for _ in range(4)]
    with pytest.raises(AITuneUserInputError) as info:
        ait.tune(m, already_batched, device="cpu")
    text = str(info.value)
    assert text.startswith("ait.tune: the first call with a batch of 1 raised RuntimeError: ")
    assert "Dataset items are single, unbatched samples: ait.tune stacks batch_size of them" in text
    assert "args[0]: batch [1, 1, 3, 8, 8], one item [1, 3, 8, 8]" in text
    assert "dataset = list(batch.unbind(0))" in text
    assert isinstance(info.value.__cause__, RuntimeError)
    # the fix works
    ait.tune(m, list(torch.randn(4, 3, 8, 8).unbind(0)), device="cpu")
    assert m.state in (ModuleState.TUNED, ModuleState.PASSTHROUGH)


# -- the precision class travels with the checkpoint -----------------------------------------------
def test_checkpoint_records_the_validated_precision_class_and_tf32_switches(tmp_path):
    from checkpoint_tools import read_archive

    m = recorded(
        name="prec",
        strategy=ait.FirstWinsStrategy(
            [fake(name="f", precision="fp16")], profiling_config=quick()
        ).enable_find_max_batch_size(False),
    )
    m.tune(device="cpu")
    path = ait.save(m, tmp_path / "prec.ait")
    manifest, _ = read_archive(path)
    backend = manifest["modules"][0]["graphs"][0]["backend"]
    assert backend["precision_class"] == "fp16"
    assert set(backend["tf32"]) == {"cuda_matmul_allow_tf32", "cudnn_allow_tf32", "float32_matmul_precision"}
    loaded = ait.load(SleepyLinear(0.0).eval(), path)
    assert loaded.tuned_module.backends[0][1].validated_precision["precision_class"] == "fp16"


def test_cli_reads_an_older_cuda_fp32_checkpoint_as_tf32(tmp_path):
    """Checkpoints saved before the class was recorded say fp32 for a CUDA fp32 model, which torch
    computed with cuDNN's TF32: `aitune run --check` used to judge them as fp32 (56.7 % mismatched)."""
    import subprocess

    from checkpoint_tools import rewrite
    from support import aitune_cli

    m = recorded(
        name="old",
        strategy=ait.FirstWinsStrategy([fake(name="f")], profiling_config=quick()).enable_find_max_batch_size(False),
    )
    m.tune(device="cpu")
    path = ait.save(m, tmp_path / "new.ait")

    def as_old_cuda(manifest: dict) -> None:
        backend = manifest["modules"][0]["graphs"][0]["backend"]
        backend.pop("tf32")
        backend["device"] = "cuda:0"

    old = rewrite(path, tmp_path / "old.ait", edit_manifest=as_old_cuda)
    for ckpt, expected in ((path, "fp32"), (old, "tf32")):
        r = subprocess.run([aitune_cli(), "inspect", str(ckpt), "--json"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["modules"][0]["graphs"][0]["precision_class"] == expected
