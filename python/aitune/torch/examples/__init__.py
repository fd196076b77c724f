"""Built-in example models: no downloads, random weights, small enough for a CPU."""

from aitune.torch.examples.models import TinyConvNet, example_dataset

__all__ = ["TinyConvNet", "example_dataset"]
