from __future__ import annotations

import torch


class TinyConvNet(torch.nn.Module):
    """An image classifier shaped like the ones users tune (conv stem, pooling, MLP head),
    sized to run in milliseconds on a CPU. Accepts any spatial size."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1),
            torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(),
            torch.nn.Conv2d(16, 32, 3, stride=2, padding=1),
            torch.nn.BatchNorm2d(32),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
        )
        self.head = torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, num_classes)
        )

    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002 - the seed guide's parameter name
        return self.head(self.features(input))


def example_dataset(num_samples: int = 8, size: int = 32, seed: int = 0) -> list[torch.Tensor]:
    """Unbatched images (3, size, size); ait.tune batches them."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(3, size, size, generator=generator) for _ in range(num_samples)]
