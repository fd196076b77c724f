"""Fake backends that inject faults while tuning (tests/unit/test_tuning_faults.py, tests/gpu):
running out of memory, a worker process killed with SIGKILL, Ctrl-C (a real SIGINT) and a large
artifact for a disk that fills up. In a module of their own so the device pool's spawned workers
import them by name."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
import weakref
from pathlib import Path
from typing import Any

import torch

from aitune.torch.backend import ArtifactPath

from fake_backend import FakeBackend, FakeBackendConfig


@dataclasses.dataclass
class OutOfMemoryConfig(FakeBackendConfig):
    name: str = "out-of-memory"
    hold_bytes: int = 64 << 20  # allocated (and held by the build's frame) before the error
    real_bytes: int = 0  # > 0: ask the device's allocator for this much, so the error is real


class OutOfMemoryBackend(FakeBackend):
    """A build that allocates `hold_bytes` on its device, then runs out of memory: a simulated
    torch.OutOfMemoryError, or a real one from the allocator with `real_bytes`. `held` keeps a
    weak reference to the held block, so a test can tell whether the strategy let it go."""

    config_class = OutOfMemoryConfig
    held: list[weakref.ref] = []

    def _build(self, module: Any, graph_spec: Any, data: list, device: torch.device, cache_dir: Path) -> None:
        block = torch.empty(self.config.hold_bytes, dtype=torch.uint8, device=device)
        OutOfMemoryBackend.held.append(weakref.ref(block))
        if self.config.real_bytes:
            torch.empty(self.config.real_bytes, dtype=torch.uint8, device=device)
        raise torch.OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate 80.00 GiB (simulated by {self.config.name}, holding {block.numel()} B)"
        )


@dataclasses.dataclass
class KilledConfig(FakeBackendConfig):
    name: str = "killed"


class KilledBackend(FakeBackend):
    """Its build is killed with SIGKILL, as the kernel's out-of-memory killer ends a compiler."""

    config_class = KilledConfig

    def _build(self, module: Any, graph_spec: Any, data: list, device: torch.device, cache_dir: Path) -> None:
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # never reached


@dataclasses.dataclass
class InterruptingConfig(FakeBackendConfig):
    name: str = "interrupted"


class InterruptingBackend(FakeBackend):
    """Ctrl-C in the middle of its build: a real SIGINT to this process, whose default handler
    raises KeyboardInterrupt in the main thread. Interrupts once per process (`fired`)."""

    config_class = InterruptingConfig
    fired: list[bool] = []

    def _build(self, module: Any, graph_spec: Any, data: list, device: torch.device, cache_dir: Path) -> None:
        (Path(cache_dir) / "partial.bin").write_bytes(b"\0" * 4096)  # what an interrupted compiler leaves
        if not InterruptingBackend.fired:
            InterruptingBackend.fired.append(True)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)  # the KeyboardInterrupt arrives here
        super()._build(module, graph_spec, data, device, cache_dir)


@dataclasses.dataclass
class BlobConfig(FakeBackendConfig):
    name: str = "blob"
    blob_bytes: int = 1 << 20


class BlobBackend(FakeBackend):
    """Serves like FakeBackend, with an artifact of `blob_bytes` that checkpoints and the results
    store copy: a disk that fills up while it is stored."""

    config_class = BlobConfig

    def __init__(self, config: BlobConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._blob: ArtifactPath | None = None

    @property
    def is_jit(self) -> bool:
        return False

    def _build(self, module: Any, graph_spec: Any, data: list, device: torch.device, cache_dir: Path) -> None:
        super()._build(module, graph_spec, data, device, cache_dir)
        path = Path(cache_dir) / "blob.bin"
        with open(path, "wb") as f:
            f.write(os.urandom(self.config.blob_bytes))
        self._blob = ArtifactPath.from_existing(path, cache_dir)

    def _artifacts(self) -> dict[str, Any]:
        return {"blob": self._blob}


@dataclasses.dataclass
class InterruptedStoreConfig(BlobConfig):
    name: str = "interrupted-store"


class InterruptedWhileStoredBackend(BlobBackend):
    """Builds and serves; Ctrl-C (a real SIGINT) arrives while the results store writes it, after
    its artifact went into the archive (to_dict is called between the archive's entries)."""

    config_class = InterruptedStoreConfig
    fired: list[bool] = []

    def to_dict(self) -> dict:
        data = super().to_dict()
        if not InterruptedWhileStoredBackend.fired:
            InterruptedWhileStoredBackend.fired.append(True)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)  # the KeyboardInterrupt arrives here
        return data
