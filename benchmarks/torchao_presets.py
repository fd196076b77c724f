"""TorchAO presets against the best fp16 pick (docs/reference/backends.md#torchao-torchaobackend).

Per model (benchmarks/zoo.py's, random weights, fp16, batch 1 or the `_bN` in its name): one row for aitune's best fp16
pick (MinLatencyStrategy over zoo.candidates(): eager, Inductor JIT and AOT, all with CUDA graphs)
and one row per preset (OneBackendStrategy over TorchAOBackend(preset, use_cuda_graphs=True),
numeric check on), each in its own child process. A row has the median CUDA-event latency, the
speedup over the best fp16 pick, the rel_l2 error against fp16 eager next to the preset's bound
(its precision class's max_rel_l2), the numeric check's verdict and the tuning time.

    python benchmarks/torchao_presets.py --models llama_step bert vit_b_16 --out torchao.json --md torchao.md

Budget: every row is a real compile. With --mode max-autotune-no-cudagraphs (the default: Inductor's
GEMM search, which the fused int8/fp8 dequantize-matmuls need) a row takes about 1-2 minutes on an
H200, with --mode default about 20-40 s. --row-timeout-s bounds one row, --budget-s the whole run:
rows that would start after it are written as skipped, so a run always ends in time and keeps every
row it measured (the JSON is rewritten after each row).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo  # noqa: E402 - benchmarks/zoo.py: the models and the fp16 candidates

PRESETS = ("int8wo", "int8dq", "fp8wo", "fp8dq")
# Variants beyond AITune's preset names, each a torchao config of its own (--presets takes them too).
# fp8dq_row: fp8 with one scale per activation row and per weight output channel (torchao's PerRow),
# where the fp8dq preset keeps one per tensor (AITune's): a row's scale needs no reduction over the
# whole activation before the GEMM, and the H100's rowwise-scaled fp8 GEMM takes it as it is.
CONFIG_VARIANTS = ("fp8dq_row",)
# Variants run in bf16 (model and float inputs): torchao's PerRow fp8 asserts bf16 weights (seen on the
# H100, 2026-12-07). Their rel_l2 is still taken against the fp16 eager output.
BF16_VARIANTS = ("fp8dq_row",)


def variant_config(variant: str) -> Any:
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow

    if variant == "fp8dq_row":
        return Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())
    raise ValueError(f"unknown variant {variant!r}; expected one of {PRESETS + CONFIG_VARIANTS}")


# bert_b32: BERT-base at batch 32 (4096 tokens a call): compute-bound, where fp8 and int8 tensor
# cores can pay; at batch 1 (128 tokens) its kernels' launches, not its weight reads, set the time.
MODELS = ("llama_step", "llama7b_step", "bert", "bert_b32", "vit_b_16", "mlp")


def build(name: str, device: str) -> tuple[torch.nn.Module, tuple, int]:
    """(model, inputs, batch): batch 1 unless the name ends `_bN` (zoo.build's rule); fp16 on CUDA;
    fp32 on the CPU, where the script only checks that its flow runs (`--device cpu --models mlp
    --mode default`). llama7b_step is the zoo's decode step at Llama-7B sizes (4096 wide, FFN
    11008): its weights (0.4 GB in fp16) take longer to read than its kernels take to launch,
    unlike the zoo's 1024-wide step."""
    torch.manual_seed(0)
    if name == "llama7b_step":
        model = zoo.LlamaStyleStep(dim=4096, heads=32, ffn=11008)
        args, batch = (torch.randn(1, 1, 4096), torch.randn(1, 32, 255, 128), torch.randn(1, 32, 255, 128)), 1
    else:
        model, make_inputs, batch, _ = zoo.build(name)
        args = make_inputs(batch)
    dtype = torch.float16 if device == "cuda" else torch.float32
    return model.eval().to(device).to(dtype), zoo.to(args, dtype, device), batch


def median_ms(fn: Any, device: str) -> float:
    if device == "cuda":
        return zoo.cuda_median_ms(fn)
    times = []
    for i in range(25):
        start = time.perf_counter()
        fn()
        if i >= 5:
            times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def first_tensor(output: Any) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    if hasattr(output, "last_hidden_state"):
        return output.last_hidden_state
    values = output.values() if isinstance(output, dict) else output
    return next(first_tensor(v) for v in values)


def rel_l2(candidate: Any, reference: Any) -> float:
    c, r = first_tensor(candidate).float(), first_tensor(reference).float()
    return float((c - r).norm() / r.norm())


