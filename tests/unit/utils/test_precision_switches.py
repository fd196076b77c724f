"""aitune's float32 reference and TorchAO's scope leave torch's precision switches exactly as found
(python/aitune/torch/utils/precision_switches.py). Before the fix, restoring the legacy
`set_float32_matmul_precision` value turned matmul's "none" into "ieee", a part of Inductor's
FX-graph cache key, so a second process reusing a tuning result missed torch's cache."""

from __future__ import annotations

import pytest
import torch

from aitune.torch.graph.graph_spec import Sample
from aitune.torch.task.precise_reference import PreciseRunner
from aitune.torch.utils import precision_switches
from aitune.torch.utils.precision_switches import ieee_fp32, preserved, tf32_allowed

needs_new_api = pytest.mark.skipif(
    not hasattr(torch.backends.cuda.matmul, "fp32_precision"), reason="torch < 2.9 has no per-backend fp32_precision"
)


def _state() -> dict[str, object]:
    """Every switch, read as torch reads them; a legacy read torch refuses reads as "refused"."""
    b = torch.backends

    def legacy(read):
        try:
            return read()
        except RuntimeError:
            return "refused"

    return {
        "legacy matmul": legacy(torch.get_float32_matmul_precision),
        "legacy matmul tf32": legacy(lambda: b.cuda.matmul.allow_tf32),
        "legacy cudnn tf32": legacy(lambda: b.cudnn.allow_tf32),
        "matmul": b.cuda.matmul.fp32_precision,
        "conv": b.cudnn.conv.fp32_precision,
        "rnn": b.cudnn.rnn.fp32_precision,
        "global": b.fp32_precision,
    }


@pytest.fixture(autouse=True)
def _untouched_afterwards():
    """Each test starts from torch's defaults and leaves them for the next."""
    saved = precision_switches.snapshot()
    yield
    precision_switches.restore(saved)


@needs_new_api
@pytest.mark.parametrize(
    "setup",
    [
        pytest.param(lambda: None, id="torch defaults"),
        pytest.param(lambda: torch.set_float32_matmul_precision("high"), id="legacy high"),
        pytest.param(lambda: setattr(torch.backends.cudnn, "allow_tf32", False), id="legacy cudnn off"),
        pytest.param(lambda: setattr(torch.backends.cuda.matmul, "fp32_precision", "tf32"), id="new matmul tf32"),
        pytest.param(
            lambda: setattr(torch.backends.cudnn.conv, "fp32_precision", "ieee"), id="new conv apart from rnn"
        ),
    ],
)
def test_ieee_fp32_puts_back_every_switch(setup):
    setup()
    before = _state()
    with ieee_fp32():
        assert torch.backends.cuda.matmul.fp32_precision == "ieee"
        assert torch.backends.cudnn.conv.fp32_precision == "ieee"
        assert not tf32_allowed()
    assert _state() == before


@needs_new_api
def test_a_legacy_setting_and_a_new_one_both_come_back():
    """torch keeps the legacy matmul precision beside matmul's fp32_precision: restoring only the
    latter left them disagreeing, and torch then refused every later TF32 read (seen: aitune's
    noise-bound tests failed after it)."""
    torch.set_float32_matmul_precision("high")
    torch.backends.cuda.matmul.fp32_precision = "none"  # the legacy state stays "high"
    before = _state()
    with ieee_fp32():
        pass
    assert _state() == before
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.fp32_precision = "none"
    with preserved():
        torch.set_float32_matmul_precision("high")
    assert torch.backends.cuda.matmul.allow_tf32 is False  # readable, and what it was


@needs_new_api
def test_the_default_matmul_none_survives_the_float32_reference():
    """The FX-graph cache's `cuda_matmul_settings` component reads this switch: it must read the
    same after aitune computed its float32 reference as before."""
    assert torch.backends.cuda.matmul.fp32_precision == "none"
    model = torch.nn.Linear(8, 4).half()
    out = PreciseRunner(model, model.forward)(
        Sample(args=(torch.randn(2, 8, dtype=torch.float16),), kwargs={}, batch_size=2)
    )
    assert out.dtype == torch.float32  # it did run in float32
    assert torch.backends.cuda.matmul.fp32_precision == "none"


@needs_new_api
def test_preserved_undoes_what_a_library_sets():
    """What torchao's quantize_ does (set_float32_matmul_precision("high")) is undone exactly."""
    before = _state()
    with preserved():
        torch.set_float32_matmul_precision("high")
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    assert _state() == before


@needs_new_api
def test_tf32_allowed_reads_the_new_api_when_the_legacy_read_refuses():
    torch.backends.cudnn.conv.fp32_precision = "tf32"
    torch.backends.cudnn.rnn.fp32_precision = "ieee"
    with pytest.raises(RuntimeError):
        _ = torch.backends.cudnn.allow_tf32  # torch refuses the legacy read of a mixed state
    assert tf32_allowed()
    torch.backends.cudnn.conv.fp32_precision = "ieee"
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    assert not tf32_allowed()
