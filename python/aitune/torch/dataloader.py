"""Turn a user dataset into batched calls for recording (docs/reference/tuning.md#the-tune-call step 4).

A dataset item is one **unbatched** sample. For every batch size, a
``torch.utils.data.DataLoader`` collates items into batches, and each batch is
turned into ``(batch_size, args, kwargs)`` for ``func(*args, **kwargs)``:

>>> dataset = [{"x": torch.zeros(3)} for _ in range(4)]
>>> [(bs, kwargs["x"].shape) for bs, _, kwargs in samples_generator(dataset, [2], 1)]
[(2, torch.Size([2, 3]))]
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Iterable, Mapping
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset


from aitune.exceptions import InvalidTypeError, InvalidValueError
from aitune.torch.shape_datasets import DynamicShapeDataset, InputConfig, MinMaxRandomDataset, RepeatEachItem

__all__ = [
    "DataLoaderFactory",
    "DatasetLike",
    "DynamicShapeDataset",
    "InputConfig",
    "MinMaxRandomDataset",
    "SingleBatchDatasetWrapper",
    "default_data_collator",
    "ensure_enough_samples",
    "samples_generator",
]

# What ait.tune and ait.inspect take as a dataset (AITune's name).
DatasetLike = Union[Sequence, Dataset]

_LABEL_KEYS = ("label", "label_ids")


def default_data_collator(
    items: Sequence[object],
) -> Union[List[object], Dict[str, object], Tuple[List[object], Dict[str, object]]]:
    """Collate unbatched items into one batch.

    * dict items -> dict collated per key; ``label``/``label_ids`` become ``labels``
      (the Hugging Face convention, so tokenised datasets feed models directly);
    * ``(args, kwargs)`` items, i.e. ``(list|tuple, Mapping)`` -> ``(args, kwargs)``;
    * other list/tuple items -> list collated per position (positional args);
    * a single tensor, array, number or string per item -> ``[collated]``, a
      one-element argument list, so that a batch of strings stays one argument.

    Per field: tensors are stacked on a new leading axis, numpy arrays become
    tensors, numbers and nested lists of numbers become a tensor, strings a list.
    """
    if len(items) == 0:
        raise InvalidValueError("Cannot collate an empty list of dataset items.")
    first = items[0]
    if isinstance(first, Mapping):
        return _collate_mapping(items, "item", rename_labels=True)
    if _is_args_kwargs(first):
        args = _collate_positions([item[0] for item in items], "args")
        kwargs = _collate_mapping([item[1] for item in items], "kwargs", rename_labels=True)
        return args, kwargs
    if isinstance(first, (list, tuple)):
        return _collate_positions(items, "item")
    return [_collate_field(items, "item")]


def _is_args_kwargs(value: object) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and isinstance(value[0], (list, tuple))
        and isinstance(value[1], Mapping)
    )


def _is_number(value: object) -> bool:
    return isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, (str, bytes))


def _is_numeric_nested(value: object) -> bool:
    """True for a number or a (nested) non-empty list/tuple of numbers, e.g. ``input_ids``."""
    if isinstance(value, (list, tuple)):
        return len(value) > 0 and all(_is_numeric_nested(v) for v in value)
    return _is_number(value)


def _collate_positions(items: Sequence[Sequence[object]], where: str) -> List[object]:
    length = len(items[0])
    if any(len(item) != length for item in items):
        raise InvalidValueError(f"Cannot collate {where}: items have different lengths.")
    return [_collate_field([item[i] for item in items], f"{where}[{i}]") for i in range(length)]


def _collate_mapping(items: Sequence[Mapping], where: str, rename_labels: bool = False) -> Dict[str, object]:
    batch: Dict[str, object] = {}
    for key in items[0]:
        try:
            values = [item[key] for item in items]
        except (KeyError, TypeError):
            raise InvalidValueError(f"Cannot collate {where}: key {key!r} is missing from some items.") from None
        if all(v is None for v in values):
            continue  # like the Hugging Face collator: an unset field is not passed at all
        out_key = "labels" if rename_labels and key in _LABEL_KEYS else key
        if out_key in batch:
            raise InvalidValueError(f"Cannot collate {where}: both {key!r} and 'labels' map to 'labels'.")
        batch[out_key] = _collate_field(values, f"{where}[{key!r}]")
    return batch


def _collate_field(values: Sequence[object], where: str) -> object:
    """Collate one field across items; ``where`` names it in errors."""
    first = values[0]
    try:
        if isinstance(first, torch.Tensor):
            return torch.stack(list(values))
        if isinstance(first, np.ndarray):
            return torch.from_numpy(np.stack(values))
        if isinstance(first, str):
            return list(values)
        if _is_numeric_nested(first):
            return torch.tensor(np.asarray(values)) if isinstance(first, np.generic) else torch.tensor(values)
        if isinstance(first, Mapping):
            return _collate_mapping(values, where)
        if isinstance(first, (list, tuple)):
            collated = _collate_positions(values, where)
            return tuple(collated) if isinstance(first, tuple) else collated
    except (RuntimeError, ValueError, TypeError) as error:  # ragged shapes, mixed types
        raise InvalidValueError(f"Cannot collate {where}: {error}") from error
    raise InvalidValueError(
        f"Cannot collate {where} of type {type(first).__name__}; the default collator supports tensors, "
        "numpy arrays, numbers, strings, dicts, lists and tuples. Pass collate_fn to DataLoaderFactory."
    )


class SingleBatchDatasetWrapper(Dataset):
    """Presents exactly ``batch_size`` items by cycling a shorter dataset (one full batch)."""

    def __init__(self, dataset: DatasetLike, batch_size: int) -> None:
        self.dataset = dataset
        self.batch_size = batch_size

    def __len__(self) -> int:
        return self.batch_size

    def __getitem__(self, index: int) -> object:
        return self.dataset[index % len(self.dataset)]


class DataLoaderFactory:
    """Creates a ``DataLoader`` per batch size, since tuning sweeps several.

    Args:
        dataset: Map-style dataset (list, ``torch.utils.data.Dataset``, HF dataset)
            or ``IterableDataset``; other iterables (e.g. generators) are
            materialised once, as they could not be replayed for each batch size.
        collate_fn: Batch builder; ``None`` means :func:`default_data_collator`.
        num_workers: Passed to the ``DataLoader``.
    """

    def __init__(self, dataset: object, collate_fn: Optional[Callable] = None, num_workers: int = 0) -> None:
        if not hasattr(dataset, "__getitem__") and not isinstance(dataset, IterableDataset):
            if not isinstance(dataset, Iterable):
                raise InvalidTypeError(f"Dataset of type {type(dataset).__name__} is not indexable or iterable.")
            dataset = list(dataset)
        self.dataset = dataset
        self.collate_fn = collate_fn or default_data_collator
        self.num_workers = num_workers

    def create(self, batch_size: int) -> DataLoader:
        """Return a ``DataLoader`` yielding full batches of ``batch_size`` items."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidValueError(f"Batch size must be an integer >= 1, got {batch_size!r}.")
        dataset = self.dataset
        if not isinstance(dataset, IterableDataset):
            size = len(dataset)
            if size == 0:
                raise InvalidValueError("Dataset is empty; tuning needs at least one sample.")
            if isinstance(dataset, DynamicShapeDataset):  # items differ in shape: one batch per item
                dataset = RepeatEachItem(dataset, batch_size)
            elif size < batch_size:
                dataset = SingleBatchDatasetWrapper(dataset, batch_size)
        return DataLoader(
            dataset,
            batch_size=batch_size,
            drop_last=True,
            collate_fn=self.collate_fn,
            num_workers=self.num_workers,
        )

    def create_dataloader(self, batch_size: int) -> DataLoader:
        """Reference name of :meth:`create`; subclasses may override either."""
        return self.create(batch_size)


