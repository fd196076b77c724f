"""A real CUDA out-of-memory error while tuning (issue 27, part 5; docs/guide.md "Faults while
tuning"): the process is capped to a small share of the GPU (torch.cuda.set_per_process_memory_fraction),
a candidate holds a block and then asks the allocator for more than the cap. It fails with the
allocator's own torch.OutOfMemoryError, the next candidate is tried and wins, and the memory the
failed one held -- allocated and cached -- is given back before the next candidate builds. Runs
in `./run gpu` (pytest -m gpu); about 10 s."""

from __future__ import annotations

import pytest
import torch

import aitune.torch as ait
from aitune.torch.module.state import ModuleState

from fake_backend import FakeBackend, FakeBackendConfig, SleepyLinear
from fault_backends import OutOfMemoryBackend, OutOfMemoryConfig

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

GIB = 1 << 30


class ReservedWitness(FakeBackend):
    """Records the CUDA memory allocated and reserved when it builds (after the failed one)."""

    seen: list[tuple[int, int]] = []

    def _build(self, module, graph_spec, data, device, cache_dir) -> None:
        ReservedWitness.seen.append((torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)))
        super()._build(module, graph_spec, data, device, cache_dir)


def test_a_real_cuda_out_of_memory_is_skipped_and_its_memory_released(aitune_log):
    device = torch.device("cuda:0")
    total = torch.cuda.get_device_properties(device).total_memory
    fraction = min(1.0, 4 * GIB / total)  # a 4 GiB cap: the 8 GiB request cannot fit
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    OutOfMemoryBackend.held.clear()
    ReservedWitness.seen.clear()
    try:
        torch.cuda.empty_cache()
        baseline = torch.cuda.memory_reserved(device)
        strategy = ait.FirstWinsStrategy(
            [
                OutOfMemoryBackend(OutOfMemoryConfig(hold_bytes=2 * GIB, real_bytes=8 * GIB)),
                ReservedWitness(FakeBackendConfig(name="next")),
            ]
        ).enable_find_max_batch_size(False)
        strategy.enable_performance_validation(False)
        torch.manual_seed(0)
        m = ait.Module(SleepyLinear(0.0).eval().to(device), "m", strategy=strategy)  # recording runs it on the device
        ait.tune(m, [torch.randn(8) for _ in range(4)], batch_sizes=[1, 2], device="cuda:0")
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, device)
    assert m.state is ModuleState.TUNED
    assert m.tuned_module.backends[0][1].config.name == "next"
    error = strategy.backend_results[0]["error"]
    assert error.startswith("OutOfMemoryError: CUDA out of memory"), error
    assert "(simulated" not in error, "the allocator raised before the fake's own error"
    assert [ref() is None for ref in OutOfMemoryBackend.held] == [True]
    [(allocated, reserved)] = ReservedWitness.seen
    assert reserved < baseline + GIB, f"{reserved - baseline} bytes still reserved when the next candidate built"
    assert allocated < GIB
    assert "ran out of memory: memory released, trying the next candidate" in aitune_log.text
