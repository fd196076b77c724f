"""Serving on one GPU (issue 26 items 1 and 3, docs/serving.md "Measured"): does the Dynamo worker's
dynamic batcher turn many concurrent single-item requests into tuned-batch calls, at what latency,
and what does the HTTP -> Dynamo -> worker path add over a direct call of the tuned module?

    python benchmarks/serving_gpu.py --out serving_gpu.json --markdown serving_gpu.md   # ~7 min, one GPU
    python benchmarks/serving_gpu.py --device cpu --quick --out /tmp/s.json           # smoke test, < 2 min

For each model of serving_models.py (a BERT-base-class embedder and a ResNet-50-class classifier,
fp16 on CUDA; on the CPU every process uses one torch thread, OMP_NUM_THREADS=1, since they share
the cores): ait.tune with `--batch-sizes` samples (FirstWinsStrategy, aitune's default, without
the max-batch search, so the tuned sizes are exactly those; on the CPU the eager backend, since the
defaults keep a model this small eager and an untuned module cannot be saved), ait.save, then the
direct reference: the tuned module called in a loop in this process at each tuned batch size (p50
of `module(x)` on device tensors, synchronized; and of the worker's own batch call, host items ->
device -> host rows). Then one frontend and three `python -m aitune.dynamo serve` launchers on the
device, loaded at once: `<kind>-off` (one worker, max_wait_ms=0: batching off), `<kind>-on` (one
worker, `--max-wait-ms`), and `<kind>-off<N>` and `<kind>-on<N>` for each N of `--worker-counts` (N
workers on the same device, batching off and on: one worker process runs out of host time before the
GPU is busy); beside them two echo
workers (serving_echo.py: no model, the path's floor; the plain one serves a callable as a user's
function is served, the inline one answers on the event loop with nothing per request: Dynamo's own
cost). Closed-loop clients (serving_load.py) send
single-item requests: one row per client count for off and for on, two rows (off, on) per worker
count at `--two-worker-clients`, and the echo rows at 1 and 64 clients; once all are ready, each launcher
answers two requests per worker (one-time costs out of the rows), then each row warms up for
`--warmup-s` and measures for `--seconds`.

Columns: requests/s; p50 and p99 latency (ms); model busy % (the worker's model thread inside its
batch calls / wall time, from the worker's SIGUSR1 `Stats:` line: a CUDA call ends with the copy of
its outputs, which waits for the device, so this is device time plus the host work around it, summed
over workers); GPU util % (mean of `nvidia-smi --query-gpu=utilization.gpu` sampled every 100 ms
over the window: the share of time a kernel ran; none on the CPU); worker CPU ms/request (the
worker processes' user + system CPU time over the window, all threads, per request served: the
host cost that caps one process's requests/s); the padded batch sizes the
workers ran (calls per size, from the same Stats lines); the direct call's p50 at the size run most.
JSON (--out) and markdown (--markdown) are rewritten after every row, so a timeout keeps the rows
done. The issue's targets are summarised per model: on/off requests/s at 64 clients (>= 5x), p99/p50
with batching on at 64 clients (<= 3x), and served p50 - direct p50 at 1 client (<= 1 ms)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import serving_models  # noqa: E402
from serving_launch import (  # noqa: E402
    first_requests,
    free_port,
    launched,
    process_cpu_s,
    serve_command,
    serve_env,
    stats_delta,
    wait_ready,
    engine_pids,
    worker_pids,
    worker_stats,
)
from serving_load import run_load  # noqa: E402

# The no-model workers (serving_echo.py): the plain echo (a callable, as a user's function is
# served) and the inline echo (answered on the event loop: Dynamo's own cost per request).
ECHO_MODES = ("echo", "echo_inline")
READY_TIMEOUT_S = 420.0  # JIT backends compile again when a worker loads the checkpoint


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--models", default=",".join(serving_models.KINDS), help="embedding,image or one of them")
    parser.add_argument("--clients", type=ints, default=None, help="default 1,8,64,256 (--quick: 1,8)")
    parser.add_argument(
        "--two-worker-clients",
        type=int,
        default=None,
        help="clients of the several-worker rows, default 64 (--quick: 8)",
    )
    parser.add_argument(
        "--worker-counts", type=ints, default=None, help="several workers on the device, default 2,4 (--quick: 2)"
    )
    parser.add_argument(
        "--front-counts",
        type=ints,
        default=None,
        help="one engine process fed by k workers (serve --fronts k), default 2,3 (--quick: 2); 0: none",
    )
    parser.add_argument("--batch-sizes", type=ints, default=None, help="tuned sizes, default 1,2,4,8,16,32")
    parser.add_argument("--max-wait-ms", type=float, default=2.0, help="the batching-on rows' wait")
    parser.add_argument("--seconds", type=float, default=None, help="measured per row, default 3 (--quick: 1)")
    parser.add_argument("--warmup-s", type=float, default=None, help="per row, default 1.5 (--quick: 0.5)")
    parser.add_argument("--size", choices=["full", "tiny"], default=None, help="default full on CUDA, tiny on CPU")
    parser.add_argument("--dtype", default=None, help="default float16 on CUDA, float32 on the CPU")
    parser.add_argument("--image-size", type=int, default=None, help="image side, default 224 (tiny: 32)")
    parser.add_argument(
        "--image-payload",
        choices=["raw", "json"],
        default="raw",
        help="an image request's pixels: raw bytes in a data URL (default) or a JSON list of ints (~50 requests/s)",
    )
    parser.add_argument(
        "--encoding-format",
        choices=["float", "base64"],
        default=None,
        help="the requests' encoding_format (the response's vectors; OpenAI's Python client sends base64 unless "
        "told otherwise); default: not sent, so float",
    )
    parser.add_argument("--strategy", choices=["defaults", "eager"], default=None, help="default: defaults on CUDA")
    parser.add_argument(
        "--dynamo-log",
        default="warn",
        help="DYN_LOG of the frontend and workers (Dynamo's default, info, logs "
        "seven lines per request: gigabytes at GPU rates)",
    )
    parser.add_argument("--quick", action="store_true", help="a smaller grid: clients 1,8, batch sizes 1,2,4,8")
    parser.add_argument("--no-serving", action="store_true", help="tune and the direct reference only (no Dynamo)")
    parser.add_argument("--work-dir", type=Path, default=None, help="checkpoints and logs (default: a temp folder)")
    parser.add_argument("--out", type=Path, default=None, help="JSON, rewritten after every row")
    parser.add_argument("--markdown", type=Path, default=None, help="the tables, rewritten after every row")
    args = parser.parse_args(argv)
    cuda = args.device.startswith("cuda")
    quick = args.quick
    args.clients = args.clients or ([1, 8] if quick else [1, 8, 64, 256])
    args.two_worker_clients = args.two_worker_clients or (8 if quick else 64)
    args.worker_counts = args.worker_counts or ([2] if quick else [2, 4])
    if any(n < 2 for n in args.worker_counts):
        parser.error(
            f"--worker-counts: each count must be at least 2 (one worker is the `on` row), got {args.worker_counts}"
        )
    args.front_counts = [k for k in (args.front_counts or ([2] if quick else [2, 3])) if k > 0]
    args.batch_sizes = args.batch_sizes or ([1, 2, 4, 8] if quick else [1, 2, 4, 8, 16, 32])
    args.seconds = args.seconds or (1.0 if quick else 3.0)
    args.warmup_s = args.warmup_s if args.warmup_s is not None else (0.5 if quick else 1.5)
    args.size = args.size or ("full" if cuda else "tiny")
    args.dtype = args.dtype or ("float16" if cuda else "float32")
    args.image_size = args.image_size or (224 if args.size == "full" else 32)
    args.strategy = args.strategy or ("defaults" if cuda else "eager")
    args.models = [m for m in args.models.split(",") if m]
    unknown = set(args.models) - set(serving_models.KINDS)
    if unknown:
        parser.error(f"unknown --models {sorted(unknown)}; known: {', '.join(serving_models.KINDS)}")
    return args


# -- tuning and the direct reference -----------------------------------------------------------
def tune_and_save(kind: str, args: argparse.Namespace, checkpoint: Path):
    """(the tuned ait.Module, what the report says about its tuning)."""
    import aitune.torch as ait
    from aitune.torch import module_registry
    from aitune.torch.backend import TorchEagerBackend

    def strategy(name: str):
        if name == "eager":
            one = ait.OneBackendStrategy(TorchEagerBackend())
            return one.enable_find_max_batch_size(False).enable_performance_validation(False)
        return ait.FirstWinsStrategy().enable_find_max_batch_size(False)

    samples = serving_models.item_samples(kind, max(args.batch_sizes))
    info: dict = {"strategy": args.strategy}
    for name in (args.strategy, "eager"):
        module_registry.clear()
        model = ait.Module(serving_models.FACTORIES[kind]().to(args.device), kind, strategy=strategy(name))
        start = time.perf_counter()
        ait.tune(model, samples, batch_sizes=args.batch_sizes, device=args.device)
        info["tune_s"] = round(info.get("tune_s", 0) + time.perf_counter() - start, 2)
        if model.tuned_module is not None:
            info["picked"] = model.tuned_module.backends[0][1].describe()
            ait.save(model, checkpoint)
            return model, info
        info["note"] = f"the {name} strategy kept the module eager; tuned again with the eager backend to serve it"
    raise RuntimeError(f"{kind}: not even the eager backend tuned")


def _p50_ms(call: Callable[[], object], sync: Callable[[], None], budget_s: float) -> float:
    for _ in range(3):
        call()
    sync()
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < 10 or (len(times) < 200 and time.perf_counter() < deadline):
        start = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - start)
    return round(1000 * statistics.median(times), 3)


def direct_reference(kind: str, tuned, args: argparse.Namespace) -> dict[str, dict]:
    """Per tuned batch size: p50 of the tuned module on device tensors, and of the worker's own
    batch call (ModuleEngine.run_batch: stack the host items, copy in, run, copy the rows out)."""
    import torch

    from aitune.dynamo.module_engine import ModuleEngine

    cuda = args.device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    engine = ModuleEngine(tuned)
    samples = serving_models.item_samples(kind, max(args.batch_sizes))
    key, _ = engine.item(samples[0].tolist(), 0)
    budget = 0.2 if args.quick else 0.5
    reference = {}
    with torch.no_grad():
        for size in args.batch_sizes:
            batch = torch.stack(samples[:size]).to(args.device)
            p50 = _p50_ms(lambda: tuned(batch), sync, budget)  # noqa: B023 - called before the next size
            io_p50 = _p50_ms(lambda: engine.run_batch(key, samples[:size], size), sync, budget)  # noqa: B023
            reference[str(size)] = {
                "p50_ms": p50,
                "with_copies_p50_ms": io_p50,
                "items_per_s": round(size / p50 * 1000),
            }
    return reference


# -- serving -----------------------------------------------------------------------------------
def request_body(kind: str, mode: str, args: argparse.Namespace) -> bytes:
    """One single-item request to the `<kind>-<mode>` workers."""
    payload = args.image_payload if kind == "image" else "json"
    return serving_models.request_body(kind, f"{kind}-{mode}", payload, args.encoding_format)


@contextlib.contextmanager
def serving_session(kind: str, checkpoint: Path, args: argparse.Namespace, work: Path) -> Iterator[dict]:
    """The frontend and the off / on / off<N> / on<N> launchers of one model, all loading at once; yields
    {"port", mode: (log, worker pids)}."""
    port = free_port()
    env = serve_env(
        SERVING_MODELS_SIZE=args.size,
        SERVING_MODELS_DTYPE=args.dtype,
        SERVING_MODELS_IMAGE=str(args.image_size),
        DYN_LOG=args.dynamo_log,
    )
    plan = {
        "off": ([args.device], 0.0, 0),
        "on": ([args.device], args.max_wait_ms, 0),
        **{
            f"{m}{n}": ([args.device] * n, w, 0)
            for n in args.worker_counts
            for m, w in (("off", 0.0), ("on", args.max_wait_ms))
        },
        # One engine process runs the model, k workers (fronts) feed it (docs/serving.md).
        **{
            f"{m}-f{k}": ([args.device], w, k)
            for k in args.front_counts
            for m, w in (("off", 0.0), ("on", args.max_wait_ms))
        },
    }
    with contextlib.ExitStack() as stack:
        launchers = {}
        # The path's floor: workers with no model (serving_echo.py), one process each, pid = its own;
        # echo_inline answers on the event loop with nothing per request (Dynamo's own cost).
        for mode in ECHO_MODES:
            echo = [sys.executable, str(HERE / "serving_echo.py"), "--model-name", f"{kind}-{mode}"]
            echo += ["--component", mode, "--dim", str(serving_models.output_dim(kind))]
            echo += ["--inline"] if mode == "echo_inline" else []
            log = work / f"{kind}-{mode}.log"
            launchers[mode] = (stack.enter_context(launched(echo, env, log)), log, 1)
        for mode, (devices, wait_ms, fronts) in plan.items():
            command = serve_command(
                f"serving_models:make_{kind}",
                checkpoint,
                devices,
                f"{kind}-{mode}",
                http_port=port if mode == "off" else None,  # the one frontend serves them all
                component=mode,
                max_wait_ms=wait_ms,
                fronts=fronts,
            )
            log = work / f"{kind}-{mode}.log"
            launchers[mode] = (stack.enter_context(launched(command, env, log)), log, fronts or len(devices))
        # Unwound first: all launchers get SIGTERM at once, then each is waited for in turn.
        stack.callback(lambda: [p.send_signal(signal.SIGTERM) for p, _, _ in launchers.values() if p.poll() is None])
        started = time.monotonic()
        wait_ready(list(launchers.values()), port, [f"{kind}-{m}" for m in launchers], READY_TIMEOUT_S)
        for mode, (_, _, workers) in launchers.items():  # one-time costs out of the measured rows
            first_requests(port, "/v1/embeddings", request_body(kind, mode, args), count=2 * workers)
        session = {"port": port, "ready_s": round(time.monotonic() - started, 1)}
        for mode, (_, log, workers) in launchers.items():
            pids = worker_pids(log)  # serving_echo.py logs the same line
            if len(pids) != workers:
                raise RuntimeError(f"{log}: expected {workers} worker pids, found {pids}")
            session[mode] = (log, pids, engine_pids(log))
        yield session


class GpuUtilization:
    """nvidia-smi's utilization.gpu of one device sampled every 100 ms; None without nvidia-smi."""

    def __init__(self, device: str) -> None:
        self._process: subprocess.Popen | None = None
        if not device.startswith("cuda"):
            return
        index = int(device.partition(":")[2] or 0)
        visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        target = visible[index] if index < len(visible) else str(index)
        query = ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "100"]
        with contextlib.suppress(OSError):
            self._process = subprocess.Popen(query + ["-i", target], stdout=subprocess.PIPE, text=True)

    def stop(self) -> float | None:
        if self._process is None:
            return None
        self._process.terminate()
        out, _ = self._process.communicate(timeout=10)
        samples = [float(v) for v in out.split() if v.replace(".", "", 1).isdigit()]
        return round(statistics.mean(samples), 1) if samples else None


