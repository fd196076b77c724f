"""What a user who passes NO options gets from aitune, side by side with torch.compile.

For each model (zoo.build: random weights, nothing downloaded) these rows are measured on one fixed
input: `eager`; the torch.compile settings a user could type: `compile` (default mode),
`reduce-overhead` (Inductor's CUDA graphs), `reduce-overhead+freezing` (the same with
`torch._inductor.config.freezing = True`) and `max-autotune` (a compile longer than
--compile-limit-s, 10 minutes by default, is reported as not run); `ait_defaults`
(`ait.tune(ait.Module(model), dataset)`: no strategy, no tolerance, no config) and
`ait_defaults_warm` (the same in a second process on the first one's aitune and torch caches:
what a user's next run costs); `min_latency` and `max_throughput` (the same with only that
strategy, given --strategy-budget-s as `budget_s=` where the strategy takes one); `aot_freezing` and
`aot_freezing_warm` (opt-in, not in the default rows: FirstWins over Inductor AOT with `freezing` and
CUDA graphs alone, cold and then in a second process on the first one's caches; whether an AOT build,
which a second process loads instead of compiling, could lead the defaults: issue 22's warm target).
Batch-1 models get
ait.tune's default batch sizes; a `_bN` model gets `batch_sizes=[N]`, the batch the user serves.
Columns: latency (CUDA events around each call, synchronised after each: median of 200 after 20
warm-up) and pipelined (200 calls back to back, one sync: wall time per call, median of 5 rounds),
each with its ratio to the best torch reference in that column; setup time (first two compiled
calls, or the whole ait.tune call), what aitune picked, the telemetry's per-graph outcome, and
max |output - eager output|. Under the table, per model: ait_defaults <= 1.00x the best reference
in both columns, and min_latency <= 0.85x in the pipelined one (issue 22's targets).

    python benchmarks/defaults.py --out defaults.json --markdown defaults.md
    python benchmarks/defaults.py --device cpu --models mlp --rows eager compile ait_defaults  # smoke test

Caches. Every row gets a fresh aitune cache (AITUNE_CACHE_DIR in a temp dir; inherited AITUNE_*
variables are dropped, since they are options), except a warm row, which reuses its cold row's
(ait_defaults_warm ait_defaults', aot_freezing_warm aot_freezing's). Each model gets one fresh
Inductor/Triton cache shared by its rows (the aot_freezing pair has one of its own), and
`ait_defaults` runs first, so its tuning time is measured with cold torch caches (the target:
ResNet-50 default tuning <= 60 s cold, <= 10 s warm) while the torch.compile rows find a warm one,
as a user's second run would (column `torch cache`; `n/a` for eager, which compiles nothing).
`--cold-all` gives every row its own fresh torch cache.

Why one process per row: torch.compile and aitune keep process-wide state (Dynamo caches, CUDA
graph pools, loaded kernels, allocator), so rows in one process would measure each other; and a
native crash or a hang must cost one row (recorded with the child's stderr tail), not the run.
The parent imports nothing heavy and rewrites --out / --markdown after every row.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

MODELS = ["resnet50", "mlp", "bert", "llama_step", "vit_b_16", "resnet50_b32"]
# Run order: ait_defaults first (cold torch caches), then ait_defaults_warm (a second process with
# the same aitune and torch caches: what a user's next run costs), then the references.
ROWS = [
    "ait_defaults",
    "ait_defaults_warm",
    "eager",
    "compile",
    "reduce-overhead",
    "reduce-overhead+freezing",
    "max-autotune",
    "min_latency",
    "max_throughput",
    "aot_freezing",
    "aot_freezing_warm",
]
# Rows run only when asked for (--rows): experiments, not the defaults' comparison.
OPT_IN_ROWS = ("aot_freezing", "aot_freezing_warm")
# A warm row: a second process on the aitune and torch caches of the cold row it names.
WARM_OF = {"ait_defaults_warm": "ait_defaults", "aot_freezing_warm": "aot_freezing"}
# The torch.compile settings a user could type (eager is shown, but is not a compile setting).
COMPILE_REFERENCES = ("compile", "reduce-overhead", "reduce-overhead+freezing", "max-autotune")
REFERENCES = ("eager", *COMPILE_REFERENCES)
AITUNE_ROWS = ("ait_defaults", "ait_defaults_warm", "min_latency", "max_throughput", *OPT_IN_ROWS)
DISPLAY = [*REFERENCES, *AITUNE_ROWS]
# A compile that takes longer than this is reported as not run (issue 22: "skip with a note").
COMPILE_LIMIT_S = 600.0


# -- child: one row ---------------------------------------------------------------------------
def measure(row: str, name: str, device: str, result: dict[str, Any], strategy_budget_s: float | None = None) -> None:
    """Fills `result` as it goes, so what was measured before an exception survives it."""
    import copy

    import torch
    from torch.utils._pytree import tree_leaves

    import zoo  # benchmarks/ is sys.path[0]

    cpu = device == "cpu"
    result.update(torch=torch.__version__, gpu=None if cpu else torch.cuda.get_device_name(device))
    torch.manual_seed(0)  # same weights and inputs in every row's process
    model, make_inputs, batch, dtype = zoo.build(name)
    dtype = torch.float32 if cpu else dtype
    model = model.eval().to(device).to(dtype)
    args = zoo.to(make_inputs(batch), dtype, device)
    result.update(batch=batch, dtype=str(dtype).removeprefix("torch."))

    def tensors(out: Any) -> list[torch.Tensor]:  # HF ModelOutputs are pytree dicts
        return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]

    def sync() -> None:
        if not cpu:
            torch.cuda.synchronize(device)

    with torch.no_grad():  # the reference, before compiling or tuning touches the model
        reference = [t.clone() for t in tensors(copy.deepcopy(model)(*args))]
    start = time.perf_counter()
    if row == "eager":
        fn = model
    elif row in COMPILE_REFERENCES:
        if row == "reduce-overhead+freezing":
            # How a user turns freezing on: Inductor's global switch (Dynamo reads it while tracing).
            torch._inductor.config.freezing = True
        mode = {"compile": None, "max-autotune": "max-autotune"}.get(row, "reduce-overhead")
        fn = torch.compile(model, mode=mode) if mode else torch.compile(model)
        with torch.no_grad():
            fn(*args)
            fn(*args)
        sync()
        result["setup_s"] = round(time.perf_counter() - start, 2)
    else:
        import aitune.torch as ait

        args4 = zoo.to(make_inputs(4), dtype, device)
        dataset = [tuple(a[i] for a in args4) for i in range(4)]  # unbatched; ait.tune stacks them
        strategy = {"min_latency": ait.MinLatencyStrategy, "max_throughput": ait.MaxThroughputStrategy}.get(row)
        budget_s = strategy_budget_s
        if row in OPT_IN_ROWS:
            from aitune.torch.backend import TorchInductorAotBackend, TorchInductorAotBackendConfig

            aot = TorchInductorAotBackend(TorchInductorAotBackendConfig(use_cuda_graphs=not cpu, freezing=True))
            fn = wrapped = ait.Module(model, strategy=ait.FirstWinsStrategy(backends=[aot]))
        elif strategy is not None and budget_s is not None and "budget_s" in inspect.signature(strategy).parameters:
            result["budget_s"] = budget_s  # the strategy's own tuning budget (docs/reference/strategies.md)
            fn = wrapped = ait.Module(model, strategy=strategy(budget_s=budget_s))
        else:
            fn = wrapped = ait.Module(model, strategy=strategy()) if strategy else ait.Module(model)
        kwargs: dict[str, Any] = {"batch_sizes": [batch]} if re.search(r"_b\d+$", name) else {}
        start = time.perf_counter()
        ait.tune(wrapped, dataset, device=device, **kwargs)
        result["setup_s"] = round(time.perf_counter() - start, 2)
        result["state"] = wrapped.state.name
        picks = [b.describe() for _, b in wrapped.tuned_module.backends] if wrapped.tuned_module else []
        result["picks"] = picks
        result["pick"] = (
            (picks[0] + (f" (+{len(picks) - 1} graphs)" if len(picks) > 1 else ""))
            if picks
            else "passthrough (original module)"
        )
    with torch.no_grad():
        result["latency_ms"] = zoo.cuda_median_ms(lambda: fn(*args)) if not cpu else host_median_ms(lambda: fn(*args))
        result["pipelined_ms"] = pipelined_ms(lambda: fn(*args), sync)
        out = tensors(fn(*args))
    sync()
    if len(out) != len(reference) or any(a.shape != b.shape for a, b in zip(out, reference)):
        result["max_abs_diff"] = (
            f"outputs differ: {[tuple(t.shape) for t in out]} vs eager's {[tuple(t.shape) for t in reference]}"
        )
    else:
        diffs = [(a.float() - b.float()).abs().max() for a, b in zip(out, reference)]
        result["max_abs_diff"] = float(torch.stack(diffs).max()) if diffs else 0.0


def pipelined_ms(fn: Any, sync: Any, calls: int = 200, rounds: int = 5) -> float:
    """Calls issued back to back with one sync at the end (how a serving loop runs): wall time
    per call, the median of `rounds` rounds after a warm-up round."""
    times = []
    for i in range(rounds + 1):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        if i:
            times.append((time.perf_counter() - start) * 1e3 / calls)
    return sorted(times)[len(times) // 2]


def host_median_ms(fn: Any, iterations: int = 200) -> float:
    """CPU rows: wall-clock median (no CUDA events)."""
    for _ in range(20):
        fn()
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[iterations // 2]


def child(args: argparse.Namespace) -> None:
    import logging

    from row_diagnostics import FxCacheLog, profile_tables  # benchmarks/ is sys.path[0]

    log_path = Path(args.out).with_name("aitune.log")
    if args.row in AITUNE_ROWS:
        # aitune's INFO log into a file: marked as aitune's own handler, so setup_logging() adds
        # no console handler, and the console (our captured stderr) keeps only real errors.
        handler = logging.FileHandler(log_path)
        handler.setFormatter(logging.Formatter("%(asctime)s - %(levelname)s - %(message)s"))
        handler._aitune = True  # type: ignore[attr-defined]
        logger = logging.getLogger("aitune")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    cache_log = FxCacheLog() if args.row in AITUNE_ROWS else None
    result: dict[str, Any] = {}
    # DEFAULTS_PROFILE=1: a warm row runs under cProfile, and its JSON gets the top functions by
    # cumulative and own time (where a second process's tuning seconds go, issue 22's warm target).
    profiler = None
    if os.environ.get("DEFAULTS_PROFILE") == "1" and args.row in WARM_OF:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        measure(args.row, args.model, args.device, result, args.strategy_budget_s)
    except Exception as e:  # noqa: BLE001 - becomes this row's error entry
        result["error"] = f"{type(e).__name__}: {e}"[:1500]
        result["traceback_tail"] = traceback.format_exc()[-2500:]
    if profiler is not None:
        profiler.disable()
        result["profile"] = profile_tables(profiler)
    if cache_log is not None:
        # Why a warm row compiled again: the FX-graph cache's keys, hits, misses and bypasses, and the
        # key details (the inputs of each hash: diff a cold and a warm row's to find what changed).
        result["fx_cache_log"] = cache_log.records
    if args.row in AITUNE_ROWS:
        result.update(telemetry_outcome())
        if log_path.exists():
            lines = log_path.read_text(errors="replace").splitlines()
            result["tuning_log_tail"] = lines[-15:]
            # Where the tuning time went: every aitune line with its time stamp, and Dynamo's own
            # per-phase compile times (torch._dynamo.utils.compile_times).
            result["tuning_log"] = [line[:400] for line in lines if " - " in line][:400]
            try:
                import torch._dynamo.utils as dynamo_utils

                result["compile_times"] = str(dynamo_utils.compile_times(repr="str", aggregate=True))[:6000]
                # Whether torch's caches served the compiles (a warm row should hit them).
                result["compile_cache_counters"] = {
                    group: {k: v for k, v in dynamo_utils.counters[group].items() if "cache" in k}
                    for group in ("inductor", "aot_autograd")
                }
            except Exception as e:  # noqa: BLE001 - a diagnostic only
                result["compile_times"] = f"unavailable: {e}"
            result["log_warnings"] = [line[:300] for line in lines if " - WARNING - " in line][:20]
    Path(args.out).write_text(json.dumps(result, indent=1, default=str))


def telemetry_outcome() -> dict[str, Any]:
    """Per-graph outcome from the telemetry JSON ("tuned" / "kept_eager" / "reused"; "n/a"
    where this aitune predates the field)."""
    try:
        from aitune.torch.config import config

        data = json.loads(Path(config.tuning_data_output_path).read_text())
    except (ImportError, OSError, ValueError) as e:
        return {"outcome": f"no telemetry ({type(e).__name__})"}
    graphs = [g for m in data.get("modules") or [] for g in m.get("graphs") or []]
    outcomes = [str(g.get("outcome", "n/a")) for g in graphs]
    return {
        "outcome": "n/a" if all(o == "n/a" for o in outcomes) and outcomes else ",".join(outcomes) or "no graphs",
        "graphs": [
            {k: g.get(k) for k in ("display_name", "outcome", "selected_backend", "speedup", "duration_s")}
            for g in graphs
        ],
    }


# -- parent: rows in child processes ----------------------------------------------------------
def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: a child outlives a parent killed by a timeout unless the kernel signals it."""
    import ctypes

    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def run_row(
    row: str,
    model: str,
    device: str,
    inductor_dir: Path,
    timeout_s: float,
    aitune_cache: Path | None = None,
    strategy_budget_s: float | None = None,
) -> dict[str, Any]:
    """One row in a child process. `aitune_cache`: an aitune cache folder shared with another row
    (the warm row reuses the cold row's results store); by default the row gets a fresh one."""
    work = Path(tempfile.mkdtemp(prefix=f"aitune-defaults-{model}-{row}-"))
    out = work / "row.json"
    cache = aitune_cache or work / "aitune-cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AITUNE_")}  # no options: no AITUNE_*
    env.update(
        PYTHONUNBUFFERED="1",
        AITUNE_CRASH_REPORT="1",
        AITUNE_CACHE_DIR=str(cache),
        AITUNE_TUNING_DATA_PATH=str(work / "tuning_data.json"),
        TORCHINDUCTOR_CACHE_DIR=str(inductor_dir),
        TRITON_CACHE_DIR=str(inductor_dir / "triton"),
    )
    cmd = [sys.executable, __file__, "--row", row, "--model", model, "--device", device, "--out", str(out)]
    if strategy_budget_s is not None:
        cmd += ["--strategy-budget-s", str(strategy_budget_s)]
    # Own process group: a timeout kills the child's compile workers too.
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    error = None
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        error = f"timed out after {timeout_s:.0f} s"
    finally:  # also on SIGTERM (SystemExit): no child, and no temp dir, outlives its row
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            _, stderr = proc.communicate()
        try:
            result = json.loads(out.read_text())
        except (OSError, ValueError):
            result = {}
        log = work / "aitune.log"
        if "tuning_log" not in result and log.exists():  # a killed row still says where its time went
            result["tuning_log"] = [line[:400] for line in log.read_text(errors="replace").splitlines()][-60:]
        shutil.rmtree(work, ignore_errors=True)
    if error or proc.returncode or not result:
        result.setdefault("error", error or f"child exited with {proc.returncode}")
        result["stderr_tail"] = stderr[-2500:]
    return result


