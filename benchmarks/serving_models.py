"""The two models of benchmarks/serving_gpu.py, as factories the Dynamo workers import
(`--model serving_models:make_embedding`), with their tuning samples and request bodies.

- embedding: dynamo_scale's BenchEmbedder (token ids [batch, seq] -> normalized embeddings) at
  BERT-base size (vocabulary 30522, width 768, 12 layers, 128 tokens), or its small size;
- image: a ResNet-50 (torchvision's with random weights when installed, else jit_resnet50's
  equivalent; "tiny": jit_resnet50's [1,1,1,1] blocks) behind `PixelClassifier`, which takes
  uint8 pixels flattened to [batch, 3*S*S] and returns logits [batch, 1000]: the worker's batcher
  serves graphs of one batched tensor whose items come as lists of ints (docs/serving.md,
  "Requests"), so an image travels as its 3*S*S pixel values.

What to build comes from the environment (SERVING_MODELS_SIZE full|tiny, SERVING_MODELS_DTYPE,
SERVING_MODELS_IMAGE), so the benchmark and every worker build the same model; the weights are
seeded, since the JIT and eager backends serve the module's own weights."""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dynamo_scale import SIZES, BenchEmbedder  # noqa: E402
from jit_resnet50 import build_model  # noqa: E402

KINDS = ("embedding", "image")
EMBEDDER_SIZE = {"full": "bert-base", "tiny": "small"}
IMAGE_DEPTH = {"full": "resnet50", "tiny": "tiny"}


def settings() -> tuple[str, torch.dtype, int]:
    """(size, dtype, image side) from the environment; the benchmark sets it for its workers."""
    size = os.environ.get("SERVING_MODELS_SIZE", "full")
    dtype = getattr(torch, os.environ.get("SERVING_MODELS_DTYPE", "float16"))
    return size, dtype, int(os.environ.get("SERVING_MODELS_IMAGE", "224"))


class PixelClassifier(torch.nn.Module):
    """uint8 pixels [batch, 3*side*side] -> the classifier's logits, normalized on the device."""

    def __init__(self, classifier: torch.nn.Module, side: int) -> None:
        super().__init__()
        self.classifier = classifier
        self.side = side

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        weight = next(self.classifier.parameters())
        images = pixels.view(-1, 3, self.side, self.side).to(weight.dtype)
        return self.classifier((images * (1 / 255.0) - 0.45) * (1 / 0.225))


def make_embedding() -> torch.nn.Module:
    size, dtype, _ = settings()
    vocabulary, width, layers, _ = SIZES[EMBEDDER_SIZE[size]]
    torch.manual_seed(0)
    return BenchEmbedder(vocabulary, width, layers).to(dtype).eval()


def make_image() -> torch.nn.Module:
    size, dtype, side = settings()
    torch.manual_seed(0)
    classifier, _ = build_model(IMAGE_DEPTH[size])
    return PixelClassifier(classifier, side).to(dtype).eval()


FACTORIES = {"embedding": make_embedding, "image": make_image}


def output_dim(kind: str) -> int:
    """The width of one item's output: the embedder's, or the classifier's 1000 logits."""
    return SIZES[EMBEDDER_SIZE[settings()[0]]][1] if kind == "embedding" else 1000


def item_samples(kind: str, count: int, seed: int = 1) -> list[torch.Tensor]:
    """`count` single items (no batch axis) on the CPU, the tuning dataset and the direct call's input."""
    size, _, side = settings()
    g = torch.Generator().manual_seed(seed)
    if kind == "embedding":
        vocabulary, _, _, sequence = SIZES[EMBEDDER_SIZE[size]]
        return [torch.randint(0, vocabulary, (sequence,), generator=g) for _ in range(count)]
    return [torch.randint(0, 256, (3 * side * side,), generator=g, dtype=torch.uint8) for _ in range(count)]


def request_body(kind: str, model_name: str, payload: str = "json", encoding_format: str | None = None) -> bytes:
    """One item as an OpenAI embedding request: its values (token ids, or the image's pixels) as a
    JSON list of ints (`json`), or as raw little-endian bytes in a data URL (`raw`, docs/serving.md
    "Requests"); `encoding_format` ("float" or "base64", OpenAI's field for the response's vectors)
    is sent when given."""
    item = item_samples(kind, 1, seed=7)[0]
    if payload == "raw":
        value: object = "data:application/octet-stream;base64," + base64.b64encode(item.numpy().tobytes()).decode()
    else:
        value = item.tolist()
    body: dict[str, object] = {"model": model_name, "input": value}
    if encoding_format is not None:
        body["encoding_format"] = encoding_format
    return json.dumps(body).encode()
