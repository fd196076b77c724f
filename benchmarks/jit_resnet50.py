"""JIT tuning of ResNet-50 started by AUTOWRAPT_BOOTSTRAP=aitune_enable_jit_tuning, twice, in fresh
processes (docs/reference/jit.md, docs/reference/tuning.md#reusing-results): the first process tunes with the Inductor
JIT backend, the second should reuse the stored result. Prints and writes JSON with the first run's tune time, the
second run's first-call time, whether the second run reused (from its telemetry), and per-call
latency tuned vs eager at batch sizes 1 and 2.

    python benchmarks/jit_resnet50.py --device cuda --out jit_resnet50.json
    python benchmarks/jit_resnet50.py --device cpu --image-size 32 --depth tiny   # quick check

torchvision's resnet50 (random weights) is used when torchvision is installed; otherwise an
equivalent bottleneck ResNet defined here (same layers), so the script also runs without it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GROUP = "aitune_enable_jit_tuning"
ROOT = Path(__file__).resolve().parents[1]


# -- the model --------------------------------------------------------------------------------
def build_model(depth: str):
    import torch
    from torch import nn

    if depth == "resnet50":
        try:
            import torchvision

            return torchvision.models.resnet50(weights=None), "torchvision.models.resnet50"
        except ImportError:
            pass

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            cout = width * 4
            self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
            self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
            self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + (x if self.downsample is None else self.downsample(x)))

    class ResNet(nn.Module):
        def __init__(self, blocks: list[int], num_classes: int = 1000) -> None:
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
            )
            layers, cin = [], 64
            for i, n in enumerate(blocks):
                width = 64 * 2**i
                for j in range(n):
                    layers.append(Bottleneck(cin, width, 2 if j == 0 and i > 0 else 1))
                    cin = width * 4
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(cin, num_classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.layers(self.stem(x)), 1), 1))

    blocks = [3, 4, 6, 3] if depth == "resnet50" else [1, 1, 1, 1]
    return ResNet(blocks), f"in-file bottleneck ResNet {blocks}"


# -- one process under AUTOWRAPT_BOOTSTRAP -------------------------------------------------------
def _latency_ms(fn, x, iters: int, cuda: bool) -> float:
    import torch

    times = []
    for _ in range(iters):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn(x)
        if cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def child(args: argparse.Namespace) -> None:
    import torch  # the autowrapt hook enables JIT tuning here, before the model is built

    from aitune.torch import jit_config
    from aitune.torch.backend import TorchInductorJitBackend, TorchInductorJitBackendConfig
    from aitune.torch.jit import patcher
    from aitune.torch.jit.patched_module import get_patched
    from aitune.torch.tune_strategy import FirstWinsStrategy

    if not patcher.is_patching():
        raise SystemExit(
            "AUTOWRAPT_BOOTSTRAP did not enable JIT tuning (is autowrapt installed, and the "
            f"`{GROUP}` entry point visible?)"
        )
    # Without TensorRT (the GPU image has none) the default JIT strategy is Inductor JIT alone,
    # which at batch 1 is launch-bound like eager and failed the eager gate (3.3 vs 3.1 ms, H200,
    # 2026-11-30); served through CUDA graphs it is not.
    strategy = FirstWinsStrategy(
        [TorchInductorJitBackend(TorchInductorJitBackendConfig(use_cuda_graphs=args.cuda_graphs == "on"))]
    )
    # see wide_tolerance.py; "default" keeps docs/reference/validation.md#numeric-comparison
    if args.tolerance == "wide":
        from wide_tolerance import wide_tolerances

        strategy.set_tolerance(wide_tolerances())
    jit_config.strategy = strategy
    jit_config.device = args.device
    cuda = args.device.startswith("cuda")
    torch.manual_seed(0)
    model, source = build_model(args.depth)
    model = model.eval().to(args.device)
    x1 = torch.randn(1, 3, args.image_size, args.image_size, device=args.device)
    x2 = torch.randn(2, 3, args.image_size, args.image_size, device=args.device)
    with torch.no_grad():
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        model(x1)  # recorded, then tuned (or the stored result is loaded)
        if cuda:
            torch.cuda.synchronize()
        first_call_s = time.perf_counter() - start
        start = time.perf_counter()
        model(x2)  # a second batch size (Inductor may specialise again)
        if cuda:
            torch.cuda.synchronize()
        second_shape_s = time.perf_counter() - start
        head = get_patched(model)
        eager = type(model).forward.__get__(model)  # submodules are detached once the head is tuned
        latency = {}
        for name, fn in (("tuned", model), ("eager", eager)):
            latency[name] = {}
            for bs, x in ((1, x1), (2, x2)):
                _latency_ms(fn, x, max(3, args.iters // 5), cuda)  # warm-up
                latency[name][str(bs)] = round(_latency_ms(fn, x, args.iters, cuda), 4)
    report = (
        json.loads(Path(os.environ["AITUNE_TUNING_DATA_PATH"]).read_text())
        if Path(os.environ["AITUNE_TUNING_DATA_PATH"]).exists()
        else {"modules": []}
    )
    graphs = [g for m in report["modules"] for g in m["graphs"]]
    print(
        "RESULT "
        + json.dumps(
            {
                "model": source,
                "state": head.state.name if head else None,
                "head": head.name if head else None,
                "backend": head.tuned.backends[0][1].describe() if head is not None and head.tuned else None,
                "reason": head.reason if head else None,
                "first_call_s": round(first_call_s, 3),
                "second_batch_size_call_s": round(second_shape_s, 3),
                "reused": bool(graphs)
                and all(g["selection_rule"].startswith("reused stored tuning result") for g in graphs),
                "builds": sum(len(g["builds"]) for g in graphs),
                "latency_ms": latency,
            }
        ),
        flush=True,
    )


# -- the driver ---------------------------------------------------------------------------------
def _entry_point_path(folder: Path) -> str | None:
    """A source-tree run has no installed entry points: a .dist-info with pyproject's."""
    import importlib.metadata

    if any(ep.value.startswith("aitune.") for ep in importlib.metadata.entry_points(group=GROUP)):
        return None
    import tomllib

    points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][GROUP]
    info = folder / "aitune_bench-0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: aitune-bench\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()))
    return str(folder)


