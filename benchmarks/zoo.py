"""Model zoo (random weights, nothing downloaded): each model measured as eager,
torch.compile default, torch.compile(mode="reduce-overhead") and aitune's pick
(MinLatencyStrategy for batch 1, MaxThroughputStrategy otherwise). Median latency by CUDA
events, throughput, and compile/tuning wall time. Prints a table and writes JSON.

    python benchmarks/zoo.py --models mlp resnet50 --out results.json

Each model runs in its own child process, so a crash in one leaves the others' rows.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import re
import time
from typing import Any, Callable

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
from aitune.torch.task.profiling import NumStepsMeasuringStopStrategy, ProfilingConfig
from wide_tolerance import wide_tolerances  # benchmarks/, on the path when run as a script


class LlamaStyleStep(torch.nn.Module):
    """One decoder layer's decode step (RMSNorm, attention over a fixed KV cache, SwiGLU)."""

    def __init__(self, dim: int = 1024, heads: int = 16, ffn: int = 2816) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.RMSNorm(dim)
        self.norm2 = torch.nn.RMSNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.out = torch.nn.Linear(dim, dim, bias=False)
        self.gate = torch.nn.Linear(dim, ffn, bias=False)
        self.up = torch.nn.Linear(dim, ffn, bias=False)
        self.down = torch.nn.Linear(ffn, dim, bias=False)

    def forward(self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q = q.view(b, t, self.heads, -1).transpose(1, 2)
        k = torch.cat([k_cache, k.view(b, t, self.heads, -1).transpose(1, 2)], dim=2)
        v = torch.cat([v_cache, v.view(b, t, self.heads, -1).transpose(1, 2)], dim=2)
        attn = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + self.out(attn.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


def build(name: str) -> tuple[torch.nn.Module, Callable[[int], tuple], int, torch.dtype]:
    """(model, make_inputs(batch) -> args, batch size, dtype). A name ending `_bN` (resnet50_b64,
    bert_b32) is the same model at batch N; without it the batch is 1. `_fp32` before it
    (resnet50_fp32, bert_fp32_b32) runs the model in float32 instead of its zoo dtype."""
    match = re.fullmatch(r"(.+)_b(\d+)", name)
    base, batch = (match[1], int(match[2])) if match else (name, 1)
    if base.endswith("_fp32"):
        model, make_inputs, _, _ = build(base.removesuffix("_fp32"))
        return model, make_inputs, batch, torch.float32
    if base == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
        return model, lambda b: (torch.randn(b, 256),), batch, torch.float32
    if base == "resnet50":
        import torchvision

        return torchvision.models.resnet50(), lambda b: (torch.randn(b, 3, 224, 224),), batch, torch.float16
    if base == "vit_b_16":
        import torchvision

        return torchvision.models.vit_b_16(), lambda b: (torch.randn(b, 3, 224, 224),), batch, torch.float32
    if base == "bert":
        from transformers import BertConfig, BertModel

        model = BertModel(BertConfig(), add_pooling_layer=False)
        return (
            model,
            lambda b: (torch.randint(0, 30000, (b, 128)), torch.ones(b, 128, dtype=torch.long)),
            batch,
            torch.float16,
        )
    if base == "llama_step":
        return (
            LlamaStyleStep(),
            lambda b: (torch.randn(b, 1, 1024), torch.randn(b, 16, 255, 64), torch.randn(b, 16, 255, 64)),
            batch,
            torch.float16,
        )
    raise ValueError(f"unknown model {name}")


def cuda_median_ms(fn: Callable[[], Any], iterations: int = 200) -> float:
    for _ in range(20):
        fn()
    times = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def to(args: tuple, dtype: torch.dtype, device: str = "cuda") -> tuple:
    """Float tensors to `dtype`, every tensor to `device`."""
    return tuple(a.to(device).to(dtype) if a.is_floating_point() else a.to(device) for a in args)


AOT_CUDA_GRAPHS = True  # --aot-cuda-graphs
WIDE_TOLERANCE = False  # --tolerance wide (wide_tolerance.py)


def candidates() -> list:
    return [
        TorchEagerBackend(TorchEagerBackendConfig(use_cuda_graphs=True)),
        TorchInductorJitBackend(TorchInductorJitBackendConfig(use_cuda_graphs=True)),
        TorchInductorAotBackend(TorchInductorAotBackendConfig(use_cuda_graphs=AOT_CUDA_GRAPHS)),
    ]


def _die_with_parent() -> None:
    """A child outlives a parent killed by a timeout unless the kernel signals it (Linux)."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_isolated(name: str, argv: list[str]) -> dict[str, Any]:
    """One model in a child process: a crash in native code (SIGSEGV) becomes this model's error
    row, with the child's native crash report (AITUNE_CRASH_REPORT=1), instead of ending the run."""
    import os
    import subprocess
    import sys
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        proc = subprocess.run(
            [sys.executable, __file__, "--models", name, "--out", out.name, "--in-process", *argv],
            env=dict(os.environ, AITUNE_CRASH_REPORT="1"),
            capture_output=True,
            text=True,
            errors="replace",
            preexec_fn=_die_with_parent,
        )
        try:
            return json.load(open(out.name))["rows"][0]
        except (OSError, ValueError, KeyError, IndexError):
            return {"model": name, "error": f"child exited with {proc.returncode}", "stderr_tail": proc.stderr[-2500:]}


def run_model(name: str, strategies: list[str]) -> dict[str, Any]:
    torch.manual_seed(0)
    model, make_inputs, batch, dtype = build(name)
    model = model.eval().cuda().to(dtype)
    args = to(make_inputs(batch), dtype)
    row: dict[str, Any] = {"model": name, "batch": batch, "dtype": str(dtype).removeprefix("torch.")}
    with torch.no_grad():
        row["eager_ms"] = cuda_median_ms(lambda: model(*args))
        for mode in ("default", "reduce-overhead"):
            torch._dynamo.reset()
            compiled = torch.compile(copy.deepcopy(model), mode=mode)
            start = time.perf_counter()
            compiled(*args)
            compiled(*args)
            row[f"compile_{mode}_s"] = round(time.perf_counter() - start, 1)
            row[f"compile_{mode}_ms"] = cuda_median_ms(lambda c=compiled: c(*args))
            del compiled
        torch._dynamo.reset()
    best_ref = min(row["eager_ms"], row["compile_default_ms"], row["compile_reduce-overhead_ms"])
    row["candidates"] = {}
    for kind in strategies:
        strategy_cls = {"min_latency": ait.MinLatencyStrategy, "max_throughput": ait.MaxThroughputStrategy}[kind]
        strategy = strategy_cls(
            candidates(),
            profiling_config=ProfilingConfig(
                batch_sizes=[batch], measurement_stop_strategy=NumStepsMeasuringStopStrategy(50, 10)
            ),
        )
        strategy.enable_find_max_batch_size(False)
        if WIDE_TOLERANCE:
            strategy.set_tolerance(wide_tolerances())
        wrapped = ait.Module(copy.deepcopy(model), f"{name}-{kind}", strategy=strategy)
        dataset = [tuple(a[0] for a in args)]  # one unbatched sample; ait.tune batches it
        start = time.perf_counter()
        ait.tune(wrapped, dataset, batch_sizes=[batch], device="cuda:0")
        row[f"aitune_{kind}_tuning_s"] = round(time.perf_counter() - start, 1)
        with torch.no_grad():
            row[f"aitune_{kind}_ms"] = cuda_median_ms(lambda w=wrapped: w(*args))
        selected = wrapped.tuned_module.backends[0][1] if wrapped.tuned_module else None
        row[f"aitune_{kind}_pick"] = selected.describe() if selected else "passthrough"
        row[f"aitune_{kind}_vs_best_ref"] = round(row[f"aitune_{kind}_ms"] / best_ref, 3)
        row["candidates"][kind] = strategy.backend_results
        del wrapped
        torch._dynamo.reset()
    # The first strategy's numbers also under the plain keys the table prints.
    first = strategies[0]
    row["aitune_ms"], row["aitune_pick"] = row[f"aitune_{first}_ms"], row[f"aitune_{first}_pick"]
    row["aitune_tuning_s"], row["aitune_vs_best_ref"] = (
        row[f"aitune_{first}_tuning_s"],
        row[f"aitune_{first}_vs_best_ref"],
    )
    row["throughput_per_s"] = round(batch / (row["aitune_ms"] / 1e3), 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="+", default=["mlp", "resnet50", "bert"])
    parser.add_argument(
        "--strategies",
        nargs="+",
        choices=["min_latency", "max_throughput"],
        default=["min_latency", "max_throughput"],
        help="aitune's pick with each (issue 3: both); the first fills the table's aitune columns",
    )
    parser.add_argument(
        "--aot-cuda-graphs",
        choices=["on", "off"],
        default="on",
        help="serve the Inductor-AOT candidate through CUDA graphs",
    )
    parser.add_argument(
        "--tolerance",
        choices=["default", "wide"],
        default="default",
        help="numeric check: the default tolerances, or wide_tolerance.py's",
    )
    parser.add_argument(
        "--in-process", action="store_true", help="measure in this process (default: one child process per model)"
    )
    parser.add_argument("--out")
    args = parser.parse_args()
    global AOT_CUDA_GRAPHS, WIDE_TOLERANCE
    AOT_CUDA_GRAPHS = args.aot_cuda_graphs == "on"
    WIDE_TOLERANCE = args.tolerance == "wide"
    logging.getLogger("aitune").setLevel(logging.WARNING)
    rows = []
    for name in args.models:
        if not args.in_process:
            rows.append(
                run_isolated(
                    name,
                    [
                        "--strategies",
                        *args.strategies,
                        "--aot-cuda-graphs",
                        args.aot_cuda_graphs,
                        "--tolerance",
                        args.tolerance,
                    ],
                )
            )
        else:
            try:
                rows.append(run_model(name, args.strategies))
            except Exception as e:  # noqa: BLE001 - one model's failure must not hide the others
                rows.append({"model": name, "error": f"{type(e).__name__}: {e}"})
        rows[-1]["aot_cuda_graphs"], rows[-1]["tolerance"] = AOT_CUDA_GRAPHS, args.tolerance
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "candidates"}), flush=True)
        if args.out:  # after every model, so a run cut short keeps what it measured
            write(args.out, rows)
    table = []
    for r in rows:  # one line per model and strategy
        for kind in args.strategies:
            table.append(
                [
                    r["model"],
                    r.get("batch"),
                    r.get("dtype"),
                    r.get("eager_ms"),
                    r.get("compile_default_ms"),
                    r.get("compile_reduce-overhead_ms"),
                    kind,
                    r.get(f"aitune_{kind}_ms"),
                    r.get(f"aitune_{kind}_vs_best_ref"),
                    r.get(f"aitune_{kind}_tuning_s"),
                    str(r.get(f"aitune_{kind}_pick", r.get("error", "")))[:70],
                ]
            )
    print(
        tabulate(
            table,
            headers=[
                "model",
                "batch",
                "dtype",
                "eager ms",
                "compile ms",
                "reduce-overhead ms",
                "strategy",
                "aitune ms",
                "vs best",
                "tuning s",
                "aitune pick",
            ],
            tablefmt="github",
            floatfmt=".3f",
        )
    )


def write(path: str, rows: list[dict[str, Any]]) -> None:
    with open(path, "w") as f:
        json.dump(
            {
                "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                "torch": torch.__version__,
                "rows": rows,
            },
            f,
            indent=2,
            default=str,
        )


if __name__ == "__main__":
    main()