def measure_row(model_name: str, variant: str, mode: str, device: str, fp16: str = "min-latency") -> dict[str, Any]:
    """One row, in this process. The fp16 row: MinLatencyStrategy over zoo.candidates()
    (`min-latency`), or aitune's default FirstWinsStrategy() (`defaults`: one build, for a row
    that must fit a short device call, e.g. BERT at batch 32)."""
    import aitune.torch as ait
    from aitune.torch.backend import TorchAOBackend, TorchAOBackendConfig, TorchEagerBackend, TorchInductorJitBackend
    from aitune.torch.backend.backend import availability
    from aitune.torch.task.profiling import NumStepsMeasuringStopStrategy, ProfilingConfig
    from aitune.torch.validation import DEFAULT_TOLERANCES

    model, args, batch = build(model_name, device)
    row: dict[str, Any] = {"model": model_name, "variant": variant, "batch": batch}
    with torch.no_grad():
        eager_out = model(*args)
        row["eager_ms"] = median_ms(lambda: model(*args), device)
    if variant in BF16_VARIANTS and device == "cuda":  # torchao's PerRow needs bf16 weights (it asserts so)
        model = model.to(torch.bfloat16)
        args = tuple(a.to(torch.bfloat16) if a.is_floating_point() else a for a in args)
    profiling = ProfilingConfig(batch_sizes=[batch], measurement_stop_strategy=NumStepsMeasuringStopStrategy(50, 10))
    if variant == "fp16" and fp16 == "defaults":
        strategy = ait.FirstWinsStrategy(profiling_config=profiling)
    elif variant == "fp16":
        candidates = zoo.candidates() if device == "cuda" else [TorchEagerBackend(), TorchInductorJitBackend()]
        strategy = ait.MinLatencyStrategy(candidates, profiling_config=profiling)
    else:
        graphs = device == "cuda"
        quantization = (
            {"quantization": variant} if variant in PRESETS else {"quantization_config": variant_config(variant)}
        )
        backend = TorchAOBackend(TorchAOBackendConfig(**quantization, mode=mode, use_cuda_graphs=graphs))
        row["bound_rel_l2"] = DEFAULT_TOLERANCES[backend.precision_class].max_rel_l2
        available, reason = availability(backend, torch.device(device))
        if not available:
            row["error"] = f"unavailable: {reason}"
            return row
        strategy = ait.OneBackendStrategy(backend).enable_performance_validation(False)
    strategy.enable_find_max_batch_size(False)
    wrapped = ait.Module(copy.deepcopy(model), f"{model_name}-{variant}", strategy=strategy)
    start = time.perf_counter()
    try:
        target = "cuda:0" if device == "cuda" else device
        # The defaults keep a module eager when nothing beats it (on the CPU check, the mlp): a row too.
        keep_eager = variant == "fp16" and fp16 == "defaults"
        dataset = [tuple(a[0] for a in args)]
        ait.tune(wrapped, dataset, batch_sizes=[batch], device=target, ignore_failing_modules=keep_eager)
    except Exception as e:  # noqa: BLE001 - e.g. a numeric check outside the bound: the row says so
        row["tuning_s"] = round(time.perf_counter() - start, 1)
        row["error"] = f"{type(e).__name__}: {e}"[:1500]
        return row
    row["tuning_s"] = round(time.perf_counter() - start, 1)
    results = strategy.backend_results
    tuned = wrapped.tuned_module
    row["pick"] = (
        tuned.backends[0][1].describe() if tuned is not None else "kept eager (the defaults: nothing was faster)"
    )
    with torch.no_grad():
        row["ms"] = median_ms(lambda: wrapped(*args), device)
        row["rel_l2_vs_fp16_eager"] = rel_l2(wrapped(*args), eager_out)
    correctness = next((r["correctness"] for r in reversed(results) if r.get("correctness")), None)
    if correctness:
        row["numeric_check"] = {k: correctness.get(k) for k in ("precision_class", "passed", "rel_l2_error")}
    if "bound_rel_l2" in row:
        row["within_bound"] = row["rel_l2_vs_fp16_eager"] <= row["bound_rel_l2"]
    return row


def run_child(model_name: str, variant: str, args: argparse.Namespace, timeout_s: float) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [sys.executable, __file__, "--row", f"{model_name}:{variant}", "--mode", args.mode]
        cmd += ["--device", args.device, "--fp16", args.fp16, "--out", out.name]
        try:
            proc = subprocess.run(
                cmd,
                # Fresh tunings: a stored result from an earlier run would hide the tuning time.
                env=dict(os.environ, AITUNE_CRASH_REPORT="1", AITUNE_REUSE_TUNING_RESULTS="0"),
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout_s,
                preexec_fn=zoo._die_with_parent,
            )
        except subprocess.TimeoutExpired:
            return {"model": model_name, "variant": variant, "error": f"row timed out after {timeout_s:.0f} s"}
        try:
            return json.load(open(out.name))
        except (OSError, ValueError):
            return {
                "model": model_name,
                "variant": variant,
                "error": f"child exited with {proc.returncode}",
                "stderr_tail": proc.stderr[-2000:],
            }


