"""ONNXRuntimeBackendConfig and ONNXExecutionProvider (docs/reference/backends.md#per-backend-behaviour)."""

from __future__ import annotations

import dataclasses
import enum

from aitune.torch.backend.backend import BackendConfig, ServingOptions


class ONNXExecutionProvider(enum.Enum):
    """The ONNX Runtime execution provider a session runs on. TENSORRT falls back to CUDA
    (and CUDA to CPU for nodes CUDA cannot run), as ONNX Runtime does with a provider list."""

    CUDA = "cuda"
    TENSORRT = "tensorrt"
    CPU = "cpu"

    def __repr__(self) -> str:  # describe() shows ONNXRuntimeBackend(execution_provider=ONNXExecutionProvider.CPU)
        return f"{type(self).__name__}.{self.name}"

    @classmethod
    def parse(cls, value: object) -> ONNXExecutionProvider | None:
        """None, a member, or its value or name in any case ("cpu", "CPU"); the names let
        to_dict() (which writes enum names) round-trip."""
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, str):
            for member in cls:
                if value.lower() in (member.value, member.name.lower()):
                    return member
        choices = ", ".join(repr(m.value) for m in cls)
        raise ValueError(
            f"Invalid execution_provider: {value!r}. Expected one of {choices}, an "
            f"ONNXExecutionProvider or None (CUDA on a CUDA device, CPU on the CPU)."
        )


@dataclasses.dataclass
class ONNXRuntimeBackendConfig(BackendConfig, ServingOptions):
    """ONNX export (docs/reference/tensorrt.md#build-pipelines) served by an ONNX Runtime session with IO binding.

    Args:
        use_dynamo: export with torch.onnx.export(dynamo=True); False uses the TorchScript-trace exporter.
        execution_provider: ONNXExecutionProvider (or "cuda" / "tensorrt" / "cpu"); None means CUDA on a
            CUDA device and CPU on the CPU.
        opset_version: ONNX opset of the export; None means the exporter's default.
        use_cuda_graphs: serve through aitune's CUDA-graph runner (docs/reference/dispatch.md#cuda-graph-runner).
    """

    use_dynamo: bool = True
    execution_provider: ONNXExecutionProvider | None = None
    opset_version: int | None = None
    use_cuda_graphs: bool = False

    def __post_init__(self) -> None:
        self.execution_provider = ONNXExecutionProvider.parse(self.execution_provider)
        if self.opset_version is not None and (
            isinstance(self.opset_version, bool) or not isinstance(self.opset_version, int) or self.opset_version < 1
        ):
            raise ValueError(f"Invalid opset_version: {self.opset_version!r}. Expected a positive int or None.")
        for name in ("use_dynamo", "use_cuda_graphs"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"Invalid {name}: {getattr(self, name)!r}. Expected True or False.")