def git_commit() -> dict[str, Any]:
    """The commit measured: AITUNE_BENCH_COMMIT when the caller knows it (a copy of the tree on
    another machine may carry a stale .git), else git's HEAD."""
    if os.environ.get("AITUNE_BENCH_COMMIT"):
        return {"aitune_commit": os.environ["AITUNE_BENCH_COMMIT"], "aitune_dirty": None}
    repo = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return {"aitune_commit": None}
    commit = head.stdout.strip() or None
    return {"aitune_commit": commit, "aitune_dirty": bool(dirty.stdout.strip()) if commit else None}


# -- report ---------------------------------------------------------------------------------
COLUMNS = {"latency_ms": "latency", "pipelined_ms": "pipelined"}


def _best_ref(rows: list[dict[str, Any]], column: str = "latency_ms") -> dict[str, Any] | None:
    """The fastest torch.compile setting in `column` (eager is not a compile setting, but a
    compile slower than eager is beaten by it, so eager counts too)."""
    refs = [r for r in rows if r["row"] in REFERENCES and isinstance(r.get(column), float)]
    return min(refs, key=lambda r: r[column]) if refs else None


def _ratio_cell(value: Any, best: dict[str, Any] | None, column: str) -> str:
    if not isinstance(value, float):
        return "-"
    text = f"{value:.4f}"
    return f"{text} ({value / best[column]:.2f}×)" if best else text


