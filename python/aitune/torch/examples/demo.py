"""``python -m aitune.torch.examples.demo``: tune the built-in example model with
MaxThroughputStrategy over eager, TorchInductor JIT and AOT (plus their CUDA-graph variants on
a GPU), print what aitune recorded, how each candidate measured, what it selected, and what a
tuned call costs against the untouched model.

Runs on the GPU when there is one, otherwise on the CPU."""

from __future__ import annotations

import argparse
import copy
import time

import torch
from tabulate import tabulate

import aitune.torch as ait
from aitune.torch.backend import (
    TorchEagerBackend,
    TorchEagerBackendConfig,
    TorchInductorAotBackend,
    TorchInductorAotBackendConfig,
    TorchInductorJitBackend,
    TorchInductorJitBackendConfig,
)
from aitune.torch.examples.models import TinyConvNet, example_dataset
from aitune.torch.task.profiling import ProfilingConfig


def _median_call_us(fns: list, x: torch.Tensor, iterations: int) -> list[float]:
    """Median wall time per call of each function, in µs. Calls alternate between the
    functions so clock changes and background load hit all of them alike."""
    times: list[list[int]] = [[] for _ in fns]
    for _ in range(iterations):
        for i, fn in enumerate(fns):
            if x.is_cuda:
                torch.cuda.synchronize()
            start = time.perf_counter_ns()
            fn(x)
            if x.is_cuda:
                torch.cuda.synchronize()
            times[i].append(time.perf_counter_ns() - start)
    return [sorted(t)[len(t) // 2] / 1e3 for t in times]


def candidates(device: str) -> list:
    backends = [TorchEagerBackend(), TorchInductorJitBackend(), TorchInductorAotBackend()]
    if device.startswith("cuda"):
        backends += [
            TorchEagerBackend(TorchEagerBackendConfig(use_cuda_graphs=True)),
            TorchInductorJitBackend(TorchInductorJitBackendConfig(use_cuda_graphs=True)),
            TorchInductorAotBackend(TorchInductorAotBackendConfig(use_cuda_graphs=True)),
        ]
    return backends


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--iterations", type=int, default=500)
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    model = TinyConvNet().eval().to(args.device)
    reference = copy.deepcopy(model)

    strategy = ait.MaxThroughputStrategy(
        candidates(args.device), profiling_config=ProfilingConfig(batch_sizes=[1, 2, 4, 8, 16, 32])
    )
    strategy.enable_find_max_batch_size(False)  # keep the demo short: sweep up to the recorded batch 32
    wrapped = ait.Module(model, "tiny-convnet", strategy=strategy)
    start = time.perf_counter()
    ait.tune(wrapped, example_dataset(), batch_sizes=[1, 32], device=args.device)
    tuning_s = time.perf_counter() - start

    rows = []
    for r in strategy.backend_results:
        rows.append(
            [
                r["backend"],
                "yes" if r.get("success") else "no",
                r.get("selected_batch_size", "-"),
                f"{r['throughput']:.0f}" if "throughput" in r else "-",
                f"{r['latency']:.3f}" if "latency" in r else "-",
                f"{r.get('build_duration_s', 0):.1f}",
                r.get("error", r.get("skipped", ""))[:60],
            ]
        )
    print()
    if rows:
        print(
            tabulate(
                rows,
                headers=["backend", "ok", "batch", "samples/s", "latency ms", "build s", "note"],
                tablefmt="fancy_grid",
            )
        )
    else:  # the results store answered: nothing was built or measured in this run
        print(
            "No candidate was measured in this run: ait.tune reused the result an earlier run stored "
            "(docs/reference/tuning.md#reusing-results). AITUNE_REUSE_TUNING_RESULTS=0 tunes afresh."
        )

    x = torch.randn(4, 3, 32, 32, device=args.device)
    with torch.no_grad():
        expected = reference(x)
        actual = wrapped(x)
        max_abs = (actual - expected).abs().max().item()
        _median_call_us([reference, wrapped], x, 20)  # warm-up
        eager_us, tuned_us = _median_call_us([reference, wrapped], x, args.iterations)

    graph, backend = wrapped.tuned_module.backends[0]
    print(f"\nselected for graph {graph.name}: {backend.describe()}  (tuning took {tuning_s:.1f} s)")
    print(
        f"RESULT module=tiny-convnet graph={graph.name} backend={backend.describe()} device={args.device} "
        f"max_abs_diff_vs_eager={max_abs:.3g} median_call_us eager={eager_us:.1f} tuned={tuned_us:.1f} "
        f"tuning_s={tuning_s:.1f}"
    )
    return 0 if max_abs < 1e-3 else 1


if __name__ == "__main__":
    raise SystemExit(main())
