"""One serving suite, two runtimes (docs/reference/dispatch.md#serving-plan): a checkpoint tuned with
TorchInductorAotBackend is served by the Python dispatcher (`ait.load`, then calls of the module) and
by the C++ `Runtime` (`_C.Runtime`, what `aitune run` and a C++ program use). Every case runs on
both and asserts the same outputs, output names and errors; the last compares the two error texts
directly, since both come from the one dispatch core (cpp/torch/dispatch/)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import aitune.torch as ait
from aitune import exceptions as errors
from aitune._native import _C
from aitune.torch.backend import TorchInductorAotBackend, TorchInductorAotBackendConfig
from aitune.torch.graph.locator import access_path

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


class TwoInTwoOut(torch.nn.Module):
    """Two named inputs and a nested output (a dict holding a tuple), so input order and the output
    rebuild both matter."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(6, 4)
        self.b = torch.nn.Linear(3, 4)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> dict:
        ax = self.a(x)
        return {"sum": ax + self.b(y), "parts": (ax, y * 2)}


OUTPUT_NAMES = {'output["parts"][0]', 'output["parts"][1]', 'output["sum"]'}


def _named(output) -> dict[str, torch.Tensor]:
    """An output object as (access path -> tensor), the C++ runtime's form."""
    _, leaves = _C.flatten_value(output)
    return {access_path(leaf.path, "output"): leaf.value for leaf in leaves if leaf.is_tensor}


def _tune_and_save(path: Path, device: str, use_cuda_graphs: bool = False) -> Path:
    backend = TorchInductorAotBackend(TorchInductorAotBackendConfig(use_cuda_graphs=use_cuda_graphs))
    strategy = ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)
    m = ait.Module(TwoInTwoOut().eval().to(device), "two", strategy=strategy)  # recording runs it on the device
    data = [(torch.randn(6), torch.randn(3)) for _ in range(4)]
    ait.tune(m, data, batch_sizes=[1, 2, 4], device=device)
    return ait.save(m, path)


class PythonRuntime:
    """ait.load: the Python dispatcher over the checkpoint's serving plans."""

    def __init__(self, path: Path) -> None:
        self.module = ait.load(TwoInTwoOut().eval(), path)

    def run(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return _named(self.module(x, y))


class CppRuntime:
    """The C++ Runtime over the same file; inputs keyed by name."""

    def __init__(self, path: Path, device_index: int = -1) -> None:
        self.runtime = _C.Runtime.load(str(path), device_index=device_index, cache_dir=str(path.parent / "cache"))
        self.module = self.runtime.module("two")

    def run(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
        return dict(self.module.run({"x": x, "y": y}))


RUNTIMES = {"python": PythonRuntime, "cpp": CppRuntime}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, aoti_loads) -> Path:
    return _tune_and_save(tmp_path_factory.mktemp("serving") / "two.ait", "cpu")


@pytest.fixture(params=sorted(RUNTIMES))
def runtime(request, checkpoint):
    return RUNTIMES[request.param](checkpoint)


def _reference(x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        return _named(TwoInTwoOut().eval()(x, y))


def test_both_runtimes_serve_the_eager_outputs_at_every_batch_size(runtime):
    for bs in (1, 2, 3, 4):
        x, y = torch.randn(bs, 6), torch.randn(bs, 3)
        outputs = runtime.run(x, y)
        assert set(outputs) == OUTPUT_NAMES
        for name, expected in _reference(x, y).items():
            torch.testing.assert_close(outputs[name], expected, atol=1e-5, rtol=1e-5)


def test_the_checkpoint_records_the_package_plan(checkpoint):
    graph = CppRuntime(checkpoint).module.graphs[0]
    assert graph["native"] and graph["backend_name"] == "torch_inductor_aot"
    assert sorted(graph["output_paths"]) == sorted(OUTPUT_NAMES)
    assert sorted(graph["input_order"]) == [0, 1]


def test_a_batch_outside_the_saved_range_is_refused_before_running(runtime):
    with pytest.raises(errors.ProfileShapeError, match=r"\b5\b"):
        runtime.run(torch.randn(5, 6), torch.randn(5, 3))


def test_a_wrong_dtype_is_refused(runtime):
    with pytest.raises(errors.ProfileShapeError, match="float64"):
        runtime.run(torch.randn(2, 6, dtype=torch.float64), torch.randn(2, 3))


def test_a_call_of_no_tuned_graph_is_refused(runtime):
    with pytest.raises(errors.GraphNotFoundError):
        runtime.run(torch.randn(2, 5, 6), torch.randn(2, 3))


def test_input_errors_are_worded_alike_by_both_runtimes(checkpoint):
    """The same text, but for how the backend is named at the end: Python shows its describe()
    (`TorchInductorAotBackend()`), the C++ runtime, which has no Python class, the stable name the
    manifest stores (`torch_inductor_aot()`)."""
    python, cpp = PythonRuntime(checkpoint), CppRuntime(checkpoint)
    for x, y in [
        (torch.randn(5, 6), torch.randn(5, 3)),
        (torch.randn(2, 6, dtype=torch.float64), torch.randn(2, 3)),
    ]:
        messages = []
        for runtime in (python, cpp):
            with pytest.raises(errors.ProfileShapeError) as info:
                runtime.run(x, y)
            messages.append(str(info.value))
        assert messages[0].endswith(", backend TorchInductorAotBackend()")
        assert messages[1].endswith(", backend torch_inductor_aot()")
        assert messages[0].rsplit(", backend ", 1)[0] == messages[1].rsplit(", backend ", 1)[0]


@pytest.mark.gpu
@cuda_only
def test_cuda_graphs_on_both_runtimes(tmp_path, aoti_loads):
    """AOTInductor + CUDA graphs: in Python the CUDA-graph runner wraps the AotiRunner itself (no
    Python callable between them), as the C++ runtime does; both capture and serve the same outputs."""
    path = _tune_and_save(tmp_path / "two_graphs.ait", "cuda:0", use_cuda_graphs=True)
    python, cpp = PythonRuntime(path), CppRuntime(path, device_index=0)
    [(_, backend)] = python.module.tuned_module.backends
    plan = backend.serving_plan()
    assert repr(plan.native).startswith("CudaGraphRunner(AotiRunner(")
    model = TwoInTwoOut().eval().cuda()
    for bs in (1, 3, 1):
        x, y = torch.randn(bs, 6, device="cuda:0"), torch.randn(bs, 3, device="cuda:0")
        with torch.no_grad():
            expected = _named(model(x, y))
        for runtime in (python, cpp):
            outputs = runtime.run(x, y)
            for name, tensor in expected.items():
                torch.testing.assert_close(outputs[name], tensor, atol=1e-4, rtol=1e-4)
    assert backend.cuda_graphs.stats()["captures"] >= 2 and backend.cuda_graphs.stats()["hits"] >= 1
    counters = cpp.module.cuda_graph_counters("0")
    assert counters is not None and counters["captures"] >= 2 and counters["hits"] >= 1
