"""Behaviour of aitune.torch.dataloader (docs/reference/tuning.md#the-tune-call step 4)."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from aitune.exceptions import AITuneUserInputError
from aitune.torch.dataloader import DataLoaderFactory, default_data_collator, samples_generator


class _Indexed(Dataset):
    """Map-style dataset whose items carry their index, to observe order and repetition."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return torch.full((2,), float(i))


# -- collation -------------------------------------------------------------------


def test_collate_tensors_stack_on_new_axis():
    batch = default_data_collator([torch.zeros(3, 4), torch.ones(3, 4)])
    assert isinstance(batch, list) and len(batch) == 1
    assert batch[0].shape == (2, 3, 4)
    assert torch.equal(batch[0][1], torch.ones(3, 4))


def test_collate_numpy_arrays_become_tensors():
    batch = default_data_collator([np.zeros((2, 2), np.float32), np.ones((2, 2), np.float32)])
    assert isinstance(batch[0], torch.Tensor)
    assert batch[0].dtype == torch.float32 and batch[0].shape == (2, 2, 2)


def test_collate_strings_to_one_list_argument():
    assert default_data_collator(["a cat", "a dog"]) == [["a cat", "a dog"]]


def test_collate_dicts_per_key_with_labels_renamed():
    items = [
        {"x": torch.full((3,), float(i)), "mask": np.ones(3), "prompt": f"p{i}", "scale": 0.5 * i, "label": i}
        for i in range(2)
    ]
    batch = default_data_collator(items)
    assert set(batch) == {"x", "mask", "prompt", "scale", "labels"}
    assert batch["x"].shape == (2, 3) and torch.equal(batch["x"][1], torch.ones(3))
    assert isinstance(batch["mask"], torch.Tensor) and batch["mask"].shape == (2, 3)
    assert batch["prompt"] == ["p0", "p1"]
    assert torch.equal(batch["scale"], torch.tensor([0.0, 0.5]))
    assert batch["labels"].dtype == torch.long and batch["labels"].tolist() == [0, 1]


def test_collate_label_ids_and_token_lists():
    items = [{"input_ids": [1, 2, 3], "label_ids": [0, 1, 1]}, {"input_ids": [4, 5, 6], "label_ids": [1, 0, 0]}]
    batch = default_data_collator(items)
    assert batch["input_ids"].tolist() == [[1, 2, 3], [4, 5, 6]]
    assert batch["labels"].shape == (2, 3) and "label_ids" not in batch


def test_collate_drops_none_fields():
    batch = default_data_collator([{"x": torch.zeros(1), "label": None}] * 2)
    assert set(batch) == {"x"}


def test_collate_tuples_per_position():
    items = [(torch.zeros(2), "s0", 3), (torch.ones(2), "s1", 4)]
    first, strings, numbers = default_data_collator(items)
    assert first.shape == (2, 2)
    assert strings == ["s0", "s1"]
    assert numbers.tolist() == [3, 4]


def test_collate_args_kwargs_pairs():
    items = [([torch.zeros(2)], {"flag": torch.ones(1)}), ([torch.ones(2)], {"flag": torch.zeros(1)})]
    args, kwargs = default_data_collator(items)
    assert len(args) == 1 and args[0].shape == (2, 2)
    assert torch.equal(args[0][1], torch.ones(2))
    assert kwargs["flag"].shape == (2, 1)


def test_collate_nested_dict():
    items = [{"cond": {"emb": torch.zeros(4)}}, {"cond": {"emb": torch.ones(4)}}]
    assert default_data_collator(items)["cond"]["emb"].shape == (2, 4)


def test_collate_errors_name_the_field():
    with pytest.raises(AITuneUserInputError, match=r"item\['x'\]"):
        default_data_collator([{"x": torch.zeros(2)}, {"x": torch.zeros(3)}])
    with pytest.raises(AITuneUserInputError, match="object"):
        default_data_collator([object(), object()])
    with pytest.raises(AITuneUserInputError, match="missing"):
        default_data_collator([{"x": 1}, {"y": 1}])


# -- DataLoaderFactory -------------------------------------------------------------


def test_factory_creates_drop_last_loader_with_default_collator():
    loader = DataLoaderFactory(list(torch.zeros(5, 3))).create(2)
    assert isinstance(loader, DataLoader)
    assert loader.batch_size == 2 and loader.drop_last is True
    assert loader.collate_fn is default_data_collator
    assert [b[0].shape for b in loader] == [(2, 3), (2, 3)]  # the fifth item is dropped


