"""Per-call cost of serving a tuned module (docs/reference/dispatch.md#per-call-pipeline budget: Python entry ≤ 20 µs
median for ≤ 16 tensor leaves).

Measures, on one device:
  * dispatcher_us  — the native dispatcher alone (bind, flatten, key, lookup, dtype check)
                     around a runner that returns its input: dispatcher(x) minus runner(x);
  * eager_us       — an untouched copy of the model called directly;
  * tuned_us       — the same model wrapped and tuned with TorchEagerBackend;
  * overhead_us    — tuned_us - eager_us (router + dispatcher + eager backend's no_grad).
Prints one JSON object; `--out` also writes it to a file.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time

import torch

import aitune.torch as ait
from aitune._native import _C
from aitune.torch.backend import TorchEagerBackend


class MLP(torch.nn.Module):
    def __init__(self, width: int = 256) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class FourInputs(torch.nn.Module):
    def forward(self, x, y, mask, pos):
        return x


def _envelope_rules(names: str, shape: list[int]) -> list:
    """One soft-range rule per input. Builds the tuples of the releases before the dispatch core
    (cpp/torch/dispatch) too, so one run can measure this commit beside the previous one."""
    if not hasattr(_C, "InputRule"):
        return [(i, ["float32"], repr(n), shape, shape) for i, n in enumerate(names)]
    return [
        _C.InputRule(
            leaf=i,
            dtypes=["float32"],
            path=repr(n),
            tensor_name=f"input_{n}",
            range=_C.ShapeRange.ENVELOPE,
            min_shape=shape,
            max_shape=shape,
        )
        for i, n in enumerate(names)
    ]


def _samples_ns(fn, arg_sets, iterations: int, sync: bool) -> list[int]:
    samples = []
    for i in range(iterations):
        args = arg_sets[i % len(arg_sets)]
        if sync:
            torch.cuda.synchronize()
        start = time.perf_counter_ns()
        fn(*args)
        if sync:
            torch.cuda.synchronize()
        samples.append(time.perf_counter_ns() - start)
    return samples


def _median_us(fn, arg_sets, iterations: int, sync: bool) -> float:
    return statistics.median(_samples_ns(fn, arg_sets, iterations, sync)) / 1e3


def _interleaved_median_us(fns: dict, arg_sets, iterations: int, sync: bool, rounds: int = 20) -> dict[str, float]:
    """Cases measured in alternating rounds, so drift in clocks or host load during the run
    hits each alike (one after the other, the eager baseline moved by tens of µs between runs)."""
    samples: dict[str, list[int]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name] += _samples_ns(fn, arg_sets, max(1, iterations // rounds), sync)
    return {name: statistics.median(values) / 1e3 for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--iterations", type=int, default=20000)
    parser.add_argument("--out")
    args = parser.parse_args()
    device = torch.device(args.device)
    sync = device.type == "cuda"
    torch.manual_seed(0)

    # 1. The dispatcher alone, 4 tensor inputs, trivial runner.
    four = FourInputs()
    wrapped_four = ait.Module(four, "four", strategy=ait.OneBackendStrategy(TorchEagerBackend()))
    inputs = [torch.randn(1, 8, device=device) for _ in range(4)]
    with torch.no_grad():
        wrapped_four(*inputs)
    wrapped_four.tune(device=device)
    graph = wrapped_four.graph_specs[0]
    identity = lambda x, y, mask, pos: x  # noqa: E731 - the cheapest possible runner
    dispatcher = _C.Dispatcher(
        _C.Signature(graph.forward_params), True, -1, "four", lambda *a, **k: None, lambda a, b: a == b, lambda *a: None
    )
    dispatcher.add_graph(graph.key, "0", identity, [], _envelope_rules("xyzw", [1, 8]))
    with torch.no_grad():
        runner_us = _median_us(identity, [inputs], args.iterations, sync=False)
        dispatch_us = _median_us(dispatcher, [inputs], args.iterations, sync=False)

    # 2. A small MLP at batch 1, eager vs tuned (eager backend), same weights.
    model = MLP().eval().to(device)
    reference = copy.deepcopy(model)
    wrapped = ait.Module(model, "mlp", strategy=ait.OneBackendStrategy(TorchEagerBackend()))
    ait.tune(wrapped, [torch.randn(256) for _ in range(4)], device=str(device))
    xs = [(torch.randn(1, 256, device=device),) for _ in range(8)]
    with torch.no_grad():
        for _ in range(200):
            reference(*xs[0])
            wrapped(*xs[0])
        medians = _interleaved_median_us({"eager": reference, "tuned": wrapped}, xs, args.iterations // 4, sync)
        eager_us, tuned_us = medians["eager"], medians["tuned"]

    result = {
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if sync else None,
        "torch": torch.__version__,
        "dispatcher_4_inputs_us": round(dispatch_us - runner_us, 3),
        "trivial_runner_us": round(runner_us, 3),
        "mlp_b1_eager_us": round(eager_us, 2),
        "mlp_b1_tuned_eager_backend_us": round(tuned_us, 2),
        "mlp_b1_overhead_us": round(tuned_us - eager_us, 2),
    }
    print(json.dumps(result))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
