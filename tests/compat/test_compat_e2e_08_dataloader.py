"""Scenario 8: tuning with AITune's dynamic-shape datasets (`MinMaxRandomDataset` of
`InputConfig`s through a `DataLoaderFactory`): every distinct shape is one batch, the recorded
graph has dynamic spatial axes and serves an unseen in-range shape."""

import torch

import aitune.torch as ait
from aitune.torch.dataloader import DataLoaderFactory, InputConfig, MinMaxRandomDataset, ensure_enough_samples
from aitune.torch.module.wrapper_module import ModuleState


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, image):
        return self.conv(image).mean((2, 3))


def test_tune_with_a_min_max_random_dataset(cpu_eager_strategy):
    torch.manual_seed(0)
    dataset = MinMaxRandomDataset(4, [InputConfig((3, 16, 16), (3, 32, 24), kwarg_name="image")])
    model = Net().eval()
    module = ait.Module(model, "dataloader-net", strategy=cpu_eager_strategy)
    ait.tune(module, DataLoaderFactory(dataset), batch_sizes=[1, 2], device="cpu")
    assert module.state == ModuleState.TUNED
    (graph,) = module.graph_specs
    (image,) = graph.input_spec.tensors
    assert list(image.spec.min_shape) == [1, 3, 16, 16] and list(image.spec.max_shape) == [2, 3, 32, 24]
    assert image.spec.axis_kinds[2:] == ["dim", "dim"]
    x = torch.randn(2, 3, 20, 20)
    with torch.no_grad():
        torch.testing.assert_close(module(image=x), model.conv(x).mean((2, 3)))


def test_inspect_with_ensure_enough_samples():
    model = Net().eval()
    dataset = ensure_enough_samples([{"image": torch.randn(3, 8, 8)}], 3)
    info = ait.inspect(model, dataset, number_of_iterations=3, warmup_iterations=0)
    assert info.get_modules()[0].execution_count == 3
