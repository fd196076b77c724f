"""docs/reference/dispatch.md / issue 3 target: an MLP at batch 1 served through a tuned CUDA-graph module
(TorchEagerBackend(use_cuda_graphs=True)), called from Python, against a bare
torch.cuda.CUDAGraph replay of the same model — pipelined (many calls, one sync) and single-call
(sync after each). Prints one JSON object."""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import time

import torch

import aitune.torch as ait
from aitune._native import _C
from aitune.torch.backend import TorchEagerBackend, TorchEagerBackendConfig
from aitune.torch.config import config


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256)).eval()


def per_call_us(cases: dict, iterations: int, pipelined: bool, rounds: int = 20) -> dict[str, float]:
    """Median µs per call for every case. The cases are measured in interleaved rounds (each round
    runs every case for iterations / rounds calls) so clock and power-state drift during the run
    hits all of them alike; one case measured after another had moved by several µs between
    sessions."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    chunk = max(1, iterations // rounds)
    for _ in range(rounds):
        for name, fn in cases.items():
            torch.cuda.synchronize()
            if pipelined:
                start = time.perf_counter_ns()
                for _ in range(chunk):
                    fn()
                torch.cuda.synchronize()
                samples[name].append((time.perf_counter_ns() - start) / chunk)
            else:
                for _ in range(chunk):
                    start = time.perf_counter_ns()
                    fn()
                    torch.cuda.synchronize()
                    samples[name].append(time.perf_counter_ns() - start)
    return {name: statistics.median(values) / 1e3 for name, values in samples.items()}


def device_profile(fn, calls: int = 200) -> dict:
    """GPU-side view of `calls` calls (torch.profiler/CUPTI): device activities per call, their
    total device time per call, and the most frequent names. Says whether a path's extra cost is
    host work or extra device work (more kernels or copies in the captured graph)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    device = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    names: dict[str, int] = {}
    for e in device:
        names[e.name[:60]] = names.get(e.name[:60], 0) + 1
    host_ops: dict[str, int] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CPU and e.name.startswith(("aten::", "cuda")):
            host_ops[e.name] = host_ops.get(e.name, 0) + 1
    return {
        "device_events_per_call": round(len(device) / calls, 2),
        "device_us_per_call": round(sum(e.time_range.elapsed_us() for e in device) / calls, 2),
        "device_names": dict(sorted(names.items(), key=lambda kv: -kv[1])[:6]),
        "host_ops_per_call": {k: round(v / calls, 2) for k, v in sorted(host_ops.items(), key=lambda kv: -kv[1])[:8]},
    }


def tuned(model: torch.nn.Module, clone: bool) -> torch.nn.Module:
    config.cuda_graph_clone_outputs = clone
    backend = TorchEagerBackend(TorchEagerBackendConfig(use_cuda_graphs=True))
    strategy = ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)
    wrapped = ait.Module(model, f"mlp-clone-{clone}", strategy=strategy)
    ait.tune(wrapped, [torch.randn(256)], batch_sizes=[1], device="cuda:0")
    return wrapped


def runner_with_copies_apart(flat_call, clone: bool):
    """A native runner over the same flat call that launches its input and output copies apart
    from the graph (AITUNE_CUDA_GRAPH_COPY_NODES=0 is read when a runner is made). Made directly,
    not through ait.tune: tuning re-activates earlier modules, which would remake their runners
    under whatever the variable says then."""
    os.environ["AITUNE_CUDA_GRAPH_COPY_NODES"] = "0"
    try:
        return _C.CudaGraphRunner(flat_call, cache_size=8, clone_outputs=clone)
    finally:
        os.environ.pop("AITUNE_CUDA_GRAPH_COPY_NODES", None)


def bare_graph_cases(base: torch.nn.Module, x: torch.Tensor) -> dict:
    """Bare replay: static input, capture once, replay (outputs not cloned); and its variants."""
    static_x = x.clone()
    graph_model = copy.deepcopy(base)
    stream = torch.cuda.Stream()
    with torch.no_grad():
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            graph_model(static_x)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = graph_model(static_x)

    def bare_replay():
        graph.replay()
        return static_y

    def bare_replay_clone():  # torch's own clone of the static output, for scale
        graph.replay()
        return static_y.clone()

    def kernel_copy_replay():  # the input copied by an elementwise kernel instead of cudaMemcpyAsync:
        torch.mul(x, 1.0, out=static_x)  # says whether a kernel copy has lower device latency (single-call rows)
        graph.replay()
        return static_y

    def copy_replay():
        static_x.copy_(x)
        graph.replay()
        return static_y

    return {
        "bare_replay": bare_replay,
        "bare_replay_clone": bare_replay_clone,
        "copy_replay": copy_replay,
        "kernel_copy_replay": kernel_copy_replay,
    }