def measure_row(kind: str, mode: str, clients: int, session: dict, args: argparse.Namespace) -> dict:
    log, pids, engines = session[mode]

    def during(measure_from: float, stop_at: float) -> dict:
        time.sleep(max(0.0, measure_from - time.monotonic()))
        first = worker_stats(log, pids)
        cpu_first = [process_cpu_s(p) for p in pids + engines]  # an engine's CPU counts with its fronts'
        gpu = GpuUtilization(args.device)
        time.sleep(max(0.0, stop_at - time.monotonic()))
        utilization = gpu.stop()
        cpu_second = [process_cpu_s(p) for p in pids + engines]
        second = worker_stats(log, pids)
        cpu = None if None in cpu_first + cpu_second else sum(cpu_second) - sum(cpu_first)
        return {
            "gpu_util_pct": utilization,
            "workers": [stats_delta(first[p], second[p]) for p in pids],
            "worker_cpu_s": cpu,
        }

    body = request_body(kind, mode, args)
    result = run_load(session["port"], "/v1/embeddings", body, clients, args.seconds, args.warmup_s, during)
    window = result.pop("during")
    calls: dict[str, int] = {}
    for worker in window["workers"]:  # the echo worker has no batcher: no batch counters
        for size, n in worker.get("calls_by_size", {}).items():
            calls[size] = calls.get(size, 0) + n
    busy = sum(w.get("model_busy_s", 0.0) / w["wall_s"] for w in window["workers"] if w["wall_s"] > 0)
    items = sum(w.get("items", 0) for w in window["workers"])
    batches = sum(w.get("batches", 0) for w in window["workers"])
    wait_ms = 0.0 if mode.startswith("off") or mode in ECHO_MODES else args.max_wait_ms
    served = sum(w.get("served", 0) for w in window["workers"])
    cpu_s = window["worker_cpu_s"]
    row = {"model": kind, "mode": mode, "workers": len(pids), "engines": len(engines), "max_wait_ms": wait_ms}
    row.update(result)
    row.update(
        model_busy_pct=round(100 * busy, 1),
        gpu_util_pct=window["gpu_util_pct"],
        calls_by_size=dict(sorted(calls.items(), key=lambda kv: int(kv[0]))),
        mean_batch=round(items / batches, 2) if batches else None,
        padding_rows=sum(w.get("padding_rows", 0) for w in window["workers"]),
        inline_calls=sum(w.get("inline_calls", 0) for w in window["workers"]),
        # The worker processes' CPU time per request served in the window (all their threads): the
        # host cost that bounds one process's requests/s, whatever the GPU does.
        worker_cpu_ms_per_request=round(1000 * cpu_s / served, 3) if cpu_s is not None and served else None,
        per_worker=window["workers"],
    )
    return row


