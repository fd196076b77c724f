"""TorchInductorJitBackend (torch.compile) and TorchInductorAotBackend (torch.export + AOTInductor,
served by the native runner): configs, export shapes, real CPU builds
(docs/reference/backends.md#per-backend-behaviour).

The builds are real Inductor compiles (tens of seconds each on a small CPU machine), so models
are tiny and each compile is shared by as many checks as possible."""

from __future__ import annotations

import copy
import dataclasses
import logging

import pytest
import torch
from torch.export import Dim

import aitune.exceptions as errors
import aitune.torch as ait
from aitune._native import _C
from aitune.torch import BatchDim, DynamicDim
from aitune.torch.backend import (
    TorchInductorAotBackend,
    TorchInductorAotBackendConfig,
    TorchInductorJitBackend,
    TorchInductorJitBackendConfig,
)
from aitune.torch.backend.common.export_shapes import (
    USER_TYPE_ERROR,
    build_dynamic_shapes,
    prepare_export_sample,
    var_keyword_names,
)
from aitune.torch.backend.torch_inductor_aot.input_order import spec_paths
from aitune.torch.backend.torch_inductor_aot.torch_inductor_aot_backend import (
    PACKAGE_NAME,
    make_export_adapter,
)
from aitune.torch.backend.common.cuda_graphs import CudaGraphServing
from aitune.torch.backend.backend import saved_plan
from aitune.torch.config import config
from aitune.torch.module.state import ModuleState
from support import record_calls

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _strategy(backend):
    """OneBackendStrategy serving `backend` itself: no eager performance gate (a tiny CPU MLP
    may not beat eager) and no max-batch search (keeps the exported range the recorded one)."""
    strategy = ait.OneBackendStrategy(backend)
    for switch in ("enable_performance_validation", "enable_find_max_batch_size"):
        if hasattr(strategy, switch):
            getattr(strategy, switch)(False)
    return strategy


def _serve(runner, rebuild, inputs):
    """What the dispatcher does with a native runner: run, then rebuild (None: single tensor)."""
    outputs = runner.run(inputs)
    return outputs[0] if rebuild is None else rebuild(outputs)


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


def _dataset(n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(6, generator=g) for _ in range(n)]


def _record(model, calls, **module_kwargs):
    """Records (batch_size, args, kwargs) calls; returns the wrapped module and its graph 0."""
    m = record_calls(model, calls, **module_kwargs)
    return m, m.graph_specs[0]


# -- configs ----------------------------------------------------------------------------------------
def test_jit_config_validation():
    with pytest.raises(ValueError, match=r"^Invalid mode: 'fastest'"):
        TorchInductorJitBackendConfig(mode="fastest")
    with pytest.raises(ValueError, match=r"^Cannot specify both 'mode' and 'options'"):
        TorchInductorJitBackendConfig(mode="default", options={"max_autotune": True})
    for mode in ("reduce-overhead", "max-autotune"):
        with pytest.raises(ValueError, match="use_cuda_graphs=True cannot be combined with mode="):
            TorchInductorJitBackendConfig(mode=mode, use_cuda_graphs=True)
    with pytest.raises(ValueError, match="autocast_dtype"):
        TorchInductorJitBackendConfig(autocast_dtype="float16")
    for mode in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        TorchInductorJitBackendConfig(mode=mode)
    TorchInductorJitBackendConfig(mode="max-autotune-no-cudagraphs", use_cuda_graphs=True)
    TorchInductorJitBackendConfig(options={"max_autotune": True}, use_cuda_graphs=True)
    with pytest.raises(ValueError, match="inductor_configs must be a dict"):
        TorchInductorAotBackendConfig(inductor_configs=["max_autotune"])