def overheads(cases: dict, iterations: int) -> dict:
    """Per-call microseconds of every case, pipelined and single, and each tuned case's overhead
    over the bare replay."""
    result = {}
    for mode in ("pipelined", "single"):
        for name, us in per_call_us(cases, iterations, mode == "pipelined").items():
            result[f"{mode}_{name}_us"] = round(us, 2)
        result[f"{mode}_overhead_no_clone_us"] = round(
            result[f"{mode}_tuned_no_clone_us"] - result[f"{mode}_bare_replay_us"], 2
        )
        result[f"{mode}_overhead_clone_us"] = round(
            result[f"{mode}_tuned_clone_us"] - result[f"{mode}_bare_replay_us"], 2
        )
        for kind in ("no_clone", "clone"):  # every call re-points the in-graph copies
            result[f"{mode}_overhead_{kind}_fresh_tensors_us"] = round(
                result[f"{mode}_tuned_{kind}_fresh_tensors_us"] - result[f"{mode}_bare_replay_us"], 2
            )
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=4000)
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.manual_seed(0)
    base = mlp().cuda()
    x = torch.randn(1, 256, device="cuda")

    bare = bare_graph_cases(base, x)

    # The runner reads config.cuda_graph_clone_outputs when a backend (re)activates, so the
    # no-clone module is tuned last and the setting stays off while measuring; both are checked.
    with_clone = tuned(copy.deepcopy(base), clone=True)
    no_clone = tuned(copy.deepcopy(base), clone=False)
    eager = copy.deepcopy(base)
    no_clone_dispatch = no_clone.tuned_module.dispatcher
    serving = no_clone.tuned_module.backends[0][1].cuda_graphs.serving  # the shared runner's Python adapter
    native_runner = serving.runner
    clone_runner = with_clone.tuned_module.backends[0][1].cuda_graphs.serving.runner
    apart_clone = runner_with_copies_apart(serving._flat_call, clone=True)
    apart_no_clone = runner_with_copies_apart(serving._flat_call, clone=False)
    # Fresh tensors every call: inputs rotate among three buffers and the last three outputs stay
    # alive, so each call re-points the in-graph copies (a repeated x lets the runner skip that).
    xs = [torch.randn(1, 256, device="cuda") for _ in range(3)]
    kept: list = [None, None, None]
    turn = [0]

    def fresh(fn):
        def call():
            i = turn[0] = (turn[0] + 1) % 3
            kept[i] = fn(xs[i])

        return call

    assert with_clone.tuned_module.backends[0][1].cuda_graphs.serving.runner.clone_outputs
    assert not native_runner.clone_outputs
    with torch.no_grad():
        assert torch.allclose(with_clone(x), eager(x), atol=1e-5)
        assert torch.allclose(no_clone(x), eager(x), atol=1e-5)
        assert torch.allclose(apart_clone.run([x])[0], eager(x), atol=1e-5)
        assert torch.allclose(apart_no_clone.run([x])[0], eager(x), atol=1e-5)
        cases = {
            **bare,
            "tuned_no_clone": lambda: no_clone(x),
            "tuned_clone": lambda: with_clone(x),
            "tuned_no_clone_fresh_tensors": fresh(no_clone),
            "tuned_clone_fresh_tensors": fresh(with_clone),
            # The native dispatcher called directly (no nn.Module.__call__, proxy or router):
            # splits the overhead between the Python module call and the C++ path.
            "dispatcher_no_clone": lambda: no_clone_dispatch(x),
            # The native CudaGraphRunner alone (key, mutex, copy-in, replay), called from Python.
            "runner_no_clone": lambda: native_runner.run([x]),
            "runner_clone": lambda: clone_runner.run([x]),
            # The same runners with the copies launched apart from the graph (as before).
            "runner_no_clone_copies_apart": lambda: apart_no_clone.run([x]),
            "runner_clone_copies_apart": lambda: apart_clone.run([x]),
            "runner_clone_fresh_tensors": fresh(lambda t: clone_runner.run([t])),
            "runner_clone_copies_apart_fresh_tensors": fresh(lambda t: apart_clone.run([t])),
            "eager": lambda: eager(x),
        }
        for fn in cases.values():
            for _ in range(100):
                fn()
        result = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
        result.update(overheads(cases, args.iterations))
        for name in (
            "bare_replay",
            "copy_replay",
            "runner_no_clone",
            "tuned_clone",
            "tuned_clone_fresh_tensors",
            "runner_clone_copies_apart",
        ):
            try:
                result[f"profile_{name}"] = device_profile(cases[name])
            except Exception as e:  # noqa: BLE001 - the profile is a diagnosis, not the benchmark
                result[f"profile_{name}"] = f"{type(e).__name__}: {e}"
        # Queued calls with rotating inputs, outputs kept: each kept output must be its input's.
        check = fresh(with_clone)
        for _ in range(30):
            check()
        torch.cuda.synchronize()
        result["fresh_tensors_outputs_match"] = all(torch.allclose(kept[i], eager(xs[i]), atol=1e-5) for i in range(3))
    # Whether the dispatcher returns the single output itself or calls the Python rebuild.
    result["native_rebuild_in_python"] = serving.plan().rebuild is not None
    stats = with_clone.tuned_module.backends[0][1].cuda_graphs.stats()
    result["cuda_graph_stats"] = stats
    # Which modules really copied inside the graph (in + out with cloning, in only without).
    result["in_graph_copies"] = {
        "clone": with_clone.tuned_module.backends[0][1].cuda_graphs.stats().get("in_graph_copies"),
        "no_clone": no_clone.tuned_module.backends[0][1].cuda_graphs.stats().get("in_graph_copies"),
        "runner_clone_copies_apart": dict(apart_clone.stats()).get("in_graph_copies"),
        "runner_no_clone_copies_apart": dict(apart_no_clone.stats()).get("in_graph_copies"),
    }
    print(json.dumps(result))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
