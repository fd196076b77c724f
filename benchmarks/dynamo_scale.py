"""Serving at scale (docs/serving.md): requests/s and latency of 1 vs N Dynamo workers behind
one frontend, and ait.tune wall time on one device vs several (devices=[...]).

    # on a machine with 2 GPUs (not run yet: no multi-GPU machine was available, see RESULTS.md)
    python benchmarks/dynamo_scale.py --devices cuda:0,cuda:1 --out results/dynamo_scale_gpu.json
    # the mechanics on the CPU (two workers on the same cores: no speedup is expected)
    python benchmarks/dynamo_scale.py --devices cpu,cpu --size small --seconds 10

Serving: the embedding model is tuned once on the first device and saved; then for 1 and for N
workers, `python -m aitune.dynamo serve --frontend` starts them, `--clients` threads send
OpenAI embedding requests (`--items` sequences each) for `--seconds` after a warm-up, over
keep-alive HTTP to 127.0.0.1, and the requests/s, items/s and p50/p99 latency are reported.
Tuning: ait.tune of the same model with MaxThroughputStrategy over `--candidates`, first on the
first device alone, then with devices=[...] (fresh aitune caches; torch's compile caches are
warm for the second run, which the report says)."""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
SIZES = {  # (vocabulary, width, layers, sequence length)
    "small": (1000, 64, 1, 16),
    "base": (30522, 384, 4, 128),
}


class BenchEmbedder(torch.nn.Module):
    """Token ids [batch, seq] -> normalized embeddings [batch, width]: a small text encoder."""

    def __init__(self, vocabulary: int, width: int, layers: int) -> None:
        super().__init__()
        self.tokens = torch.nn.Embedding(vocabulary, width)
        layer = torch.nn.TransformerEncoderLayer(
            width, nhead=max(1, width // 64), dim_feedforward=4 * width, batch_first=True
        )
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(self.encoder(self.tokens(ids)).mean(dim=1), dim=-1)


def make_model() -> BenchEmbedder:
    """The factory the workers import (`--model dynamo_scale:make_model`); the size comes from
    DYNAMO_SCALE_SIZE so every process builds the same model."""
    vocabulary, width, layers, _ = SIZES[os.environ.get("DYNAMO_SCALE_SIZE", "small")]
    torch.manual_seed(0)
    return BenchEmbedder(vocabulary, width, layers).eval()


def dataset(size: str, count: int = 16) -> list[torch.Tensor]:
    vocabulary, _, _, sequence = SIZES[size]
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, vocabulary, (sequence,), generator=g) for _ in range(count)]


def candidates(names: str) -> list:
    from aitune.torch.backend import (
        ONNXRuntimeBackend,
        TensorRTBackend,
        TensorRTBackendConfig,
        TorchEagerBackend,
        TorchEagerBackendConfig,
        TorchInductorAotBackend,
        TorchInductorJitBackend,
    )

    known = {
        "eager": lambda: TorchEagerBackend(),
        "eager-graphs": lambda: TorchEagerBackend(TorchEagerBackendConfig(use_cuda_graphs=True)),
        "inductor-jit": lambda: TorchInductorJitBackend(),
        "inductor-aot": lambda: TorchInductorAotBackend(),
        "onnxruntime": lambda: ONNXRuntimeBackend(),
        "tensorrt": lambda: TensorRTBackend(),
        "tensorrt-trace": lambda: TensorRTBackend(TensorRTBackendConfig(use_dynamo=False)),
    }
    unknown = [n for n in names.split(",") if n not in known]
    if unknown:
        raise SystemExit(f"unknown --candidates {unknown}; known: {sorted(known)}")
    return [known[n]() for n in names.split(",")]


# -- tuning ------------------------------------------------------------------------------------
def tune_once(args: argparse.Namespace, devices: list[str], checkpoint: Path | None) -> dict:
    import aitune.torch as ait
    from aitune.torch import module_registry
    from aitune.torch.config import config

    module_registry.clear()
    config.cache_dir = Path(tempfile.mkdtemp(prefix="dynamo-scale-cache-"))
    strategy = ait.MaxThroughputStrategy(candidates(args.candidates))
    model = ait.Module(make_model().to(devices[0]), "embedder", strategy=strategy)
    start = time.perf_counter()
    ait.tune(
        model,
        dataset(args.size),
        batch_sizes=args.batch_sizes,
        device=devices[0],
        devices=devices if len(devices) > 1 else None,
    )
    wall = time.perf_counter() - start
    picked = model.tuned_module.backends[0][1].describe() if model.tuned_module else "eager (kept)"
    if checkpoint is not None:
        ait.save(model, checkpoint)
    return {"devices": devices, "wall_s": round(wall, 2), "picked": picked}