def test_describe_key_and_flags():
    jit = TorchInductorJitBackend(TorchInductorJitBackendConfig(mode="max-autotune-no-cudagraphs"))
    assert jit.describe() == "TorchInductorJitBackend(mode='max-autotune-no-cudagraphs')"
    assert TorchInductorJitBackend().describe() == "TorchInductorJitBackend()"
    assert TorchInductorAotBackend().describe() == "TorchInductorAotBackend()"
    aot = TorchInductorAotBackend(TorchInductorAotBackendConfig(inductor_configs={"max_autotune": True}))
    assert aot.describe() == "TorchInductorAotBackend(inductor_configs={'max_autotune': True})"
    assert jit.key().startswith("TorchInductorJitBackend_") and len(jit.key().split("_")[-1]) == 64
    assert jit.key() != TorchInductorJitBackend().key()
    assert aot.key() == TorchInductorAotBackend(TorchInductorAotBackendConfig({"max_autotune": True})).key()
    assert jit.is_jit and not aot.is_jit
    assert jit.precision_class == "fp32" and aot.precision_class == "fp32"
    assert TorchInductorJitBackend(TorchInductorJitBackendConfig(autocast_enabled=True)).precision_class == "fp16"
    bf16 = TorchInductorJitBackendConfig(autocast_enabled=True, autocast_dtype=torch.bfloat16)
    assert TorchInductorJitBackend(bf16).precision_class == "bf16"
    assert TorchInductorJitBackendConfig.from_dict(bf16.to_dict()) == bf16
    assert jit.is_available() == (True, "") and aot.is_available() == (True, "")


# -- export shapes ----------------------------------------------------------------------------------
class Pair(torch.nn.Module):
    def forward(self, x, y):
        return x.flatten(1).sum(dim=-1) + y.reshape(x.shape[0], -1).sum(dim=-1)


def test_dynamic_shapes_share_one_batch_dim_and_auto_dims():
    # y stacks the batch twice (multiplier 2); x's last axis varies independently (a dim axis).
    calls = [(1, (torch.randn(1, 4, 5), torch.randn(2, 3)), {}), (3, (torch.randn(3, 4, 7), torch.randn(6, 3)), {})]
    m, graph = _record(Pair(), calls)
    assert graph.input_spec.tensors[0].spec.shape == ["batch0", 4, "dim2"]
    shapes = build_dynamic_shapes(graph)
    assert set(shapes) == {"x", "y"}
    batch = shapes["x"][0]
    assert isinstance(batch, Dim) and batch.__name__ == "batch" and (batch.min, batch.max) == (1, 3)
    assert shapes["x"][2] is Dim.AUTO and 1 not in shapes["x"]
    assert shapes["y"][0].root is batch and shapes["y"][0].__name__ == "2*batch"

    args, kwargs = prepare_export_sample(graph)
    assert [list(t.shape) for t in args] == [[2, 4, 5], [4, 3]] and kwargs == {}
    # torch.export accepts them, on the original forward through the adapter.
    exported = torch.export.export(make_export_adapter(m.module), args, kwargs, dynamic_shapes=shapes)
    x_val = next(n for n in exported.graph.nodes if n.name == "x").meta["val"]
    assert not isinstance(x_val.shape[0], int) and x_val.shape[1] == 4


def test_export_sample_widens_size_one_dynamic_axes():
    calls = [(1, (torch.randn(1, 1), torch.randn(1, 3)), {}), (3, (torch.randn(3, 6), torch.randn(3, 3)), {})]
    _, graph = _record(Pair(), calls)
    assert graph.input_spec.tensors[0].spec.shape == ["batch0", "dim1"]
    args, _ = prepare_export_sample(graph)
    assert [list(t.shape) for t in args] == [[2, 2], [2, 3]]
    # Fully static graphs export as recorded, with no dynamic shapes.
    _, static = _record(Pair(), [(4, (torch.randn(4, 1), torch.randn(4, 3)), {})])
    assert build_dynamic_shapes(static) is None
    assert [list(t.shape) for t in prepare_export_sample(static)[0]] == [[4, 1], [4, 3]]


def test_explicit_dims_are_named_and_shared():
    defs = {"x": (BatchDim("batch", 1, 8), DynamicDim("seq", 1, 16)), "y": (BatchDim("batch", 1, 8), 3)}
    _, graph = _record(Pair(), [(None, (torch.randn(1, 1), torch.randn(1, 3)), {})], dynamic_shapes=defs)
    shapes = build_dynamic_shapes(graph)
    batch, seq = shapes["x"][0], shapes["x"][1]
    assert shapes["y"] == {0: batch}
    assert (batch.__name__, batch.min, batch.max) == ("batch", 1, 8)
    assert (seq.__name__, seq.min, seq.max) == ("seq", 1, 16)
    args, _ = prepare_export_sample(graph)
    assert [list(t.shape) for t in args] == [[2, 2], [2, 3]]


class Variadic(torch.nn.Module):
    def forward(self, a, *xs, flag=True, **extra):
        out = a.sum(-1)
        for x in xs:
            out = out + x.sum(-1)
        for key in sorted(extra):
            out = out + extra[key].sum(-1)
        return out


