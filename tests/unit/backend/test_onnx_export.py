"""ONNX export shared by the TensorRT and ONNX Runtime backends (docs/reference/tensorrt.md#build-pipelines,
docs/reference/recording.md#binding-flattening-and-names names): both exporters, checked by running the exported model
in ONNX Runtime (CPU) against eager."""

from __future__ import annotations

import pytest
import torch

from aitune.torch import BatchDim, DynamicDim
from aitune.torch.backend.common import onnx_export
from aitune.torch.backend.common.onnx_export import (
    DYNAMO_EXPORT_ADVICE,
    export_onnx,
    export_onnx_with_template,
    model_opset,
    onnx_input_name,
)
from aitune.torch.backend.common.serving_plan import OutputStructure
from support import record_calls

onnx = pytest.importorskip("onnx", reason="ONNX export needs the onnx package")
ort = pytest.importorskip("onnxruntime", reason="the exported models are checked in ONNX Runtime")
pytest.importorskip("onnxscript", reason="the dynamo ONNX exporter needs onnxscript")

BOTH_EXPORTERS = pytest.mark.parametrize("use_dynamo", [True, False], ids=["dynamo", "torchscript"])


def _record(model, calls, **module_kwargs):
    """Records (batch_size, args, kwargs) calls; returns the wrapped module and its graph 0."""
    m = record_calls(model, calls, **module_kwargs)
    return m, m.graph_specs[0]


def _run_onnx(info, tensors_by_leaf):
    """Runs the exported model in ONNX Runtime on the graph's tensor leaves (leaf order)."""
    session = ort.InferenceSession(str(info.path), providers=["CPUExecutionProvider"])
    feed = {name: tensors_by_leaf[i].numpy() for name, i in zip(info.input_names, info.input_leaf_indices)}
    assert {i.name for i in session.get_inputs()} == set(feed)
    return [torch.from_numpy(v) for v in session.run(info.output_names, feed)]


