"""Issue 4 targets on a GPU: save a ResNet-50 tuned with TorchInductorAotBackend, then
(1) cold `ait.load` in a fresh process to the first inference (target ≤ 2 s), and
(2) per-call cost of the C++ runtime (`aitune bench`) against the Python path for the same
checkpoint (target: C++ ≤ Python). Prints one JSON object.

    python benchmarks/checkpoint_roundtrip.py --out roundtrip.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COLD_LOAD = r"""
import sys, time, torch
start = time.perf_counter()
import aitune.torch as ait
import torchvision
model = torchvision.models.resnet50().eval().to("meta")
loaded = ait.load(model, sys.argv[1])
x = torch.randn(1, 3, 224, 224, device="cuda")
with torch.no_grad():
    loaded(x)
torch.cuda.synchronize()
print(time.perf_counter() - start)
"""


def main() -> None:
    import torch
    import torchvision

    import aitune.torch as ait
    from aitune.torch.backend import TorchInductorAotBackend

    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())
    model = torchvision.models.resnet50().eval().cuda()
    strategy = ait.OneBackendStrategy(TorchInductorAotBackend())
    strategy.enable_performance_validation(False).enable_find_max_batch_size(False)
    wrapped = ait.Module(model, "resnet50", strategy=strategy)
    ait.tune(wrapped, [torch.randn(3, 224, 224)], batch_sizes=[1, 2], device="cuda:0")
    path = ait.save(wrapped, work / "resnet50.ait")

    cold = [float(subprocess.run([sys.executable, "-c", COLD_LOAD, str(path)], check=True, capture_output=True,
                                 text=True).stdout.strip().splitlines()[-1]) for _ in range(3)]
    x = torch.randn(1, 3, 224, 224, device="cuda")
    with torch.no_grad():
        for _ in range(20):
            wrapped(x)
        times = []
        for _ in range(200):
            torch.cuda.synchronize()
            start = time.perf_counter_ns()
            wrapped(x)
            torch.cuda.synchronize()
            times.append(time.perf_counter_ns() - start)
    cli = shutil.which("aitune")
    bench = json.loads(subprocess.run([cli, "bench", str(path), "--device", "0", "--batch-size", "1", "--iterations",
                                       "200", "--json"], check=True, capture_output=True, text=True).stdout)
    result = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "cold_load_to_first_inference_s": [round(c, 3) for c in cold],
              "python_call_ms_median": statistics.median(times) / 1e6, "cpp_bench": bench}
    print(json.dumps(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