def test_varargs_and_var_keyword_export_and_input_order():
    """*args contents are exported positionally; **kwargs contents become keyword-only
    parameters of the traced forward (torch.export takes no dynamic shapes under **kwargs)."""

    def call(bs):
        return (
            bs,
            (torch.randn(bs, 2), torch.randn(bs, 3), torch.randn(bs, 4)),
            {"flag": False, "zz": torch.randn(bs, 5), "aa": torch.randn(bs, 6)},
        )

    m, graph = _record(Variadic(), [call(1), call(3)])
    paths = [t.semantic_path for t in graph.input_spec.tensors]
    assert paths == ["a", ("xs", 0), ("xs", 1), ("extra", "aa"), ("extra", "zz")]
    assert var_keyword_names(graph) == ["zz", "aa"]
    shapes = build_dynamic_shapes(graph)
    assert set(shapes) == {"a", "xs", "flag", "zz", "aa"} and shapes["flag"] is None
    args, kwargs = prepare_export_sample(graph)
    adapter = make_export_adapter(m.module, var_keyword_names=var_keyword_names(graph))
    exported = torch.export.export(adapter, args, kwargs, dynamic_shapes=shapes)
    backend = TorchInductorAotBackend()
    backend._in_paths = spec_paths(exported.call_spec.in_spec)
    order = backend.compute_input_order(graph)
    assert [paths[i] for i in order] == ["a", ("xs", 0), ("xs", 1), ("extra", "zz"), ("extra", "aa")]
    torch.testing.assert_close(exported.module()(*args, **kwargs), m.module._aitune_original_forward(*args, **kwargs))


@dataclasses.dataclass
class Request:
    image: torch.Tensor


class TakesRequest(torch.nn.Module):
    def forward(self, request):
        return request.image * 2


def test_dynamic_shapes_reject_dataclass_inputs():
    _, graph = _record(TakesRequest(), [(1, (Request(torch.randn(1, 3)),), {}), (2, (Request(torch.randn(2, 3)),), {})])
    with pytest.raises(ValueError, match=f"^{USER_TYPE_ERROR}$"):
        build_dynamic_shapes(graph)


# -- TorchInductorJitBackend ------------------------------------------------------------------------
def test_jit_backend_tunes_and_serves(aitune_log):
    model = _mlp()
    reference = copy.deepcopy(model)
    m = ait.Module(model, "mlp", strategy=_strategy(TorchInductorJitBackend()))
    ait.tune(m, _dataset(), batch_sizes=[1, 2], device="cpu")
    assert m.state is ModuleState.TUNED
    [(graph, backend)] = m.tuned_module.backends
    assert isinstance(backend, TorchInductorJitBackend)
    assert backend.compiled_dynamic is True  # dynamic=None and a batch axis
    for bs in (1, 2, 5):
        x = torch.randn(bs, 6)
        with torch.no_grad():
            torch.testing.assert_close(m(x), reference(x), atol=1e-5, rtol=1e-5)
    assert "recompiling the tuned forward" not in aitune_log.text  # warm-up covered batch 1 and >1

    # Deactivation drops the compiled function and Dynamo's caches; activation recompiles.
    backend.deactivate()
    assert backend._compiled is None
    backend.activate()
    x = torch.randn(3, 6)
    with torch.no_grad():
        torch.testing.assert_close(backend.infer(x), reference(x), atol=1e-5, rtol=1e-5)


