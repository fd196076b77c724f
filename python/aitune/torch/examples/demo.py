"""``python -m aitune.torch.examples.demo``: tune the built-in example model end to end and
show what aitune recorded, what it selected and what a tuned call costs.

Runs on the GPU when there is one, otherwise on the CPU."""

from __future__ import annotations

import argparse
import time

import torch

import aitune.torch as ait
from aitune.torch.backend import TorchEagerBackend
from aitune.torch.examples.models import TinyConvNet, example_dataset


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--iterations", type=int, default=500)
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    model = TinyConvNet().eval().to(args.device)
    reference = TinyConvNet().eval().to(args.device)
    reference.load_state_dict(model.state_dict())

    wrapped = ait.Module(model, "tiny-convnet", strategy=ait.OneBackendStrategy(TorchEagerBackend()))
    ait.tune(wrapped, example_dataset(), batch_sizes=[1, 4], device=args.device)

    x = torch.randn(4, 3, 32, 32, device=args.device)
    with torch.no_grad():
        expected = reference(x)
        actual = wrapped(x)
        max_abs = (actual - expected).abs().max().item()
        _median_call_us([reference, wrapped], x, 20)  # warm-up
        eager_us, tuned_us = _median_call_us([reference, wrapped], x, args.iterations)

    graph, backend = wrapped.tuned_module.backends[0]
    print()
    print(f"Recorded graphs: {len(wrapped.graph_specs)}")
    print(graph.describe())
    print()
    print(
        f"RESULT module=tiny-convnet graph={graph.name} backend={backend.describe()} device={args.device} "
        f"max_abs_diff_vs_eager={max_abs:.3g} median_call_us eager={eager_us:.1f} tuned={tuned_us:.1f} "
        f"dispatch_overhead_us={tuned_us - eager_us:+.1f}"
    )
    return 0 if max_abs == 0.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
