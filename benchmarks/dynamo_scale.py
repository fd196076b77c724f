"""Serving at scale (docs/serving.md): requests/s and latency of 1 vs N Dynamo workers behind
one frontend, and ait.tune wall time on one device vs several (devices=[...]).

    # on a machine with 2 GPUs (not run yet: no multi-GPU machine was available, see RESULTS.md)
    python benchmarks/dynamo_scale.py --devices cuda:0,cuda:1 --out results/dynamo_scale_gpu.json
    # the mechanics on the CPU (two workers on the same cores: no speedup is expected)
    python benchmarks/dynamo_scale.py --devices cpu,cpu --size small --seconds 10

Serving: the embedding model is tuned once on the first device and saved; then for 1 and for N
workers, `python -m aitune.dynamo serve --frontend` starts them (serving_launch.py), `--clients`
closed-loop clients (serving_load.py) send OpenAI embedding requests (`--items` sequences each) for
`--seconds` after a warm-up, over keep-alive HTTP to 127.0.0.1, and the requests/s, items/s and
p50/p99 latency are reported.
Tuning: ait.tune of the same model with MaxThroughputStrategy over `--candidates`, first on the
first device alone, then with devices=[...] (fresh aitune caches; torch's compile caches are
warm for the second run, which the report says)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the shared serving helpers, also when imported from elsewhere
from serving_launch import free_port, launched, serve_command, serve_env, wait_ready  # noqa: E402
from serving_load import run_load  # noqa: E402

SIZES = {  # (vocabulary, width, layers, sequence length)
    "small": (1000, 64, 1, 16),
    "base": (30522, 384, 4, 128),
    "bert-base": (30522, 768, 12, 128),  # BERT-base's shape (serving_gpu.py's embedding model)
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


# -- serving ----------------------------------------------------------------------------------
@contextlib.contextmanager
def serving(checkpoint: Path, devices: list[str], size: str, log: Path):
    port = free_port()
    command = serve_command("dynamo_scale:make_model", checkpoint, devices, "bench", http_port=port)
    # DYN_LOG=warn unless set: at Dynamo's default level every request logs seven lines.
    env = serve_env(DYNAMO_SCALE_SIZE=size, DYN_LOG=os.environ.get("DYN_LOG", "warn"))
    with launched(command, env, log) as process:
        wait_ready([(process, log, len(devices))], port, ["bench"], timeout_s=300)
        yield port


def load(port: int, size: str, clients: int, items: int, seconds: float, warmup_s: float) -> dict:
    vocabulary, _, _, sequence = SIZES[size]
    body = json.dumps({"model": "bench", "input": torch.randint(0, vocabulary, (items, sequence)).tolist()})
    result = run_load(port, "/v1/embeddings", body.encode(), clients, seconds, warmup_s)
    result.update(items_per_s=round(result["requests_per_s"] * items, 1), items_per_request=items)
    return result


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