def test_jit_backend_warns_once_on_recompile(aitune_log, tmp_path):
    """dynamic=False compiles one static graph per shape: a new shape after tuning recompiles,
    which logs one warning."""
    m, graph = _record(torch.nn.Linear(4, 2).eval(), [(1, (torch.randn(1, 4),), {})])
    backend = TorchInductorJitBackend(TorchInductorJitBackendConfig(dynamic=False))
    backend.build(m.module, graph, copy.deepcopy(graph.samples), "cpu", tmp_path / "build")
    assert backend.compiled_dynamic is False
    for bs in (3, 4):
        backend.infer(torch.randn(bs, 4))
    warnings = [r for r in aitune_log.records if "recompiling the tuned forward" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING


# -- TorchInductorAotBackend ------------------------------------------------------------------------
def test_aot_backend_tunes_and_serves_through_native_runner(aoti_loads):
    model = _mlp()
    reference = copy.deepcopy(model)
    m = ait.Module(model, "mlp", strategy=_strategy(TorchInductorAotBackend()))
    ait.tune(m, _dataset(), batch_sizes=[1, 2, 4], device="cpu")
    assert m.state is ModuleState.TUNED
    [(graph, backend)] = m.tuned_module.backends
    assert isinstance(backend, TorchInductorAotBackend)
    package = backend.package_path
    assert package.name == PACKAGE_NAME and package.is_file()
    assert package.parent == config.cache_dir / "mlp" / "0" / backend.key()
    for bs in (1, 2, 3, 4):
        x = torch.randn(bs, 6)
        with torch.no_grad():
            torch.testing.assert_close(m(x), reference(x), atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(model(x), reference(x), atol=1e-5, rtol=1e-5)

    plan = backend.serving_plan()
    runner, input_order, rebuild = plan.native, plan.input_order, plan.rebuild
    assert isinstance(runner, _C.AotiRunner) and isinstance(runner, _C.Runner)
    assert input_order == (0,) and runner.num_inputs == 1 and runner.device == "cpu"
    assert "model.pt2" in runner.describe()
    x = torch.randn(3, 6)
    outputs = runner.run([x])
    assert rebuild is None and len(outputs) == 1  # a single-tensor output is returned as is
    torch.testing.assert_close(outputs[0], reference(x), atol=1e-5, rtol=1e-5)
    assert backend.input_profile() == [([1, 6], [4, 6])]

    # A package on disk serves without the module (what loading a checkpoint does).
    loaded = TorchInductorAotBackend.restore(backend.config, {"package": package}, m.graph_specs[0], "cpu")
    torch.testing.assert_close(loaded.infer(x), reference(x), atol=1e-5, rtol=1e-5)
    with pytest.raises(errors.AITuneUserInputError, match="takes 1 input tensor"):
        runner.run([x, x])


def test_aot_runner_load_errors(tmp_path):
    with pytest.raises(errors.AITuneError, match="AOTInductor package not found"):
        _C.AotiRunner.load(str(tmp_path / "missing.pt2"), -1)
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"not a zip")
    with pytest.raises(errors.AITuneError, match="Failed to load AOTInductor package"):
        _C.AotiRunner.load(str(bad), -1)


class KeywordPair(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(4, 2)
        self.b = torch.nn.Linear(3, 2)

    def forward(self, x, y, scale=1.0):
        return {"sum": self.a(x) * scale + self.b(y), "y": y * 2}


def test_aot_input_order_for_keyword_call(tmp_path, aoti_loads):
    """forward(x, y) called as m(y=..., x=...): aitune binds to (x, y) before both orders."""
    torch.manual_seed(0)
    model = KeywordPair().eval()
    calls = [
        (1, (), {"y": torch.randn(1, 3), "x": torch.randn(1, 4), "scale": 2.0}),
        (2, (), {"y": torch.randn(2, 3), "x": torch.randn(2, 4), "scale": 2.0}),
    ]
    m, graph = _record(model, calls)
    assert [t.semantic_path for t in graph.input_spec.tensors] == ["x", "y"]
    backend = TorchInductorAotBackend()
    backend.build(m.module, graph, copy.deepcopy(graph.samples), "cpu", tmp_path / "build")
    plan = backend.serving_plan()
    runner, order, rebuild = plan.native, plan.input_order, plan.rebuild
    assert order == (0, 1)
    x, y = torch.randn(2, 4), torch.randn(2, 3)
    expected = m._self_original_forward(x, y, scale=2.0)
    leaves = [x, y]  # graph.input_spec.tensors order
    out = _serve(runner, rebuild, [leaves[i] for i in order])
    assert set(out) == {"sum", "y"}
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(backend.infer(y=y, x=x, scale=2.0), expected)
    torch.testing.assert_close(backend.infer(x, y, scale=2.0), expected)


class DictInput(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, inputs, bias):
        return self.proj(inputs["value"]) * inputs["gate"] + bias["b"]


def test_aot_input_order_for_dict_input(tmp_path, aoti_loads):
    """aitune visits dict keys sorted (bias.b, inputs.gate, inputs.value); torch.export in
    insertion order (value, gate, then bias.b)."""
    torch.manual_seed(0)
    model = DictInput().eval()

    def call(bs):
        return (bs, ({"value": torch.randn(bs, 4), "gate": torch.rand(bs, 1)}, {"b": torch.randn(4)}), {})

    m, graph = _record(model, [call(1), call(3)])
    paths = [t.semantic_path for t in graph.input_spec.tensors]
    assert paths == [("inputs", "gate"), ("inputs", "value"), ("bias", "b")]
    backend = TorchInductorAotBackend()
    backend.build(m.module, graph, copy.deepcopy(graph.samples), "cpu", tmp_path / "build")
    plan = backend.serving_plan()
    runner, order, rebuild = plan.native, plan.input_order, plan.rebuild
    assert [paths[i] for i in order] == [("inputs", "value"), ("inputs", "gate"), ("bias", "b")]
    inputs = {"gate": torch.rand(3, 1), "value": torch.randn(3, 4)}  # another insertion order
    bias = {"b": torch.randn(4)}
    expected = m._self_original_forward(inputs, bias)
    leaves = [inputs["gate"], inputs["value"], bias["b"]]
    torch.testing.assert_close(_serve(runner, rebuild, [leaves[i] for i in order]), expected)
    torch.testing.assert_close(backend.infer(inputs, bias=bias), expected)
    # With use_cuda_graphs the shared CUDA-graph runner wraps the AOTInductor runner itself (no
    # Python callable between them), in the package's input order; a checkpoint describes the
    # package's own plan, which the C++ runtime feeds (and wraps in CUDA graphs itself).
    backend.cuda_graphs.serving = CudaGraphServing(
        backend._infer, graph, settings=(1, True), native=backend._native_plan()
    )
    graphs = backend.serving_plan()
    assert isinstance(graphs.native, _C.CudaGraphRunner) and graphs.input_order == order
    assert repr(graphs.native) == f"CudaGraphRunner({runner.describe()})"
    torch.testing.assert_close(_serve(graphs.native, graphs.rebuild, [leaves[i] for i in order]), expected)
    torch.testing.assert_close(backend.infer(inputs, bias=bias), expected)
    saved = saved_plan(backend)
    assert saved.native is runner and saved.input_order == order and saved.rebuild is None


# -- CUDA -------------------------------------------------------------------------------------------
@pytest.mark.gpu
@cuda_only
def test_jit_backend_on_cuda():
    model = _mlp().cuda()  # recorded calls run the original module on the tuning device
    reference = copy.deepcopy(model)
    m = ait.Module(model, "mlp", strategy=_strategy(TorchInductorJitBackend()))
    ait.tune(m, _dataset(), batch_sizes=[1, 2], device="cuda:0")
    for bs in (1, 2, 5):
        x = torch.randn(bs, 6, device="cuda:0")
        with torch.no_grad():
            torch.testing.assert_close(m(x), reference(x), atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@cuda_only
def test_aot_backend_on_cuda(aoti_loads):
    model = _mlp().cuda()
    reference = copy.deepcopy(model)
    m = ait.Module(model, "mlp", strategy=_strategy(TorchInductorAotBackend()))
    ait.tune(m, _dataset(), batch_sizes=[1, 2, 4], device="cuda:0")
    [(_, backend)] = m.tuned_module.backends
    plan = backend.serving_plan()
    runner, rebuild = plan.native, plan.rebuild
    assert runner.is_cuda and runner.device == "cuda:0"
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream), torch.no_grad():  # runs on the caller's current stream
        for bs in (1, 3, 4):
            x = torch.randn(bs, 6, device="cuda:0")
            torch.testing.assert_close(m(x), reference(x), atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(_serve(runner, rebuild, [x]), reference(x), atol=1e-4, rtol=1e-4)
    stream.synchronize()
    with pytest.raises(errors.AITuneUserInputError, match="is on cpu"):
        runner.run([torch.randn(2, 6)])


def test_aot_backend_rejects_shapes_outside_the_exported_range(aoti_loads):
    model = _mlp()
    m = ait.Module(model, "ranged", strategy=_strategy(TorchInductorAotBackend()))
    ait.tune(m, _dataset(), batch_sizes=[1, 2, 4], device="cpu")
    [(graph, backend)] = m.tuned_module.backends
    name = graph.input_spec.tensors[0].access_path
    with torch.no_grad(), pytest.raises(errors.ProfileShapeError) as info:
        m(torch.randn(5, 6))
    assert str(info.value) == (
        f"Input shape [5, 6] exceeds max profile shape [4, 6] for input '{name}' (tensor 'input_{name}'; "
        f"profile min [1, 6], max [4, 6]) in module 'ranged', graph '0', backend TorchInductorAotBackend()"
    )
    assert isinstance(info.value, RuntimeError)
