"""aitune.torch.dataloader's AITune names: InputConfig, MinMaxRandomDataset,
DynamicShapeDataset, SingleBatchDatasetWrapper, ensure_enough_samples, DatasetLike."""

import typing

import pytest
import torch

from aitune.torch.dataloader import (
    DataLoaderFactory,
    DatasetLike,
    DynamicShapeDataset,
    InputConfig,
    MinMaxRandomDataset,
    SingleBatchDatasetWrapper,
    ensure_enough_samples,
    samples_generator,
)


def test_input_config_defaults_max_to_min():
    config = InputConfig(min_input=(3, 24, 24), kwarg_name="input2", min_value=0, max_value=3)
    assert config.max_input == (3, 24, 24) and config.dtype is torch.float32
    with pytest.raises(ValueError, match="must have the same rank and min <= max"):
        InputConfig(min_input=(3, 48), max_input=(3, 24))


def test_min_max_random_dataset_covers_both_ends_and_batches_per_shape():
    torch.manual_seed(0)
    dataset = MinMaxRandomDataset(4, [InputConfig((3, 8, 8), (3, 12, 16), kwarg_name="image", min_value=-1)])
    shapes = [tuple(item["image"].shape) for item in dataset]
    assert shapes[:2] == [(3, 8, 8), (3, 12, 16)] and len(dataset) == 4
    assert all(8 <= s[1] <= 12 and 8 <= s[2] <= 16 for s in shapes)
    assert all(-1 <= float(item["image"].min()) and float(item["image"].max()) <= 1 for item in dataset)
    batches = [(bs, tuple(kw["image"].shape)) for bs, _, kw in samples_generator(DataLoaderFactory(dataset), [2])]
    assert batches == [(2, (2, *s)) for s in shapes]  # one batch per item, its copies stacked


def test_min_max_random_dataset_positional_and_validation():
    dataset = MinMaxRandomDataset(2, [InputConfig((4,), (6,)), InputConfig((2, 2), dtype=torch.float64)])
    assert isinstance(dataset[0], list) and dataset[1][0].shape == (6,) and dataset[1][1].dtype == torch.float64
    with pytest.raises(ValueError, match="num_samples must be at least 2"):
        MinMaxRandomDataset(1, [InputConfig((4,))])
    with pytest.raises(ValueError, match="either a kwarg_name or none"):
        MinMaxRandomDataset(2, [InputConfig((4,), kwarg_name="a"), InputConfig((4,))])


def test_dynamic_shape_dataset_one_batch_per_item_and_batch_size():
    dataset = DynamicShapeDataset([torch.randn(10, 10), torch.randn(20, 20)])
    seen = [(bs, tuple(args[0].shape)) for bs, args, _ in samples_generator(dataset, [4, 8])]
    assert seen == [(4, (4, 10, 10)), (4, (4, 20, 20)), (8, (8, 10, 10)), (8, (8, 20, 20))]


def test_single_batch_wrapper_and_ensure_enough_samples():
    wrapper = SingleBatchDatasetWrapper([10, 20], batch_size=5)
    assert len(wrapper) == 5 and [wrapper[i] for i in range(5)] == [10, 20, 10, 20, 10]
    assert ensure_enough_samples([1, 2, 3], 7) == [1, 2, 3, 1, 2, 3, 1]
    assert ensure_enough_samples(range(10), 3) == [0, 1, 2]
    assert ensure_enough_samples(iter([1, 2]), 5) == [1, 2, 1, 2, 1]
    (one, two) = ensure_enough_samples(torch.ones(2), 2)
    assert torch.equal(one, torch.ones(2)) and torch.equal(two, torch.ones(2))
    factory = DataLoaderFactory([torch.zeros(1)])
    assert ensure_enough_samples(factory, 3) is factory and len(factory.dataset) == 3
    with pytest.raises(ValueError, match="number_of_samples must be greater than 0"):
        ensure_enough_samples([1], 0)


def test_dataset_like_is_a_sequence_or_a_torch_dataset():
    assert set(typing.get_args(DatasetLike)) >= {torch.utils.data.Dataset}