# -- the report --------------------------------------------------------------------------------
def summary(kind: str, rows: list[dict], direct: dict, args: argparse.Namespace) -> dict:
    """The issue's targets for one model, on the rows measured so far."""
    mine = {(r["mode"], r["clients"]): r for r in rows if r["model"] == kind}
    many = 64 if 64 in args.clients else max(args.clients)
    out: dict = {"clients_for_ratio": many}
    on, off = mine.get(("on", many)), mine.get(("off", many))
    if on and off and off["requests_per_s"]:
        out["on_over_off_requests_per_s"] = round(on["requests_per_s"] / off["requests_per_s"], 2)
    if on and on["p50_ms"]:
        out["on_p99_over_p50"] = round(on["p99_ms"] / on["p50_ms"], 2)
    for mode in ("off", "on"):
        one = mine.get((mode, 1))
        if one and one["p50_ms"] is not None and "1" in direct:
            out[f"{mode}_1_client_minus_direct_ms"] = round(one["p50_ms"] - direct["1"]["p50_ms"], 3)
    # Several workers on the device (on<N>), or an engine process fed by k fronts (on-f<k>), batching
    # on, beside one worker with batching off and beside the same deployment with batching off (the
    # like-for-like ratio).
    deployments = [(f"on{n}", f"off{n}") for n in args.worker_counts]
    deployments += [(f"on-f{k}", f"off-f{k}") for k in args.front_counts]
    for on_mode, off_mode in deployments:
        several = mine.get((on_mode, args.two_worker_clients))
        for base in ("off", off_mode):
            there = mine.get((base, args.two_worker_clients))
            if several and there and there["requests_per_s"]:
                ratio = round(several["requests_per_s"] / there["requests_per_s"], 2)
                out[f"{on_mode}_over_{base}_requests_per_s"] = ratio
        if several and several["p50_ms"]:
            out[f"{on_mode}_p99_over_p50"] = round(several["p99_ms"] / several["p50_ms"], 2)
    # The floor: no batching or model removes what the path itself takes per request.
    for mode in ECHO_MODES:
        if mine.get((mode, 1)):
            out[f"{mode}_1_client_p50_ms"] = mine[(mode, 1)]["p50_ms"]
        if mine.get((mode, many)):
            out[f"{mode}_requests_per_s"] = mine[(mode, many)]["requests_per_s"]
            out[f"{mode}_worker_cpu_ms_per_request"] = mine[(mode, many)].get("worker_cpu_ms_per_request")
    return out