class Nested(torch.nn.Module):
    """Positional, nested dict/list and keyword inputs, a non-tensor keyword, an unused input,
    and a dict/tuple output."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(4, 3)

    def forward(self, x, opts, unused, *, mask=None, scale=1.0):
        y = self.proj(x) * scale + opts["bias"].sum(-1, keepdim=True)
        if mask is not None:
            y = y * mask
        return {"y": y, "pair": (x * 2, opts["pair"][1] + 1)}


def _nested_call(bs, n):
    g = torch.Generator().manual_seed(bs * 10 + n)
    opts = {
        "bias": torch.randn(bs, n, generator=g),
        "pair": [torch.randn(bs, 1, generator=g), torch.randn(bs, 2, generator=g)],
    }
    return (
        bs,
        (torch.randn(bs, 4, generator=g), opts, torch.randn(bs, 2, generator=g)),
        {"mask": torch.rand(bs, 3, generator=g), "scale": 2.0},
    )


def _leaves(call):
    _, (x, opts, unused), kwargs = call
    # graph.input_spec.tensors order: parameters in signature order, dict keys sorted
    return [x, opts["bias"], opts["pair"][0], opts["pair"][1], unused, kwargs["mask"]]


def test_input_names_follow_spec_table():
    assert onnx_input_name("x") == "input_x"
    assert onnx_input_name(("options", "mask")) == "input_options_mask"
    assert onnx_input_name('options["mask"]') == "input_options_mask"
    assert onnx_input_name(("items", 1)) == "input_items_1"
    assert onnx_input_name("items[1]") == "input_items_1"
    assert onnx_input_name("request.image") == "input_request_image"
    assert onnx_input_name(("args", 1)) == "input_args_1"


@BOTH_EXPORTERS
def test_nested_model_exports_and_matches_eager(tmp_path, use_dynamo):
    m, graph = _record(Nested(), [_nested_call(1, 5), _nested_call(3, 7)])
    assert [t.name for t in graph.input_spec.tensors] == [
        "input_x",
        "input_opts_bias",
        "input_opts_pair_0",
        "input_opts_pair_1",
        "input_unused",
        "input_mask",
    ]
    info, template = export_onnx_with_template(
        m.module, graph, graph.samples, tmp_path / "model.onnx", use_dynamo=use_dynamo
    )
    assert info.path == tmp_path / "model.onnx" and info.path.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]  # no staging folder, no .data
    # opts["pair"][0] and unused feed nothing: the TorchScript exporter drops them, dynamo keeps them.
    model_inputs = [i.name for i in onnx.load(str(info.path)).graph.input]
    assert info.input_names == model_inputs
    assert [graph.input_spec.tensors[i].name for i in info.input_leaf_indices] == info.input_names
    assert {"input_x", "input_opts_bias", "input_opts_pair_1", "input_mask"} <= set(info.input_names)
    if not use_dynamo:
        assert info.input_names == ["input_x", "input_opts_bias", "input_opts_pair_1", "input_mask"]
        assert info.input_leaf_indices == [0, 1, 3, 5]
    assert info.output_names == ["output_pair_0", "output_pair_1", "output_y"]
    assert info.output_names == [t.name for t in graph.output_spec.tensors]
    # Every input varies with the batch; opts["bias"] also along axis 1 (a dim axis).
    assert set(info.dynamic_axes["input_opts_bias"]) == {0, 1}
    assert set(info.dynamic_axes["input_x"]) == {0}

    # Within the recorded range and at shapes other than the export sample's.
    for bs, n in [(1, 5), (3, 6), (2, 7)]:
        call = _nested_call(bs, n)
        with torch.no_grad():
            expected = m.module._aitune_original_forward(*call[1], **call[2])
        outputs = _run_onnx(info, _leaves(call))
        rebuilt = OutputStructure.of(template).rebuild(outputs)
        assert set(rebuilt) == {"y", "pair"} and isinstance(rebuilt["pair"], tuple)
        torch.testing.assert_close(rebuilt, expected, rtol=1e-5, atol=1e-5)


def test_script_exporter_labels_axes_batch_dim_and_explicit_names(tmp_path):
    class Pair(torch.nn.Module):
        def forward(self, x, y):
            return x.sum(-1) + y.sum(-1)

    # Lattice labels: batch<i> for batch axes, dim<i> for other varying axes.
    calls = [(1, (torch.randn(1, 5), torch.randn(1, 2)), {}), (3, (torch.randn(3, 8), torch.randn(3, 2)), {})]
    m, graph = _record(Pair(), calls)
    info = export_onnx(m.module, graph, graph.samples, tmp_path / "lattice.onnx", use_dynamo=False)
    assert info.dynamic_axes == {"input_x": {0: "batch0", 1: "dim1"}, "input_y": {0: "batch0"}}

    # Explicit dims keep their names; a name shared by two inputs is one ONNX symbol.
    defs = {"x": (BatchDim("batch", 1, 8), DynamicDim("seq", 2, 16)), "y": (BatchDim("batch", 1, 8), 2)}
    m, graph = _record(Pair(), [(None, (torch.randn(2, 4), torch.randn(2, 2)), {})], dynamic_shapes=defs)
    for use_dynamo in (False, True):
        info = export_onnx(m.module, graph, graph.samples, tmp_path / f"named_{use_dynamo}.onnx", use_dynamo=use_dynamo)
        assert info.dynamic_axes == {"input_x": {0: "batch", 1: "seq"}, "input_y": {0: "batch"}}, use_dynamo
        x, y = torch.randn(5, 11), torch.randn(5, 2)
        (out,) = _run_onnx(info, [x, y])
        torch.testing.assert_close(out, x.sum(-1) + y.sum(-1))


@BOTH_EXPORTERS
def test_opset_version_is_honoured(tmp_path, use_dynamo):
    m, graph = _record(torch.nn.Linear(3, 2).eval(), [(2, (torch.randn(2, 3),), {})])
    info = export_onnx(m.module, graph, graph.samples, tmp_path / "m.onnx", use_dynamo=use_dynamo, opset_version=17)
    assert model_opset(info.path) == 17
    default = export_onnx(m.module, graph, graph.samples, tmp_path / "d.onnx", use_dynamo=use_dynamo)
    assert model_opset(default.path) >= 17
    assert info.dynamic_axes == {}  # one batch size recorded: static


@BOTH_EXPORTERS
def test_weights_above_threshold_go_to_one_data_file(tmp_path, monkeypatch, use_dynamo):
    monkeypatch.setattr(onnx_export, "EXTERNAL_DATA_THRESHOLD_BYTES", 0)
    model = torch.nn.Linear(64, 32).eval()
    m, graph = _record(model, [(1, (torch.randn(1, 64),), {}), (2, (torch.randn(2, 64),), {})])
    info = export_onnx(m.module, graph, graph.samples, tmp_path / "big.onnx", use_dynamo=use_dynamo)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.onnx", "big.onnx.data"]
    locations = {
        e.value
        for t in onnx.load(str(info.path), load_external_data=False).graph.initializer
        for e in t.external_data
        if e.key == "location"
    }
    assert locations == {"big.onnx.data"}
    x = torch.randn(3, 64)
    torch.testing.assert_close(_run_onnx(info, [x])[0], model(x).detach(), rtol=1e-5, atol=1e-5)


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # torch.export cannot trace a branch on tensor values
            return x * 2
        return x - 1


class Untraceable(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.inv(x)  # no TorchScript-exporter symbolic


def test_dynamo_failure_names_the_exporter_gives_advice_and_leaves_no_files(tmp_path):
    m, graph = _record(DataDependent(), [(1, (torch.ones(1, 3),), {}), (2, (torch.ones(2, 3),), {})])
    target = tmp_path / "out" / "model.onnx"
    target.parent.mkdir()
    target.write_text("stale")  # a previous export's leftovers are not kept either
    (target.parent / "model.onnx.data").write_text("stale")
    with pytest.raises(RuntimeError) as raised:
        export_onnx(m.module, graph, graph.samples, target, use_dynamo=True)
    message = str(raised.value)
    assert message.startswith(
        "ONNX export of graph '0' with the dynamo exporter (torch.onnx.export(dynamo=True)) failed: "
    )
    assert DYNAMO_EXPORT_ADVICE in message and "use_dynamo=False" in message
    assert list(target.parent.iterdir()) == []
    # The advice works: the TorchScript tracer records the branch taken by the sample.
    info = export_onnx(m.module, graph, graph.samples, target, use_dynamo=False)
    x = torch.ones(4, 3)
    torch.testing.assert_close(_run_onnx(info, [x])[0], x * 2)


def test_script_failure_names_the_exporter_and_leaves_no_files(tmp_path):
    m, graph = _record(Untraceable(), [(2, (torch.randn(2, 3, 3),), {})])
    target = tmp_path / "model.onnx"
    with pytest.raises(RuntimeError) as raised:
        export_onnx(m.module, graph, graph.samples, target, use_dynamo=False)
    message = str(raised.value)
    assert message.startswith(
        "ONNX export of graph '0' with the TorchScript exporter (torch.onnx.export(dynamo=False)) failed: "
    )
    assert "linalg_inv" in message and "use_dynamo=True" in message
    assert list(tmp_path.iterdir()) == []


def test_export_needs_a_sample_and_a_tensor_output(tmp_path):
    m, graph = _record(torch.nn.Linear(3, 2).eval(), [(2, (torch.randn(2, 3),), {})])
    with pytest.raises(ValueError, match="needs at least one recorded sample, got none"):
        export_onnx(m.module, graph, [], tmp_path / "m.onnx")

    class NoTensor(torch.nn.Module):
        def forward(self, x):
            return x.shape[0]

    m, graph = _record(NoTensor(), [(2, (torch.randn(2, 3),), {})])
    with pytest.raises(ValueError, match="the forward returns no tensor"):
        export_onnx(m.module, graph, graph.samples, tmp_path / "n.onnx")
    assert list(tmp_path.iterdir()) == []


def test_single_tensor_output_is_named_output_and_uses_original_forward(tmp_path):
    calls = [(1, (torch.randn(1, 3),), {}), (4, (torch.randn(4, 3),), {})]
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh()).eval()
    m, graph = _record(model, calls)
    info = export_onnx(m.module, graph, graph.samples, tmp_path / "m.onnx")
    assert info.output_names == ["output"] and info.input_names == ["input_input"]  # Sequential.forward(input)
    x = torch.randn(3, 3)
    torch.testing.assert_close(_run_onnx(info, [x])[0], model(x).detach(), rtol=1e-5, atol=1e-5)


class PassThrough(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)

    def forward(self, x, mask):
        y = self.proj(x)
        return {"y": y, "again": y, "mask": mask, "count": 5}


@BOTH_EXPORTERS
def test_repeated_and_pass_through_outputs_keep_their_own_names(tmp_path, use_dynamo):
    calls = [(bs, (torch.randn(bs, 4), torch.ones(bs, 2, dtype=torch.bool)), {}) for bs in (1, 3)]
    m, graph = _record(PassThrough().eval(), calls)
    info, template = export_onnx_with_template(
        m.module, graph, graph.samples, tmp_path / "m.onnx", use_dynamo=use_dynamo
    )
    assert info.output_names == ["output_again", "output_mask", "output_y"]
    x, mask = torch.randn(2, 4), torch.tensor([[True, False], [False, True]])
    outputs = _run_onnx(info, [x, mask])
    rebuilt = OutputStructure.of(template).rebuild(outputs)
    assert rebuilt["count"] == 5 and torch.equal(rebuilt["mask"], mask)
    expected = m.module.proj(x).detach()
    torch.testing.assert_close(rebuilt["y"], expected)
    torch.testing.assert_close(rebuilt["again"], expected)