# -- serving -----------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(checkpoint: Path, devices: list[str], size: str, log: Path):
    port = free_port()
    env = dict(
        os.environ,
        DYNAMO_SCALE_SIZE=size,
        DYN_DISCOVERY_BACKEND="file",
        DYN_REQUEST_PLANE="tcp",
        DYN_FILE_KV=tempfile.mkdtemp(prefix="dynamo-scale-kv-"),
        PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    )
    command = [
        sys.executable,
        "-m",
        "aitune.dynamo",
        "serve",
        "--model",
        "dynamo_scale:make_model",
        "--checkpoint",
        str(checkpoint),
        "--devices",
        ",".join(devices),
        "--frontend",
        "--http-host",
        "127.0.0.1",
        "--http-port",
        str(port),
        "--model-name",
        "bench",
    ]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while log.read_text(errors="replace").count("Worker ready") < len(devices) or not _listed(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the workers did not start; see {log}")
            time.sleep(0.5)
        yield port
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


def _listed(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
            return any(m["id"] == "bench" for m in json.loads(r.read())["data"])
    except OSError:
        return False


def load(port: int, size: str, clients: int, items: int, seconds: float, warmup_s: float) -> dict:
    vocabulary, _, _, sequence = SIZES[size]
    body = json.dumps({"model": "bench", "input": torch.randint(0, vocabulary, (items, sequence)).tolist()})
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    start = time.monotonic()
    measure_from, stop_at = start + warmup_s, start + warmup_s + seconds

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while True:
            sent = time.monotonic()
            if sent >= stop_at:
                break
            connection.request("POST", "/v1/embeddings", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            done = time.monotonic()
            if sent >= measure_from:
                with lock:
                    if response.status == 200:
                        latencies.append(done - sent)
                    else:
                        errors[0] += 1
        connection.close()

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(lambda _: client(), range(clients)))
    latencies.sort()
    count = len(latencies)
    return {
        "requests_per_s": round(count / seconds, 1),
        "items_per_s": round(count * items / seconds, 1),
        "p50_ms": round(1000 * statistics.median(latencies), 2) if count else None,
        "p99_ms": round(1000 * latencies[min(count - 1, int(0.99 * count))], 2) if count else None,
        "requests": count,
        "errors": errors[0],
        "clients": clients,
        "items_per_request": items,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", default="cuda:0,cuda:1")
    parser.add_argument("--size", default="base", choices=sorted(SIZES))
    parser.add_argument("--batch-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4, 8, 16])
    parser.add_argument("--candidates", default="inductor-jit,inductor-aot,onnxruntime,tensorrt,tensorrt-trace")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--items", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup-s", type=float, default=5)
    parser.add_argument("--skip-tuning-comparison", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    os.environ["DYNAMO_SCALE_SIZE"] = args.size
    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    work = Path(tempfile.mkdtemp(prefix="dynamo-scale-"))
    checkpoint = work / "bench.ait"

    report: dict = {
        "size": args.size,
        "devices": devices,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "cpus": os.cpu_count(),
        "tuning": [],
        "serving": [],
    }
    report["tuning"].append(tune_once(args, devices[:1], checkpoint))
    print(json.dumps(report["tuning"][-1]), flush=True)
    if not args.skip_tuning_comparison and len(devices) > 1:
        report["tuning"].append(tune_once(args, devices, None))
        report["tuning"][-1]["note"] = "torch compile caches warm from the run above"
        print(json.dumps(report["tuning"][-1]), flush=True)
    for workers in sorted({1, len(devices)}):
        with serving(checkpoint, devices[:workers], args.size, work / f"serve-{workers}.log") as port:
            result = load(port, args.size, args.clients, args.items, args.seconds, args.warmup_s)
        result["workers"] = workers
        report["serving"].append(result)
        print(json.dumps(result), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))
    print("\n| workers | requests/s | items/s | p50 ms | p99 ms | errors |\n|---|---|---|---|---|---|")
    for r in report["serving"]:
        print(
            f"| {r['workers']} | {r['requests_per_s']} | {r['items_per_s']} | {r['p50_ms']} | {r['p99_ms']} | "
            f"{r['errors']} |"
        )
    for t in report["tuning"]:
        print(f"tuning on {t['devices']}: {t['wall_s']} s, picked {t['picked']}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))  # workers import this file as dynamo_scale
    raise SystemExit(main())