def markdown(report: dict) -> str:
    lines = [
        f"Serving on {report['device_name']} ({report['device']}), torch {report['torch']}; see serving_gpu.py.",
        "",
    ]
    for kind, model in report["models"].items():
        lines += [f"### {kind}: {model.get('description', '')}", ""]
        tuning = model.get("tuning", {})
        lines.append(f"Tuned in {tuning.get('tune_s')} s: {tuning.get('picked')}. {tuning.get('note', '')}".strip())
        if model.get("direct"):
            lines += ["", "| batch | direct p50 ms | with host copies p50 ms | direct items/s |", "|---|---|---|---|"]
            for size, d in model["direct"].items():
                lines.append(f"| {size} | {d['p50_ms']} | {d['with_copies_p50_ms']} | {d['items_per_s']} |")
        lines += [
            "",
            "| workers | batching | clients | requests/s | p50 ms | p99 ms | model busy % | GPU util % "
            "| worker CPU ms/request | batch sizes run (calls) | direct p50 ms at the most run | errors |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in model["rows"]:
            sizes = ", ".join(f"{s}×{n}" for s, n in r["calls_by_size"].items()) or "-"
            if r.get("inline_calls"):  # of them, run on the event loop for a lone request (docs/serving.md)
                sizes += f" ({r['inline_calls']} inline)"
            most = max(r["calls_by_size"], key=r["calls_by_size"].get) if r["calls_by_size"] else None
            reference = model.get("direct", {}).get(most, {}).get("p50_ms") if most else None
            batching = {"echo": "no model (echo)", "echo_inline": "no model (echo, inline)"}.get(
                r["mode"], "off" if r["mode"].startswith("off") else f"on ({r['max_wait_ms']} ms)"
            )
            cpu = r.get("worker_cpu_ms_per_request")
            gpu = r["gpu_util_pct"] if r["gpu_util_pct"] is not None else "-"
            workers = f"{r['workers']} + engine" if r.get("engines") else r["workers"]
            lines.append(
                f"| {workers} | {batching} | {r['clients']} | {r['requests_per_s']} | {r['p50_ms']} | {r['p99_ms']} | {r['model_busy_pct']} "
                f"| {gpu} | {cpu if cpu is not None else '-'} | {sizes} | {reference} | {r['errors']} |"
            )
        if model.get("summary"):
            lines += ["", "Targets: " + json.dumps(model["summary"])]
        if model.get("error"):
            lines += ["", "**Serving failed:**", "", "```", model["error"], "```"]
        lines.append("")
    return "\n".join(lines)


def write(report: dict, args: argparse.Namespace) -> None:
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown(report))