def _verdicts(mine: list[dict[str, Any]]) -> list[str]:
    """ait_defaults <= 1.00x the best reference in both columns; min_latency <= 0.85x pipelined."""
    parts = []
    for row, column, target in (
        ("ait_defaults", "latency_ms", 1.0),
        ("ait_defaults", "pipelined_ms", 1.0),
        ("min_latency", "pipelined_ms", 0.85),
    ):
        best = _best_ref(mine, column)
        r = next((x for x in mine if x["row"] == row and isinstance(x.get(column), float)), None)
        label = f"{row} {COLUMNS[column]} ≤ {target:.2f}× best reference"
        if r is None or best is None:
            parts.append(f"{label}: n/a")
            continue
        ratio = r[column] / best[column]
        verdict = "yes" if round(ratio, 2) <= target else "no"  # as printed: 1.004× reads 1.00×
        parts.append(f"{label}: {verdict} ({ratio:.2f}×, best {best['row']} {best[column]:.4f} ms)")
    return parts


def markdown(rows: list[dict[str, Any]]) -> str:
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = [
        "| model | batch | dtype | row | latency ms (vs best ref) | pipelined ms (vs best ref) | setup s | torch cache "
        "| pick | outcome | max abs diff |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = sorted((r for r in rows if r["model"] == model), key=lambda r: DISPLAY.index(r["row"]))
        known = next((r for r in mine if "batch" in r), {})
        best = {column: _best_ref(mine, column) for column in COLUMNS}
        for r in mine:
            note = r.get("skipped") or (f"ERROR: {r['error'][:120]}" if r.get("error") else r.get("pick", ""))
            outcome = r.get("outcome", "") + (f" [{r['state']}]" if r.get("state") else "")
            diff = r.get("max_abs_diff")
            values = (
                model,
                known.get("batch", ""),
                known.get("dtype", ""),
                r["row"],
                _ratio_cell(r.get("latency_ms"), best["latency_ms"], "latency_ms"),
                _ratio_cell(r.get("pipelined_ms"), best["pipelined_ms"], "pipelined_ms"),
                f"{r['setup_s']:.1f}" if isinstance(r.get("setup_s"), float) else "-",
                r.get("torch_cache", "-"),
                note,
                outcome,
                f"{diff:.2e}" if isinstance(diff, float) else diff or "-",
            )
            lines.append("| " + " | ".join(cell(v) for v in values) + " |")
        verdicts.append(f"- **{model}**: " + "; ".join(_verdicts(mine)))
    return "\n".join(lines) + "\n\n" + "\n".join(verdicts) + "\n"


def write(args: argparse.Namespace, header: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    for r in rows:  # machine facts come from the children: the parent does not import torch
        for key in ("gpu", "torch"):
            if r.get(key) and not header.get(key):
                header[key] = r[key]
    if args.out:
        Path(args.out).write_text(json.dumps({**header, "rows": rows}, indent=2, default=str))
    if args.markdown:
        Path(args.markdown).write_text(markdown(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=MODELS, help="zoo.build names; `_bN` sets batch N")
    parser.add_argument(
        "--rows",
        nargs="+",
        choices=ROWS,
        default=[r for r in ROWS if r not in OPT_IN_ROWS],
        help="opt-in: aot_freezing*",
    )
    parser.add_argument("--device", default="cuda:0", help="cuda:N, or cpu for a smoke test")
    parser.add_argument("--row-timeout", type=float, default=420.0, help="seconds per row's child process")
    parser.add_argument("--budget-s", type=float, help="start no new row after this much wall time")
    parser.add_argument("--cold-all", action="store_true", help="a fresh Inductor cache for every row")
    parser.add_argument("--out", help="JSON, rewritten after every row")
    parser.add_argument("--markdown", help="the table, rewritten after every row")
    parser.add_argument(
        "--strategy-budget-s",
        type=float,
        default=600.0,
        help="tuning budget of the min_latency / max_throughput rows (budget_s=, where the strategy has it)",
    )
    parser.add_argument(
        "--compile-limit-s",
        type=float,
        default=COMPILE_LIMIT_S,
        help="max-autotune rows: a compile longer than this is reported as not run",
    )
    parser.add_argument("--row", choices=ROWS, help=argparse.SUPPRESS)  # child mode
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:
        return child(args)
    # SIGTERM (gpu_run.sh's timeout) as SystemExit, so run_row's finally kills the child's group.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    start = time.monotonic()
    header = {
        "device": args.device,
        "gpu": None,
        "torch": None,
        **git_commit(),
        "cold_all": args.cold_all,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    rows: list[dict[str, Any]] = []
    for model in args.models:
        model_cache = Path(tempfile.mkdtemp(prefix=f"aitune-defaults-inductor-{model}-"))
        try:
            run_model(args, model, model_cache, start, header, rows)
        finally:
            shutil.rmtree(model_cache, ignore_errors=True)
        print(markdown([r for r in rows if r["model"] == model]), flush=True)
    print(markdown(rows), flush=True)


def run_model(
    args: argparse.Namespace,
    model: str,
    model_cache: Path,
    start: float,
    header: dict[str, Any],
    rows: list[dict[str, Any]],
) -> None:
    """The model's rows in ROWS order (ait_defaults first: cold torch caches), one child each.
    ait_defaults_warm is a second process on ait_defaults' aitune cache and the model's torch cache."""
    cache_used = False
    for row in (r for r in ROWS if r in args.rows):
        entry: dict[str, Any] = {"model": model, "row": row}
        if row in ("reduce-overhead", "reduce-overhead+freezing", "max-autotune") and args.device == "cpu":
            entry["skipped"] = "CUDA only"
        elif args.budget_s is not None and time.monotonic() - start > args.budget_s:
            entry["skipped"] = "not run (budget)"
        elif row in WARM_OF and not any(r["model"] == model and r["row"] == WARM_OF[row] for r in rows):
            entry["skipped"] = f"needs the {WARM_OF[row]} row first"
        else:
            # --cold-all: a fresh cache inside the model's, so the model's cleanup removes it too.
            cache = Path(tempfile.mkdtemp(dir=model_cache)) if args.cold_all else model_cache
            if row in OPT_IN_ROWS:  # a torch cache of their own: no hits on the other rows' compiles
                cache = model_cache / "aot"
                entry["torch_cache"] = "warm" if row in WARM_OF else "cold"
            else:
                entry["torch_cache"] = (
                    "n/a" if row == "eager" else "cold" if args.cold_all or not cache_used else "warm"
                )
                cache_used |= row != "eager"
            timeout = args.row_timeout
            if row == "max-autotune":
                timeout = args.compile_limit_s + 120  # the compile plus the measurement
            pair = WARM_OF.get(row, row)  # a cold row and its warm row share one aitune cache
            shared = model_cache / f"aitune-cache-{pair}" if pair in WARM_OF.values() else None
            entry.update(run_row(row, model, args.device, cache, timeout, shared, args.strategy_budget_s))
            if row == "max-autotune" and str(entry.get("error", "")).startswith("timed out"):
                entry["skipped"] = f"compile > {args.compile_limit_s:.0f} s: not run"
        rows.append(entry)
        brief = {
            k: entry.get(k) for k in ("latency_ms", "pipelined_ms", "setup_s", "pick", "outcome", "error", "skipped")
        }
        print(f"[{time.monotonic() - start:6.0f} s] {model} {row}: {json.dumps(brief, default=str)}", flush=True)
        write(args, header, rows)


if __name__ == "__main__":
    main()