def add_speedups(rows: list[dict[str, Any]]) -> None:
    best = {r["model"]: r["ms"] for r in rows if r["variant"] == "fp16" and "ms" in r}
    for r in rows:
        if "ms" in r and r["model"] in best:
            r["speedup_vs_best_fp16"] = round(best[r["model"]] / r["ms"], 3)


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| model | variant | ms | vs best fp16 | rel_l2 vs fp16 eager | bound | numeric check | tuning s | pick / error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        check = r.get("numeric_check") or {}
        verdict = f"{check.get('precision_class')} {'passed' if check.get('passed') else 'failed'}" if check else ""
        lines.append(
            "| {model} | {variant} | {ms} | {speedup} | {err} | {bound} | {check} | {tuning} | {pick} |".format(
                model=r["model"],
                variant=r["variant"],
                ms=f"{r['ms']:.4f}" if "ms" in r else "",
                speedup=f"{r['speedup_vs_best_fp16']:.2f}×" if "speedup_vs_best_fp16" in r else "",
                err=f"{r['rel_l2_vs_fp16_eager']:.3g}" if "rel_l2_vs_fp16_eager" in r else "",
                bound=f"≤ {r['bound_rel_l2']:g}" if "bound_rel_l2" in r else "",
                check=verdict,
                tuning=r.get("tuning_s", ""),
                pick=str(r.get("pick", r.get("error", "")))[:90].replace("|", "/"),
            )
        )
    return "\n".join(lines) + "\n"


def write(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    add_speedups(rows)
    meta = {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "torch": torch.__version__}
    try:
        import importlib.metadata

        meta["torchao"] = importlib.metadata.version("torchao")
    except Exception:  # noqa: BLE001 - reported as missing
        meta["torchao"] = None
    if args.out:
        Path(args.out).write_text(json.dumps({**meta, "mode": args.mode, "rows": rows}, indent=2, default=str))
    if args.md:
        header = (
            f"TorchAO presets, {meta['gpu']}, torch {meta['torch']}, torchao {meta['torchao']}, mode={args.mode}\n\n"
        )
        Path(args.md).write_text(header + markdown(rows))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="+", default=["llama_step", "bert", "vit_b_16"], choices=MODELS)
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=PRESETS + CONFIG_VARIANTS)
    parser.add_argument("--mode", default="max-autotune-no-cudagraphs", help="torch.compile mode of the presets")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: a check of the flow only")
    parser.add_argument(
        "--fp16",
        choices=["min-latency", "defaults"],
        default="min-latency",
        help="the fp16 row: MinLatencyStrategy over eager, Inductor JIT and AOT, or aitune's defaults (one build)",
    )
    parser.add_argument("--row-timeout-s", type=float, default=240.0)
    parser.add_argument("--budget-s", type=float, default=480.0, help="no row starts after this")
    parser.add_argument("--out", help="JSON, rewritten after every row")
    parser.add_argument("--md", help="markdown table, rewritten after every row")
    parser.add_argument("--row", help=argparse.SUPPRESS)  # model:variant, measured in this process
    args = parser.parse_args()
    if args.row:
        import logging

        logging.getLogger("aitune").setLevel(logging.WARNING)
        model_name, variant = args.row.split(":")
        try:
            row = measure_row(model_name, variant, args.mode, args.device, args.fp16)
        except Exception as e:  # noqa: BLE001 - the row records it
            row = {"model": model_name, "variant": variant, "error": f"{type(e).__name__}: {e}"[:2000]}
        Path(args.out).write_text(json.dumps(row, default=str))
        return
    start = time.monotonic()
    rows: list[dict[str, Any]] = []
    for model_name in args.models:
        for variant in ("fp16", *args.presets):
            left = args.budget_s - (time.monotonic() - start)
            if left <= 0:
                rows.append(
                    {"model": model_name, "variant": variant, "error": f"skipped: budget of {args.budget_s:g} s spent"}
                )
            else:
                rows.append(run_child(model_name, variant, args, min(args.row_timeout_s, left + 30)))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "stderr_tail"}), flush=True)
            write(args, rows)
    write(args, rows)
    print(markdown(rows))


if __name__ == "__main__":
    main()
