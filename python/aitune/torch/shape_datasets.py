"""Datasets whose items differ in shape (AITune's `aitune.torch.dataloader` names, docs/guide.md
"Coming from AITune"). Items of different shapes cannot be stacked into one batch, so for each
batch size every item is repeated to fill a batch of its own: one batch per distinct shape."""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import torch
from torch.utils.data import Dataset

from aitune.exceptions import InvalidValueError


@dataclasses.dataclass
class InputConfig:
    """One input of MinMaxRandomDataset: its shape range (per axis, inclusive), dtype, value
    range, and the keyword it is passed as (None: positional).

    >>> InputConfig(min_input=(3, 24, 24), kwarg_name="image").max_input
    (3, 24, 24)
    """

    min_input: Sequence[int]
    max_input: Sequence[int] | None = None
    dtype: torch.dtype = torch.float32
    kwarg_name: str | None = None
    min_value: int | float = 0
    max_value: int | float = 1

    def __post_init__(self) -> None:
        if self.max_input is None:
            self.max_input = self.min_input
        if len(self.min_input) != len(self.max_input) or any(lo > hi for lo, hi in zip(self.min_input, self.max_input)):
            raise InvalidValueError(
                f"InputConfig: min_input {tuple(self.min_input)} and max_input "
                f"{tuple(self.max_input)} must have the same rank and min <= max per axis"
            )


class DynamicShapeDataset(list, Dataset):
    """A list of items (tensors, or lists/dicts of them) of different shapes: each item becomes
    batches of its own, `batch_size` copies of it stacked."""


class MinMaxRandomDataset(DynamicShapeDataset):
    """`num_samples` random items drawn from `input_configs`; with `include_min_max_shapes` the
    first two are the min and max shapes, so the recorded range covers both ends."""

    def __init__(self, num_samples: int, input_configs: list[InputConfig], include_min_max_shapes: bool = True) -> None:
        minimum = 2 if include_min_max_shapes else 1
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < minimum:
            raise InvalidValueError(f"num_samples must be at least {minimum}, got {num_samples!r}")
        named = [cfg.kwarg_name is not None for cfg in input_configs]
        if any(named) and not all(named):
            raise InvalidValueError("All input configs must have either a kwarg_name or none")
        self.num_samples = num_samples
        self.input_configs = list(input_configs)
        self.include_min_max_shapes = include_min_max_shapes
        self.is_dict = all(named) and bool(named)
        items = [self._item(self._random) for _ in range(num_samples)]
        if include_min_max_shapes:
            items = [self._item(lambda cfg: cfg.min_input), self._item(lambda cfg: cfg.max_input), *items[:-2]]
        super().__init__(items)

    def _item(self, shape_of: Callable[[InputConfig], Sequence[int]]) -> dict[str, torch.Tensor] | list[torch.Tensor]:
        tensors = [
            torch.empty(tuple(shape_of(cfg)), dtype=cfg.dtype).uniform_(cfg.min_value, cfg.max_value)
            for cfg in self.input_configs
        ]
        if self.is_dict:
            return {cfg.kwarg_name: t for cfg, t in zip(self.input_configs, tensors)}
        return tensors

    @staticmethod
    def _random(cfg: InputConfig) -> list[int]:
        return [int(torch.randint(lo, hi + 1, ()).item()) for lo, hi in zip(cfg.min_input, cfg.max_input)]

    @property
    def samples(self) -> list[dict[str, torch.Tensor] | list[torch.Tensor]]:
        return list(self)


class RepeatEachItem(Dataset):
    """Presents each item of `dataset` `batch_size` times in a row, so every batch holds copies
    of one item (one shape)."""

    def __init__(self, dataset: Sequence[object], batch_size: int) -> None:
        self.dataset = dataset
        self.batch_size = batch_size

    def __len__(self) -> int:
        return len(self.dataset) * self.batch_size

    def __getitem__(self, index: int) -> object:
        return self.dataset[index // self.batch_size]
