"""ait.inspect / ait.wrap on a small CPU pipeline (docs/reference/api.md#top-level-names)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import aitune.torch as ait
from aitune.exceptions import AITuneUserInputError
from aitune.torch import module_registry
from aitune.torch.module.state import ModuleState

COLUMNS = [
    "Module Name",
    "Calls",
    "Total Time (s)",
    "Avg Time (s)",
    "% of Total",
    "# of params",
    "# of layers",
    "precisions",
]


class TextEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.norm(x)


class Pipeline:
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.text_encoder = TextEncoder().eval()
        self.heads = [nn.Linear(8, 4).eval(), nn.Linear(8, 4).eval()]
        self.blocks = {"proj": nn.Linear(4, 4).eval(), "unused": nn.Linear(4, 4).eval()}
        self.config = {"name": "demo", "steps": 2}
        self.never_called = nn.Sequential(nn.Linear(2, 2))

    def __call__(self, x):
        h = self.text_encoder(x)
        a = self.heads[0](h)
        b = self.heads[1](h)
        # proj runs twice per call
        return self.blocks["proj"](self.blocks["proj"](a + b))


def _dataset(n=3):
    torch.manual_seed(1)
    return [torch.randn(8) for _ in range(n)]


def _hooks(module: nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in module.modules())


def _all_modules(pipe: Pipeline) -> list[nn.Module]:
    return [pipe.text_encoder, *pipe.heads, *pipe.blocks.values(), pipe.never_called]


def test_inspect_finds_topmost_executed_modules(capsys):
    pipe = Pipeline()
    info = ait.inspect(pipe, _dataset(), number_of_iterations=4, warmup_iterations=2)
    names = {m.name for m in info.modules}
    assert names == {"text_encoder", "heads[0]", "heads[1]", "blocks['proj']"}
    by_name = {m.name: m for m in info.modules}
    assert by_name["text_encoder"].calls == 4
    assert by_name["heads[1]"].calls == 4
    assert by_name["blocks['proj']"].calls == 8
    for m in info.modules:
        assert m.total_time > 0
        assert m.avg_time == pytest.approx(m.total_time / m.calls)
    assert sum(m.percentage for m in info.modules) == pytest.approx(100.0)
    enc = by_name["text_encoder"]
    assert enc.num_params == sum(p.numel() for p in pipe.text_encoder.parameters())
    assert enc.num_layers == 2  # its direct children, as AITune counts: the ModuleList and the LayerNorm
    assert enc.precisions == {torch.float32} and enc.precision_names == ["float32"]

    info.describe()
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "Module Name" in line)
    assert [c.strip() for c in header.strip("│").split("│")] == COLUMNS
    assert "╒" in out and "blocks['proj']" in out
    for module in _all_modules(pipe):
        assert _hooks(module) == 0


def test_get_modules_order_ratio_limit():
    pipe = Pipeline()
    info = ait.inspect(pipe, _dataset(), number_of_iterations=3, warmup_iterations=1)
    ordered = info.get_modules()
    times = [m.total_time for m in ordered]
    assert times == sorted(times, reverse=True)
    assert len(ordered) == 4
    assert [m.name for m in info.get_modules(limit=2)] == [m.name for m in ordered[:2]]
    threshold = ordered[1].execution_ratio
    kept = info.get_modules(min_execution_ratio=threshold)
    assert all(m.execution_ratio >= threshold for m in kept) and ordered[0] in kept and ordered[1] in kept
    assert info.get_modules(limit=0) == []
    with pytest.raises(AITuneUserInputError):
        info.get_modules(min_execution_ratio=5)


def test_inspect_with_inference_function_and_min_depth():
    model = TextEncoder().eval()
    calls = []

    def run(x):
        calls.append(x.shape)
        return model(x)

    info = ait.inspect(model, _dataset(2), inference_function=run, number_of_iterations=3, warmup_iterations=2)
    assert [m.name for m in info.modules] == ["TextEncoder"]
    assert info.modules[0].calls == 3
    assert len(calls) == 5 and calls[0] == torch.Size([1, 8])  # batch size 1

    # Skipping the root exposes its executed children.
    info = ait.inspect(model, _dataset(2), number_of_iterations=2, warmup_iterations=0, min_depth=1)
    assert {m.name for m in info.modules} == {"layers[0]", "layers[1]", "norm"}


def test_hooks_removed_when_inference_raises():
    pipe = Pipeline()

    def boom(x):
        pipe(x)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        ait.inspect(pipe, _dataset(), inference_function=boom, number_of_iterations=2, warmup_iterations=1)
    for module in _all_modules(pipe):
        assert _hooks(module) == 0

    def fails_inside(x):
        pipe.text_encoder(x.view(1, 2, 4))  # shape error inside a hooked forward

    with pytest.raises(RuntimeError):
        ait.inspect(pipe, _dataset(), inference_function=fails_inside)
    for module in _all_modules(pipe):
        assert _hooks(module) == 0


def test_inspect_not_callable_and_traversal_errors(monkeypatch):
    class Holder:
        def __init__(self):
            self.model = nn.Linear(8, 8)

    with pytest.raises(AITuneUserInputError, match="inference_function"):
        ait.inspect(Holder(), _dataset())

    class BadMapping(dict):
        def items(self):
            raise KeyError("bad")

    holder = Holder()
    holder.extra = BadMapping(x=nn.Linear(8, 8))
    info = ait.inspect(
        holder, _dataset(), inference_function=lambda x: holder.model(x), number_of_iterations=1, warmup_iterations=0
    )
    assert [m.name for m in info.modules] == ["model"]
    monkeypatch.setenv("AITUNE_INSPECT_DEBUG", "1")
    monkeypatch.setenv("AITUNE_INSPECT_DEBUG_RAISE", "1")
    with pytest.raises(KeyError):
        ait.inspect(holder, _dataset(), inference_function=lambda x: holder.model(x), number_of_iterations=1)


def test_wrap_replaces_and_tunes(cpu_eager_strategy):
    pipe = Pipeline()
    data = _dataset()
    expected = [pipe(x.unsqueeze(0)) for x in data]
    info = ait.inspect(pipe, data, number_of_iterations=2, warmup_iterations=1)
    originals = {
        "text_encoder": pipe.text_encoder,
        "heads[0]": pipe.heads[0],
        "heads[1]": pipe.heads[1],
        "blocks['proj']": pipe.blocks["proj"],
    }
    module_registry.register("stale", ait.Module(nn.Linear(2, 2), name="stale"))

    out = ait.wrap(pipe, info.get_modules(), strategy=cpu_eager_strategy)
    assert out is pipe
    for wrapped in (pipe.text_encoder, pipe.heads[0], pipe.heads[1], pipe.blocks["proj"]):
        assert isinstance(wrapped, ait.Module)
    assert not isinstance(pipe.blocks["unused"], ait.Module)
    assert pipe.text_encoder.__wrapped__ is originals["text_encoder"]
    assert set(module_registry.MODULE_REGISTRY) == set(originals)
    with torch.no_grad():  # recording copies the inputs
        for x, y in zip(data, expected):
            torch.testing.assert_close(pipe(x.unsqueeze(0)), y)
    module_registry.clear()
    out = ait.wrap(pipe, info.get_modules(), strategy=cpu_eager_strategy)  # fresh proxies, nothing recorded
    assert set(module_registry.MODULE_REGISTRY) == set(originals)

    ait.tune(pipe, data, batch_sizes=[1, 2], device="cpu")
    for name, module in module_registry.MODULE_REGISTRY.items():
        assert module.state is ModuleState.TUNED, name
    with torch.no_grad():
        for x, y in zip(data, expected):
            torch.testing.assert_close(pipe(x.unsqueeze(0)), y)


def test_wrap_plain_modules_nested_and_errors():
    pipe = Pipeline()
    layer = pipe.text_encoder.layers[1]
    ait.wrap(pipe, [layer, pipe.blocks["unused"]])
    assert isinstance(pipe.text_encoder.layers[1], ait.Module)
    assert isinstance(pipe.blocks["unused"], ait.Module)
    assert list(module_registry.MODULE_REGISTRY) == ["text_encoder.layers[1]", "blocks['unused']"]
    with torch.no_grad():
        pipe(torch.randn(1, 8))  # still runs, through the proxy inside the ModuleList

    with pytest.raises(AITuneUserInputError, match="stranger"):
        stranger = nn.Linear(3, 3)
        handle = ait.inspect(stranger, [torch.randn(3)], number_of_iterations=1, warmup_iterations=0).modules[0]
        handle.name = "stranger"
        ait.wrap(pipe, [handle])
    with pytest.raises(AITuneUserInputError, match="Only torch modules"):
        ait.wrap(pipe, ["text_encoder"])
    with pytest.raises(ValueError, match="Only one of strategy or strategies"):
        ait.wrap(pipe, [pipe.heads[0]], strategy=object(), strategies=[object()])


def test_wrap_root_module_returns_ait_module():
    model = TextEncoder().eval()
    x = torch.randn(1, 8)
    expected = model(x)
    info = ait.inspect(model, [x[0]], number_of_iterations=1, warmup_iterations=0)
    wrapped = ait.wrap(model, info.get_modules())
    assert isinstance(wrapped, ait.Module) and wrapped.__wrapped__ is model
    assert list(module_registry.MODULE_REGISTRY) == ["TextEncoder"]
    with torch.no_grad():
        torch.testing.assert_close(wrapped(x), expected)
