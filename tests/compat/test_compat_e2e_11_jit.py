"""Scenario 11, written as AITune's JIT functional script 001 is: `@patch_for_jit_tuning`, four
calls at two batch sizes (`config.min_samples = 4`), then `PatchedModule.print_hierarchy(sink=...)`
under PRINT_HIERARCHY_HEADER, and the tuning data snapshot at AITune's path."""

from io import StringIO

import pytest
import torch
from compat_models import ResNet18

from aitune.torch.backend.torch_eager import TorchEagerBackend
from aitune.torch.jit.config import config
from aitune.torch.jit.patched_module import PRINT_HIERARCHY_HEADER, PatchedModule
from aitune.torch.jit.patcher import patch_for_jit_tuning
from aitune.torch.tune_data.reporting import snapshot_tuning_data
from aitune.torch.tune_strategy.first_wins_strategy import FirstWinsStrategy


def run_jit_resnet(create_resnet, device: str, class_name: str, size: int, expected_backend: str | None) -> None:
    resnet = create_resnet()
    config.min_samples = 4  # just to compare before and after tuning
    config.dry_run = False
    config.detect_graph_breaks = False

    def batch():
        # two batch sizes so that the dynamic axes are seen
        resnet(torch.randn(2, 3, size, size, device=device))
        resnet(torch.randn(16, 3, size, size, device=device))

    with torch.no_grad():
        for _ in range(3):
            batch()

    with StringIO() as test_sink:
        PatchedModule.print_hierarchy(sink=test_sink.write)
        hierarchy_output = test_sink.getvalue()
    assert PRINT_HIERARCHY_HEADER in hierarchy_output
    assert f"├─ {class_name} level=0🪜 state=tuned🎯" in hierarchy_output
    if expected_backend:
        assert f"({expected_backend})" in hierarchy_output
    PatchedModule.heads[0].try_tune()  # already tuned: nothing to do
    assert "state=tuned" in str(PatchedModule.heads[0])

    with torch.no_grad():
        assert resnet(torch.randn(8, 3, size, size, device=device)).shape == (8, 1000)
        assert resnet(torch.randn(16, 3, size, size, device=device)).shape == (16, 1000)


def test_jit_resnet_cpu(jit_clean, tmp_path):
    jit_clean.strategy = FirstWinsStrategy([TorchEagerBackend()]).enable_performance_validation(False)

    @patch_for_jit_tuning
    def create_resnet():
        return ResNet18(width=8).eval()

    run_jit_resnet(create_resnet, "cpu", "ResNet18", 64, "TorchEagerBackend")
    assert snapshot_tuning_data(tmp_path / "jit_report.json").exists()


@pytest.mark.gpu
def test_jit_resnet18_cuda(jit_clean):
    """AITune's script as written: the default JIT strategy on the GPU."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    timm = pytest.importorskip("timm", reason="AITune's script uses timm; the GPU image has it")
    jit_clean.device = "cuda:0"

    @patch_for_jit_tuning
    def create_resnet():
        return timm.create_model("resnet18", pretrained=False).to("cuda").eval()

    run_jit_resnet(create_resnet, "cuda", "ResNet", 224, None)
