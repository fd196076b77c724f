"""Re-creates tests/data/checkpoints_v1/: checkpoints in manifest format 1 (backend entries name a
Python class path), written by the release at commit 46eec07. Run it with THAT release installed
(a newer one writes format 2):

    cd tests/data && python make_checkpoints_v1.py

Each file holds a tiny MLP (Linear(6,16)-ReLU-Linear(16,3), seed 0) tuned on the CPU with one
backend; reference.safetensors holds an input batch and each model's eager output for it."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "helpers"))  # checkpoint_v1_backend: its class path is in the file

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

import aitune.torch as ait  # noqa: E402
from aitune.torch.backend import TorchEagerBackend, TorchInductorAotBackend  # noqa: E402
from checkpoint_v1_backend import V1TorchScriptBackend  # noqa: E402

OUT = HERE / "checkpoints_v1"


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def main() -> None:
    ait.config.cache_dir = Path(tempfile.mkdtemp(prefix="aitune-v1-"))
    OUT.mkdir(exist_ok=True)
    torch.manual_seed(1)
    x = torch.randn(3, 6)
    with torch.no_grad():
        y = mlp()(x)
    save_file({"input": x, "output": y}, str(OUT / "reference.safetensors"))
    for name, backend in [
        ("torch_eager", TorchEagerBackend()),
        ("torch_inductor_aot", TorchInductorAotBackend()),
        ("custom_torchscript", V1TorchScriptBackend()),
    ]:
        strategy = (
            ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)
        )
        m = ait.Module(mlp(), f"v1-{name}", strategy=strategy)
        torch.manual_seed(2)
        ait.tune(m, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2, 4], device="cpu")
        path = ait.save(m, OUT / f"{name}.ait")
        print(path, path.stat().st_size)


if __name__ == "__main__":
    main()
