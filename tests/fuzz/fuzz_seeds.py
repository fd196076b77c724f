"""The checkpoint fuzzer's seeds (valid files made at start, with the models and calls that
exercise them) and how a load is judged: a state dict's comparable summary, escapes
(tests/fuzz/checkpoint_fuzz.py, docs/fuzzing.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


# -- seeds (made in the parent) ------------------------------------------------------------------
def make_seeds(folder: Path, aot: bool) -> list[dict[str, Any]]:
    import logging

    import torch

    import aitune.torch as ait
    from aitune.torch.backend import TorchEagerBackend, TorchInductorAotBackend
    from aitune.torch.config import config

    config.cache_dir = folder / "seed-cache"
    logging.getLogger("aitune").setLevel(logging.WARNING)

    def strategy(b):
        return ait.OneBackendStrategy(b).enable_performance_validation(False).enable_find_max_batch_size(False)

    seeds = []

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()
    m = ait.Module(mlp, "mlp", strategy=strategy(TorchEagerBackend()))
    ait.tune(m, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2], device="cpu")
    seeds.append({"name": "eager-mlp", "path": str(ait.save(m, folder / "eager-mlp.ait")), "model": "mlp"})

    m2 = ait.Module(KwargsNet().eval(), "kw", strategy=strategy(TorchEagerBackend()))
    ait.tune(
        lambda x: m2(x, scale=2.0, extra={"bias": torch.ones(3)}),
        [torch.randn(6) for _ in range(2)],
        batch_sizes=[1, 2],
        device="cpu",
    )
    seeds.append({"name": "eager-kwargs", "path": str(ait.save(m2, folder / "eager-kwargs.ait")), "model": "kwargs"})

    from own_state_backend import OwnStateBackend

    m4 = ait.Module(_mlp(), "own", strategy=strategy(OwnStateBackend()))
    ait.tune(m4, [torch.randn(6) for _ in range(2)], batch_sizes=[1, 2], device="cpu")
    seeds.append({"name": "own-state", "path": str(ait.save(m4, folder / "own-state.ait")), "model": "mlp"})
    seeds.append({"name": "state-dict", "path": str(make_state_dict_seed(folder)), "model": "state_dict"})

    if aot:
        # A model of its own: after an AOT tune the wrapped model's weights go to
        # config.device_after_tuning ('meta'), which would leave the eager seed's model empty.
        torch.manual_seed(0)
        aot_mlp = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()
        m3 = ait.Module(aot_mlp, "aot", strategy=strategy(TorchInductorAotBackend()))
        ait.tune(m3, [torch.randn(6) for _ in range(4)], batch_sizes=[1, 2], device="cpu")
        seeds.append({"name": "aot-mlp", "path": str(ait.save(m3, folder / "aot-mlp.ait")), "model": "mlp"})
    return seeds


def _mlp() -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def make_state_dict_seed(folder: Path) -> Path:
    """A LocalTorchStorage state dict: tensors, an artifact file and folder, a plain path."""
    import torch

    from aitune.torch.checkpoint.artifact import ArtifactPath
    from aitune.torch.checkpoint.storage import LocalTorchStorage

    build = folder / "state-build"
    (build / "engine").mkdir(parents=True)
    (build / "engine" / "model.plan").write_bytes(b"plan bytes")
    (build / "profiles").mkdir()
    (build / "profiles" / "a.json").write_text('{"min": [1, 6]}')
    state = {
        "weight": torch.arange(6.0),
        "engine": ArtifactPath(build, "engine/model.plan"),
        "profiles": ArtifactPath(build, "profiles"),
        "built_in": Path("/opt/elsewhere"),
        "options": {"depth": 3, "scale": (1.5, torch.ones(2))},
    }
    return LocalTorchStorage(folder, sha_type="512").save("state-dict", state)


def make_outside_files(folder: Path) -> dict[str, str]:
    """Real files outside every archive, for the path attacks: a TorchScript program (code that
    serves other outputs), a safetensors file and a folder holding both under the names the seeds use."""
    import torch
    from safetensors.torch import save_file

    outside = folder / "outside"
    (outside / "program").mkdir(parents=True)

    class Evil(torch.nn.Module):
        def forward(self, x):
            return torch.full((x.shape[0], 3), 42.0)

    torch.jit.save(torch.jit.script(Evil()), str(outside / "program" / "model.ts"))
    save_file({"0": torch.tensor([1000.0])}, str(outside / "state.safetensors"))
    (outside / "engine").mkdir()
    (outside / "engine" / "model.plan").write_bytes(b"outside plan")
    return {"folder": str(outside), "tensors": str(outside / "state.safetensors")}


class KwargsNet:  # defined lazily below (torch is imported only where needed)
    pass


def _define_models() -> None:
    import torch

    class _KwargsNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(6, 3)

        def forward(self, x, scale: float = 1.0, extra=None):
            y = self.linear(x) * scale + extra["bias"]
            return {"y": y, "norm": (y.norm(dim=-1),)}

    global KwargsNet
    KwargsNet = _KwargsNet  # type: ignore[misc]


def model_and_call(kind: str, seed_state: Path | None = None) -> tuple[Any, Any]:
    """A fresh target module for a seed and the call that exercises it."""
    import torch

    _define_models()
    torch.manual_seed(0)
    if kind == "state_dict":
        return None, None
    if kind == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()
        x = torch.randn(2, 6, generator=torch.Generator().manual_seed(1))
        return model, lambda m: m(x)
    model = KwargsNet().eval()
    x = torch.randn(2, 6, generator=torch.Generator().manual_seed(1))
    return model, lambda m: m(x, scale=2.0, extra={"bias": torch.ones(3)})


def _is_outside(tensor: Any) -> bool:
    """The marker value of make_outside_files' safetensors file."""
    return tensor.numel() == 1 and float(tensor.reshape(-1)[0]) == 1000.0


def _state_summary(state: Any) -> Any:
    """A comparable form of a loaded state dict: tensors as lists, artifacts by their content."""
    import torch

    from aitune.torch.checkpoint.artifact import ArtifactPath

    if isinstance(state, torch.Tensor):
        return ["tensor", str(state.dtype), state.tolist()]
    if isinstance(state, ArtifactPath):
        path = state.path
        if path.is_dir():
            return [
                "folder",
                sorted((str(p.relative_to(path)), p.read_bytes().hex()) for p in path.rglob("*") if p.is_file()),
            ]
        return ["file", str(state.relative_path), path.read_bytes().hex()]
    if isinstance(state, dict):
        return {str(k): _state_summary(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return [type(state).__name__, [_state_summary(v) for v in state]]
    return repr(state)


def _state_escapes(state: Any, cache: Path) -> list[Path]:
    """Every ArtifactPath in a loaded state dict outside the extraction folder, and tensors of the
    outside file (reported as paths)."""
    import torch

    from aitune.torch.checkpoint.artifact import ArtifactPath

    root = (cache / "checkpoints").resolve()
    found: list[Path] = []
    if isinstance(state, ArtifactPath):
        if root not in state.path.resolve().parents:
            found.append(state.path)
    elif isinstance(state, torch.Tensor):
        if _is_outside(state):
            found.append(Path("(a tensor of the outside file)"))
    elif isinstance(state, dict):
        for v in state.values():
            found += _state_escapes(v, cache)
    elif isinstance(state, (list, tuple)):
        for v in state:
            found += _state_escapes(v, cache)
    return found


def _flat(out: Any) -> list:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