def _child_paths(work: Path) -> list[str]:
    """PYTHONPATH for the runs: the aitune this interpreter imports (the installed package on
    the GPU machine; the source tree, which holds the built extension, in development), and a
    temporary entry point only when no installed distribution declares one."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("aitune")
    package_root = str(Path(spec.origin).resolve().parents[1]) if spec and spec.origin else str(ROOT / "python")
    paths = [package_root, os.environ.get("PYTHONPATH", "")]
    if not importlib.metadata.entry_points(group=GROUP):
        paths.insert(0, _entry_point_path(work / "entry_point"))
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--depth", choices=["resnet50", "tiny"], default="resnet50")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument(
        "--cuda-graphs",
        choices=["on", "off"],
        default=None,
        help="serve the Inductor JIT candidate through aitune's CUDA-graph runner (default: on for a CUDA device)",
    )
    parser.add_argument(
        "--tolerance",
        choices=["default", "wide"],
        default="wide",
        help="numeric check: the default tolerances, or wide_tolerance.py's",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--work-dir", type=Path, default=None, help="caches and reports (default: a temp dir)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cuda_graphs is None:
        args.cuda_graphs = "on" if args.device.startswith("cuda") else "off"
    if args.child:
        child(args)
        return
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="aitune-jit-resnet50-"))
    paths = _child_paths(work)
    runs = []
    for run in (1, 2):
        env = dict(
            os.environ,
            AUTOWRAPT_BOOTSTRAP=GROUP,
            PYTHONPATH=os.pathsep.join(p for p in paths if p),
            AITUNE_CACHE_DIR=str(work / "cache"),
            AITUNE_JIT_CACHE_DIR=str(work / "jit"),
            AITUNE_TUNING_DATA_PATH=str(work / f"report_run{run}.json"),
        )
        command = [
            sys.executable,
            __file__,
            "--child",
            "--device",
            args.device,
            "--image-size",
            str(args.image_size),
            "--depth",
            args.depth,
            "--iters",
            str(args.iters),
            "--tolerance",
            args.tolerance,
            "--cuda-graphs",
            args.cuda_graphs,
        ]
        start = time.perf_counter()
        proc = subprocess.run(command, env=env, capture_output=True, text=True, errors="replace")
        wall = time.perf_counter() - start
        (work / f"run{run}.log").write_text(proc.stdout + proc.stderr)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if proc.returncode != 0 or line is None:
            sys.stderr.write((proc.stdout + proc.stderr)[-6000:])
            raise SystemExit(f"run {run} failed (rc={proc.returncode}); log: {work / f'run{run}.log'}")
        runs.append({"run": run, "process_wall_s": round(wall, 2), **json.loads(line[len("RESULT ") :])})
    first, second = runs
    summary = {
        "device": args.device,
        "image_size": args.image_size,
        "depth": args.depth,
        "model": first["model"],
        "tolerance": args.tolerance,
        "cuda_graphs": args.cuda_graphs,
        "first_run_tune_s": first["first_call_s"],
        "second_run_first_call_s": second["first_call_s"],
        "second_run_reused": second["reused"],
        "second_run_builds": second["builds"],
        "speedup_bs1": round(first["latency_ms"]["eager"]["1"] / first["latency_ms"]["tuned"]["1"], 3),
        "runs": runs,
        "work_dir": str(work),
    }
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
