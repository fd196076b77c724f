"""A second process that reuses a tuning result compiles from torch's FX-graph cache
(docs/reference/configuration.md#compiler-caches).

Measured on an H100 (2026-12-07, benchmarks/RESULTS.md): the warm ResNet-50 tune missed the cache
on both of its compiles, because the first process had compiled after aitune's float32 reference
changed `torch.backends.cuda.matmul.fp32_precision` from "none" to "ieee" (a part of the cache key)
and the second before it. An fp16 model shows the same on the CPU, since its numeric check also
computes that reference."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

CHILD = textwrap.dedent(
    """
    import json, sys
    import torch
    import aitune.torch as ait
    from aitune.torch.backend import TorchInductorJitBackend, TorchInductorJitBackendConfig
    from torch._dynamo.utils import counters

    # CPU only: mkldnn weight prepacking makes torch bypass its FX-graph cache altogether (mkldnn
    # tensors do not pickle); the CUDA path this test stands for has no such bypass.
    torch._inductor.config.cpp.weight_prepack = False
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    ).eval().half()
    backend = TorchInductorJitBackend(TorchInductorJitBackendConfig(freezing=True))
    module = ait.Module(model, "mlp", strategy=ait.OneBackendStrategy(backend).enable_performance_validation(False))
    before = torch.backends.cuda.matmul.fp32_precision
    ait.tune(module, [torch.randn(16, dtype=torch.float16) for _ in range(2)], batch_sizes=[1, 2], device="cpu")
    picks = [b.describe() for _, b in module.tuned_module.backends] if module.tuned_module else []
    print(json.dumps({
        "picks": picks,
        "hit": counters["inductor"]["fxgraph_cache_hit"],
        "miss": counters["inductor"]["fxgraph_cache_miss"],
        "bypass": counters["inductor"]["fxgraph_cache_bypass"],
        "matmul_precision": [before, torch.backends.cuda.matmul.fp32_precision],
    }))
    """
)


def _tune_in_a_process(env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(
    not hasattr(torch.backends.cuda.matmul, "fp32_precision"), reason="torch < 2.9 has no per-backend fp32_precision"
)
def test_a_second_process_reusing_the_result_hits_torchs_fx_graph_cache(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AITUNE_", "TORCHINDUCTOR_"))}
    env.update(AITUNE_CACHE_DIR=str(tmp_path / "aitune"), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    first = _tune_in_a_process(env)
    assert first["picks"] == ["TorchInductorJitBackend(freezing=True)"], first
    assert first["miss"] >= 1 and first["hit"] == 0, first  # cold: it compiled
    assert first["matmul_precision"] == ["none", "none"], first  # the reference left the switch alone
    second = _tune_in_a_process(env)
    assert second["picks"] == first["picks"], second
    assert second["miss"] == 0 and second["bypass"] == 0, second
    # The first compiled the static batch-1 graph and, for the numeric check's call at batch 2, the
    # dynamic build; the second serves the stored batch-1 shape by the static graph alone (the
    # dynamic build compiles at its first call), and that graph came from the cache.
    assert first["miss"] == 2, first
    assert second["hit"] == 1, second