def run_model(kind: str, report: dict, args: argparse.Namespace, work: Path) -> None:
    import torch

    model = report["models"][kind] = {"rows": [], "wall_s": {}}
    checkpoint = work / f"{kind}.ait"
    tuned, model["tuning"] = tune_and_save(kind, args, checkpoint)
    model["description"] = f"{type(tuned.__wrapped__).__name__}, {args.size}, {args.dtype}"
    started = time.monotonic()
    model["direct"] = direct_reference(kind, tuned, args)
    model["wall_s"]["direct"] = round(time.monotonic() - started, 1)
    del tuned
    from aitune.torch import module_registry

    module_registry.clear()  # the workers need the memory more than this process
    gc.collect()
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
    write(report, args)
    print(json.dumps({kind: {"tuning": model["tuning"], "direct": model["direct"]}}), flush=True)
    if args.no_serving:
        return
    try:
        rows_done = serve_rows(kind, model, checkpoint, args, work, report)
    except RuntimeError as e:  # a launcher or worker that did not come up: its log's end goes in the report
        model["error"] = log_tail(e)
        write(report, args)
        raise
    model["wall_s"]["stop"] = round(time.monotonic() - rows_done, 1)


def serve_rows(kind: str, model: dict, checkpoint: Path, args: argparse.Namespace, work: Path, report: dict) -> float:
    """The rows of one model, on workers started for them; returns when the last row ended (the
    time.monotonic() before the workers are stopped)."""
    with serving_session(kind, checkpoint, args, work) as session:
        model["wall_s"]["workers_ready"] = session["ready_s"]
        started = time.monotonic()
        grid = [(mode, clients) for mode in ("off", "on") for clients in args.clients]
        many = 64 if 64 in args.clients else max(args.clients)
        echo = [(mode, clients) for mode in ECHO_MODES for clients in (1, many)]
        several = [(f"{m}{n}", args.two_worker_clients) for n in args.worker_counts for m in ("off", "on")]
        fed = [(f"{m}-f{k}", args.two_worker_clients) for k in args.front_counts for m in ("off", "on")]
        for mode, clients in grid + several + fed + echo:
            row = measure_row(kind, mode, clients, session, args)
            model["rows"].append(row)
            model["summary"] = summary(kind, model["rows"], model["direct"], args)
            model["wall_s"]["rows"] = round(time.monotonic() - started, 1)
            write(report, args)
            print(json.dumps({k: v for k, v in row.items() if k != "per_worker"}), flush=True)
        rows_done = time.monotonic()
    return rows_done