def _to_call(batch: object) -> Tuple[Tuple[object, ...], Dict[str, object]]:
    """Map a collated batch to ``(args, kwargs)`` for ``func(*args, **kwargs)``."""
    if isinstance(batch, Mapping):
        return (), dict(batch)
    if _is_args_kwargs(batch):
        return tuple(batch[0]), dict(batch[1])
    if isinstance(batch, (list, tuple)):
        return tuple(batch), {}
    return (batch,), {}


def samples_generator(
    dataset: object,
    batch_sizes: Iterable[int],
    max_num_batches_per_batch_size: Optional[int] = None,
) -> Iterator[Tuple[int, Tuple[object, ...], Dict[str, object]]]:
    """Yield ``(batch_size, args, kwargs)`` for each batch of each batch size.

    A ``torch.Tensor`` dataset is a single unbatched sample; a
    :class:`DataLoaderFactory` is used as given; anything else is wrapped in one.
    At most ``max_num_batches_per_batch_size`` batches are drawn per batch size
    (``None``: all).
    """
    if max_num_batches_per_batch_size is not None and (
        isinstance(max_num_batches_per_batch_size, bool)
        or not isinstance(max_num_batches_per_batch_size, int)
        or max_num_batches_per_batch_size < 0
    ):
        raise InvalidValueError(
            f"max_num_batches_per_batch_size must be None or an integer >= 0, got {max_num_batches_per_batch_size!r}."
        )
    if isinstance(dataset, torch.Tensor):
        dataset = [dataset]
    factory = dataset if isinstance(dataset, DataLoaderFactory) else DataLoaderFactory(dataset)
    for batch_size in batch_sizes:
        batches = factory.create_dataloader(batch_size)
        for batch in itertools.islice(batches, max_num_batches_per_batch_size):
            args, kwargs = _to_call(batch)
            yield batch_size, args, kwargs


def ensure_enough_samples(dataset: object, number_of_samples: int) -> Union[List[object], DataLoaderFactory]:
    """A list of exactly ``number_of_samples`` items, cycling the dataset when it is shorter and
    trimming it when longer (a ``DataLoaderFactory`` keeps its settings and gets such a list). A
    ``torch.Tensor`` is one item."""
    if isinstance(number_of_samples, bool) or not isinstance(number_of_samples, int) or number_of_samples <= 0:
        raise InvalidValueError(f"number_of_samples must be greater than 0, got {number_of_samples!r}")
    if isinstance(dataset, DataLoaderFactory):
        dataset.dataset = ensure_enough_samples(dataset.dataset, number_of_samples)
        return dataset
    if isinstance(dataset, torch.Tensor):
        dataset = [dataset]
    if hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__"):
        if len(dataset) == 0:
            raise InvalidValueError("Dataset is empty; at least one sample is needed.")
        return [dataset[i % len(dataset)] for i in range(number_of_samples)]
    items = list(itertools.islice(iter(dataset), number_of_samples))
    if not items:
        raise InvalidValueError("Dataset is empty; at least one sample is needed.")
    return list(itertools.islice(itertools.cycle(items), number_of_samples))
