"""ait.inspect's results carry AITune's ModuleInfo fields; the JIT inspection page names the
model class."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

import aitune.torch as ait
from aitune.torch.inspecting.module_info import ModuleInfo


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.norm(x), x.sum()


class Pipeline:
    def __init__(self) -> None:
        self.encoder = Encoder()
        self.head = nn.Linear(8, 2).half()

    def __call__(self, x, scale=1.0):
        features, _ = self.encoder(x)
        return self.head(features.half() * scale)


def test_inspect_results_have_aitunes_module_info_fields():
    pipe = Pipeline()
    info = ait.inspect(pipe, [torch.randn(8) for _ in range(3)], number_of_iterations=3, warmup_iterations=1)
    by_name = {m.name: m for m in info.get_modules()}
    assert set(by_name) == {"encoder", "head"}
    enc = by_name["encoder"]
    assert isinstance(enc, ModuleInfo)
    assert enc.module_type is Encoder and enc.module is pipe.encoder
    assert enc.forward_called and enc.execution_count == 3
    assert enc.total_execution_time > 0
    assert enc.average_execution_time == pytest.approx(enc.total_execution_time / 3)
    assert enc.num_parameters == sum(p.numel() for p in pipe.encoder.parameters())
    assert enc.num_layers == 2  # direct children: the ModuleList and the LayerNorm
    assert enc.precisions == {torch.float32} and by_name["head"].precisions == {torch.float16}
    assert enc.object_path == "encoder" and enc.parent is None and enc.depth == 1
    assert enc.input_types == [{"args": ["Tensor"], "kwargs": {}}] * 3
    assert enc.output_types == [{"type": "tuple", "elements": ["Tensor", "Tensor"]}] * 3


def test_module_info_constructed_as_aitune_does():
    model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
    info = ModuleInfo(
        name="test_module",
        module=model,
        parent=None,
        forward_called=False,
        execution_count=0,
        total_execution_time=0.0,
        output_types=[],
    )
    assert info.module_type is nn.Sequential and info.average_execution_time == 0.0
    assert info.num_layers == 3 and info.num_parameters == 325 and torch.float32 in info.precisions
    info.execution_count, info.total_execution_time = 2, 4.0
    assert info.average_execution_time == pytest.approx(2.0)
    info.output_types.append({"type": "Tensor", "shape": [1, 5]})
    assert info.output_types == [{"type": "Tensor", "shape": [1, 5]}]


INSPECT_SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import aitune.torch.jit.enable_inspection as inspection

    class TinyResNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 4, 3)
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(self.stem(x).mean((2, 3)))

    model = TinyResNet().eval()
    with torch.no_grad():
        for batch in (2, 3):
            model(torch.randn(batch, 3, 8, 8))
    if len(sys.argv) > 1:
        inspection.save_report(sys.argv[1], "ResNet")
""")


def test_jit_inspection_page_names_the_model(tmp_path):
    script = tmp_path / "inspect_model.py"
    script.write_text(INSPECT_SCRIPT)
    env_path = str(Path(ait.__file__).resolve().parents[2])
    run = [sys.executable, str(script)]
    env = {"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin", "AITUNE_CACHE_DIR": str(tmp_path / "cache")}
    requested = tmp_path / "inspect_resnet.html"
    subprocess.run(run + [str(requested)], cwd=tmp_path, env=env, check=True, timeout=300)
    page = requested.read_text()
    assert "<!DOCTYPE html>" in page and "Model: ResNet" in page and "AITune Model Inspector" in page
    assert "Call Count" in page and "Execution Details" in page
    # Without a name, the report written at exit names the class of the inspected model.
    subprocess.run(run, cwd=tmp_path, env=env, check=True, timeout=300)
    (at_exit,) = tmp_path.glob("jit_inspect_*.html")
    assert "Model: TinyResNet" in at_exit.read_text()


class Nested(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(10, 10)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.linear(x))


@pytest.mark.parametrize("through_forward", [False, True])
def test_inspect_lists_the_root_module_first(through_forward):
    """AITune counts a forward however it is reached: `model(x)` or, from an inference function,
    `model.forward(x)` (AITune's own inspect test calls the latter)."""
    model = Nested()

    def inference_function(x):
        return model.forward(x) if through_forward else model(x)

    info = ait.inspect(model, torch.randn(10, 10), inference_function=inference_function, number_of_iterations=4)
    modules = info.get_modules()
    assert modules[0].module is model and modules[0].depth == 0
    assert modules[0].forward_called and modules[0].execution_count == 4
    assert [m.module for m in modules] == [model]  # its children ran inside it
    # the timing wrappers are gone: the class forward serves again
    assert all("forward" not in m.__dict__ for m in model.modules())


def test_inspect_of_a_submodule_reports_that_submodule():
    model = Nested()
    modules = ait.inspect(model.linear, torch.randn(10, 10), number_of_iterations=3).get_modules()
    assert modules[0].module is model.linear and modules[0].execution_count == 3