# What `python -m aitune.dynamo serve --frontend` imports first: checked before any tuning, so a
# machine that lacks part of Dynamo (the GPU image had no pydantic) stops in seconds, saying why.
DYNAMO_IMPORTS = ("dynamo.frontend.main", "dynamo.runtime", "dynamo.llm")


def dynamo_import_error() -> str | None:
    """The last lines of the error importing Dynamo's frontend in a fresh interpreter, or None."""
    code = "; ".join(f"import {name}" for name in DYNAMO_IMPORTS)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    if done.returncode == 0:
        return None
    return "\n".join((done.stderr or done.stdout).strip().splitlines()[-3:])


def log_tail(error: Exception, lines: int = 12) -> str:
    """The error, and the end of the launcher log it names (the logs stay in the work folder, which
    a device call does not bring back)."""
    text = str(error)
    log = Path(text.rpartition("see ")[2]) if "see " in text else None
    if log is not None and log.is_file():
        tail = log.read_text(errors="replace").strip().splitlines()[-lines:]
        text += "\n" + "\n".join(tail)
    return text


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if not args.no_serving:
        error = dynamo_import_error()
        if error is not None:
            print(
                f"serving_gpu.py: Dynamo's frontend cannot be imported here ({', '.join(DYNAMO_IMPORTS)}):\n{error}\n"
                "Install ai-dynamo and its dependencies (docs/serving.md, Install), or pass --no-serving.",
                file=sys.stderr,
            )
            return 2
    os.environ.update(
        SERVING_MODELS_SIZE=args.size, SERVING_MODELS_DTYPE=args.dtype, SERVING_MODELS_IMAGE=str(args.image_size)
    )
    cuda = args.device.startswith("cuda")
    if not cuda:  # the frontend, the workers, the clients and this process share the cores
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    if not cuda:
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="aitune-serving-gpu-"))
    work.mkdir(parents=True, exist_ok=True)
    report = {
        "device": args.device,
        "device_name": torch.cuda.get_device_name(args.device) if cuda else "CPU",
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "work_dir": str(work),
        "models": {},
    }
    started = time.monotonic()
    for kind in args.models:
        run_model(kind, report, args, work)
        report["wall_s"] = round(time.monotonic() - started, 1)
        write(report, args)
    print(markdown(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