def test_factory_uses_custom_collate_and_workers():
    def collate(items):
        return {"n": len(items)}

    factory = DataLoaderFactory([1, 2, 3, 4], collate_fn=collate, num_workers=0)
    assert [b for b in factory.create(2)] == [{"n": 2}, {"n": 2}]
    assert factory.create_dataloader(4).collate_fn is collate


def test_short_dataset_repeats_to_fill_one_batch():
    batches = list(DataLoaderFactory(_Indexed(3)).create(7))
    assert len(batches) == 1
    assert batches[0][0][:, 0].tolist() == [0, 1, 2, 0, 1, 2, 0]


def test_generator_dataset_is_materialised_for_every_batch_size():
    items = (torch.zeros(2) for _ in range(4))
    sizes = [bs for bs, _, _ in samples_generator(items, [2, 4])]
    assert sizes == [2, 2, 4]


@pytest.mark.parametrize("dataset, bs", [([], 1), ([torch.zeros(1)], 0)])
def test_factory_rejects_empty_dataset_and_bad_batch_size(dataset, bs):
    with pytest.raises(AITuneUserInputError):
        DataLoaderFactory(dataset).create(bs)


# -- samples_generator ---------------------------------------------------------------


def test_tensor_dataset_is_one_sample():
    sample = torch.randn(10, 10)
    out = list(samples_generator(sample, [1, 3]))
    assert [bs for bs, _, _ in out] == [1, 3]
    assert [args[0].shape for _, args, _ in out] == [(1, 10, 10), (3, 10, 10)]
    assert torch.equal(out[1][1][0][2], sample)
    assert all(kwargs == {} for _, _, kwargs in out)


def test_max_batches_per_batch_size():
    dataset = [torch.zeros(2) for _ in range(10)]
    assert [bs for bs, _, _ in samples_generator(dataset, [2, 4])] == [2] * 5 + [4] * 2
    assert [bs for bs, _, _ in samples_generator(dataset, [2, 4], 1)] == [2, 4]
    assert list(samples_generator(dataset, [2], 0)) == []
    with pytest.raises(AITuneUserInputError):
        list(samples_generator(dataset, [2], -1))


def test_mapping_batch_becomes_kwargs():
    dataset = [{"prompt": "hello", "x": torch.zeros(3)} for _ in range(4)]
    bs, args, kwargs = next(samples_generator(dataset, [4]))
    assert bs == 4 and args == ()
    assert kwargs["prompt"] == ["hello"] * 4 and kwargs["x"].shape == (4, 3)


def test_args_kwargs_batch_becomes_both():
    dataset = [([torch.zeros(2), torch.ones(5)], {"t": torch.ones(1)}) for _ in range(2)]
    _, args, kwargs = next(samples_generator(dataset, [2]))
    assert isinstance(args, tuple) and [a.shape for a in args] == [(2, 2), (2, 5)]
    assert set(kwargs) == {"t"} and kwargs["t"].shape == (2, 1)


def test_sequence_batch_becomes_args():
    dataset = [(torch.zeros(2), torch.ones(3)) for _ in range(2)]
    _, args, kwargs = next(samples_generator(dataset, [2]))
    assert isinstance(args, tuple) and [a.shape for a in args] == [(2, 2), (2, 3)]
    assert kwargs == {}


def test_positional_dict_argument_is_not_taken_as_kwargs():
    # (tensor, dict) is two positional args, not an (args, kwargs) pair.
    dataset = [(torch.zeros(2), {"k": torch.ones(1)}) for _ in range(2)]
    _, args, kwargs = next(samples_generator(dataset, [2]))
    assert kwargs == {} and len(args) == 2 and args[1]["k"].shape == (2, 1)


def test_single_tensor_batch_from_custom_collate_is_one_arg():
    factory = DataLoaderFactory([torch.zeros(3)] * 2, collate_fn=torch.stack)
    bs, args, kwargs = next(samples_generator(factory, [2]))
    assert len(args) == 1 and args[0].shape == (2, 3) and kwargs == {}


def test_factory_is_used_directly():
    calls = []

    class Recording(DataLoaderFactory):
        def create(self, batch_size):
            calls.append(batch_size)
            return super().create(batch_size)

    list(samples_generator(Recording([torch.zeros(1)] * 4), [1, 2], 1))
    assert calls == [1, 2]
