"""TorchAOBackend built for real on the CPU with torchao: int8 weight-only, int8 dynamic and fp8
weight-only (the presets torchao runs on a CPU), checked against eager, chosen by a profiling
strategy next to eager with its error in the results, saved without pickle and loaded again
(docs/reference/backends.md#torchao-torchaobackend, docs/reference/checkpoint.md#torchao-graphs).

Each build is a real torch.compile (mode="default": tens of seconds on a small CPU machine), so
the models are tiny and one build serves several checks. fp8 dynamic and the MX formats need a
GPU (tests/gpu/test_torchao_gpu.py)."""

from __future__ import annotations

import json
import zipfile

import pytest
import torch

import aitune.torch as ait
from aitune.exceptions import AITuneUserInputError, IncompatibleCheckpointError
from aitune.torch.backend import TorchAOBackend, TorchAOBackendConfig
from aitune.torch.backend.backend import sibling_key
from aitune.torch.backend.torchao import SelectedModules
from aitune.torch.backend.torchao.torchao_config import SAVED_STATE_KEY
from aitune.torch.tune_strategy import quantized_candidates
from aitune.torch.validation import NumericTolerance

pytest.importorskip("torchao", reason="torchao is not installed (pip install 'aitune[torchao]')")


class TwoLayer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(32)
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(self.norm(x))))


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return TwoLayer().eval()


def _dataset(n: int = 2) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randn(32, generator=g) for _ in range(n)]


def _rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


def _config(preset: str, **fields) -> TorchAOBackendConfig:
    return TorchAOBackendConfig(quantization=preset, mode="default", **fields)


@pytest.fixture(scope="module")
def tuned_int8wo(tmp_path_factory):
    """int8 weight-only of `up` only (a filter_fn), picked by MinLatencyStrategy next to eager,
    then saved. One compile serves the tests below."""
    from aitune.torch import module_registry
    from aitune.torch.config import config

    module_registry.clear()
    config.reset_to_defaults()
    config.cache_dir = tmp_path_factory.mktemp("cache")
    model = _model()
    x = torch.stack(_dataset())
    with torch.no_grad():
        eager = model(x)
    candidate = TorchAOBackend(_config("int8wo", filter_fn=lambda module, fqn: fqn == "up"))
    strategy = ait.MinLatencyStrategy(backends=[candidate]).enable_performance_validation(False)
    wrapped = ait.Module(model, "two", strategy=strategy)
    precision = torch.get_float32_matmul_precision()
    import torch._inductor.config as inductor_config

    coordinate_descent = inductor_config.coordinate_descent_tuning
    import torch._inductor.compile_fx as compile_fx_module

    real_compile_fx, compiles = compile_fx_module.compile_fx, []

    def watched_compile_fx(*args, **kwargs):  # the real compile, recording the settings it ran under
        # compile_fx with options applies them and calls itself again without: that call is the compile.
        if not kwargs.get("config_patches"):
            compiles.append(
                {
                    "coordinate_descent_tuning": inductor_config.coordinate_descent_tuning,
                    "float32_matmul_precision": torch.get_float32_matmul_precision(),
                }
            )
        return real_compile_fx(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compile_fx_module, "compile_fx", watched_compile_fx)
        ait.tune(wrapped, _dataset(), batch_sizes=[2], device="cpu")
    settings_after = (torch.get_float32_matmul_precision(), inductor_config.coordinate_descent_tuning)
    with torch.no_grad():
        tuned = wrapped(x)
    path = ait.save(wrapped, str(tmp_path_factory.mktemp("ckpt") / "two.ait"))
    yield {
        "wrapped": wrapped,
        "strategy": strategy,
        "eager": eager,
        "tuned": tuned,
        "x": x,
        "path": path,
        "settings": ((precision, coordinate_descent), settings_after),
        "compiles": compiles,
        "user_precision": precision,
    }
    module_registry.clear()
    config.reset_to_defaults()


def test_int8wo_quantizes_the_selected_linear_and_stays_close_to_eager(tuned_int8wo):
    backend = tuned_int8wo["wrapped"].tuned_module.backends[0][1]
    assert isinstance(backend, TorchAOBackend)
    assert backend.quantized_modules == ("up",)
    assert type(backend._quantized.up.weight).__name__ != "Parameter"  # a torchao tensor subclass
    assert type(backend._quantized.down.weight) is torch.nn.Parameter
    # The original module is untouched (the quantized copy shares it, it does not change it).
    original = tuned_int8wo["wrapped"].__wrapped__
    assert type(original.up.weight) is torch.nn.Parameter and original.up.weight.dtype == torch.float32
    assert backend._quantized.norm.weight is original.norm.weight  # shared, not copied
    error = _rel_l2(tuned_int8wo["tuned"], tuned_int8wo["eager"])
    assert 0 < error < 0.02, error  # int8 weights: not bit-exact, well inside the int8 class's 0.1


def test_torchaos_process_wide_settings_are_put_back_after_the_build(tuned_int8wo):
    """quantize_ sets torch.set_float32_matmul_precision("high") and Inductor options for its
    compile; the user's own settings come back once the build is done."""
    before, after = tuned_int8wo["settings"]
    assert after == before


def test_one_compile_with_torchaos_options_under_the_users_precision(tuned_int8wo):
    """The build compiles once: under the user's float32 precision (a graph compiled under
    torchao's "high" failed Dynamo's guard once it was put back, and every quantized candidate was
    compiled twice), with the Inductor options quantize_ set given to the compile itself."""
    compiles = tuned_int8wo["compiles"]
    assert len(compiles) == 1, compiles
    assert compiles[0]["float32_matmul_precision"] == tuned_int8wo["user_precision"]
    assert compiles[0]["coordinate_descent_tuning"] is True
    backend = tuned_int8wo["wrapped"].tuned_module.backends[0][1]
    assert backend.compile_options.get("coordinate_descent_tuning") is True
    assert "fx_graph_cache" not in backend.compile_options  # a cache policy stays the user's
    [result] = tuned_int8wo["strategy"].backend_results
    assert result["success"]


def test_the_strategy_reports_the_error_beside_the_speed(tuned_int8wo):
    [result] = tuned_int8wo["strategy"].backend_results
    assert result["success"] and result["latency"] > 0
    correctness = result["correctness"]
    assert correctness["precision_class"] == "int8" and correctness["passed"]
    assert 0 < correctness["rel_l2_error"] < 0.1
    assert tuned_int8wo["wrapped"].tuned_module.backends[0][1].validated_precision["precision_class"] == "int8"


def test_the_checkpoint_holds_no_pickle_and_records_the_quantized_digest(tuned_int8wo):
    with zipfile.ZipFile(tuned_int8wo["path"]) as archive:
        names = archive.namelist()
        manifest = json.loads(archive.read("manifest.json"))
        assert all(n == "manifest.json" or n.endswith((".safetensors", ".json")) for n in names), names
        for name in names:  # a pickle starts with the PROTO opcode; safetensors with a length, JSON with '{'
            assert not archive.read(name).startswith(b"\x80"), name
    backend = manifest["modules"][0]["graphs"][0]["backend"]
    assert backend["name"] == "torchao" and backend["is_jit"] and not backend["native"]
    assert backend["precision_class"] == "int8"
    assert backend["config"]["filter_fn"] == {"modules": ["up"]}
    record = backend["config"][SAVED_STATE_KEY]
    assert record["modules"] == 1 and record["scheme"] == "int8wo" and len(record["sha256"]) == 64
    assert manifest["modules"][0]["weights"] is not None  # the original weights: what loading quantizes


def test_load_quantizes_again_and_gives_the_same_outputs(tuned_int8wo):
    loaded = ait.load(_model(), tuned_int8wo["path"])
    backend = loaded.tuned_module.backends[0][1]
    assert isinstance(backend, TorchAOBackend)
    assert backend.config.filter_fn == SelectedModules(["up"])
    assert backend.quantized_digest().sha256 == backend.config.expected_quantized_state["sha256"]
    with torch.no_grad():
        again = loaded(tuned_int8wo["x"])
    torch.testing.assert_close(again, tuned_int8wo["tuned"], rtol=1e-5, atol=1e-6)


def test_load_refuses_weights_that_quantize_to_another_digest(tuned_int8wo, tmp_path):
    """The digest check runs before the compile: a differing result never serves."""
    saved = tuned_int8wo["wrapped"].tuned_module.backends[0][1].to_dict()["config"]
    saved[SAVED_STATE_KEY] = {**saved[SAVED_STATE_KEY], "sha256": "0" * 64}
    config = TorchAOBackendConfig.from_dict(saved)
    graph = tuned_int8wo["wrapped"].graph_specs[0]
    with pytest.raises(IncompatibleCheckpointError, match="torchao quantized weights: saved 0000000000000000"):
        TorchAOBackend(config).build(_model(), graph, list(graph.samples), "cpu", tmp_path)


@pytest.mark.parametrize("preset", ["int8dq", "fp8wo"])
def test_other_cpu_presets_build_and_stay_inside_their_class(preset, tmp_path):
    model = _model()
    x = torch.stack(_dataset())
    with torch.no_grad():
        eager = model(x)
    backend = TorchAOBackend(_config(preset))
    strategy = ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)
    wrapped = ait.Module(model, f"two-{preset}", strategy=strategy)
    ait.tune(wrapped, _dataset(), batch_sizes=[2], device="cpu")
    built = wrapped.tuned_module.backends[0][1]
    assert built.quantized_modules == ("down", "up")
    with torch.no_grad():
        error = _rel_l2(wrapped(x), eager)
    assert 0 < error < 0.1, error


def test_a_tolerance_of_your_own_rejects_a_quantized_candidate(aitune_log):
    """The int8 error of this model is a few 1e-3: a 1e-4 budget rejects the candidate, and the
    log says which bound and class decided."""
    backend = TorchAOBackend(_config("int8wo"), tolerance=NumericTolerance(1e-5, 1e-4, 1e-4, 0.0))
    strategy = ait.OneBackendStrategy(backend).enable_performance_validation(False).enable_find_max_batch_size(False)
    wrapped = ait.Module(_model(), "strict", strategy=strategy)
    ait.tune(wrapped, _dataset(), batch_sizes=[2], device="cpu")
    assert wrapped.tuned_module is None or not wrapped.tuned_module.backends
    assert "differs from eager reference on sample 0: rel_l2=" in aitune_log.text
    assert "(precision class int8;" in aitune_log.text


def test_use_cuda_graphs_needs_a_cuda_device(tmp_path):
    backend = TorchAOBackend(_config("int8wo", use_cuda_graphs=True))
    with pytest.raises(AITuneUserInputError, match="needs a CUDA device for use_cuda_graphs=True"):
        backend.build(_model(), None, [], "cpu", tmp_path)


def test_mx_formats_check_the_model_before_quantizing():
    backend = TorchAOBackend(TorchAOBackendConfig(quantization="nvfp4dq"))
    with pytest.raises(
        AITuneUserInputError, match=r"nvfp4dq for 'up': its weight is torch.float32; expected torch.bfloat16"
    ):
        backend._check_model_constraints(_model())
    odd = torch.nn.Sequential(torch.nn.Linear(32, 24)).to(torch.bfloat16)
    with pytest.raises(AITuneUserInputError, match=r"weight shape \(24, 32\) does not fit its blocks"):
        backend._check_model_constraints(odd)
    filtered = TorchAOBackend(TorchAOBackendConfig(quantization="nvfp4dq", filter_fn=lambda m, fqn: fqn == "nothing"))
    filtered._check_model_constraints(odd)  # the filter excludes it: nothing to check


def test_quantized_candidates_are_opt_in_and_follow_the_device():
    from aitune.torch.tune_strategy.default_backends import first_wins_defaults, profiling_defaults

    for device in (None, "cpu", "cuda"):
        for default in (first_wins_defaults(device), profiling_defaults(device)):
            assert not any(isinstance(b, TorchAOBackend) for b in default)
    cpu = quantized_candidates("cpu")
    assert [b.describe() for b in cpu] == [
        f"TorchAOBackend(mode=default,quantization={p})" for p in ("int8wo", "int8dq", "fp8wo", "fp8dq")
    ]
    cuda = quantized_candidates("cuda", presets=["int8wo"])
    assert [b.describe() for b in cuda] == [
        "TorchAOBackend(mode=max-autotune-no-cudagraphs,quantization=int8wo,use_cuda_graphs=True)",
        "TorchAOBackend(mode=max-autotune-no-cudagraphs,quantization=int8wo)",
    ]
    assert sibling_key(cuda[0]) == sibling_key(cuda[1])  # one build serves both
    with pytest.raises(ValueError, match="Unknown quantization preset"):
        quantized_candidates("cpu", presets=["int4"])


def test_the_cpp_runtime_reads_the_checkpoint_and_says_it_needs_python(tuned_int8wo):
    import subprocess

    from support import aitune_cli

    cli = aitune_cli()
    inspect = subprocess.run([cli, "inspect", str(tuned_int8wo["path"])], capture_output=True, text=True, timeout=60)
    assert inspect.returncode == 0, inspect.stderr
    assert "python-only" in inspect.stdout and "torchao" in inspect.stdout
    run = subprocess.run([cli, "run", str(tuned_int8wo["path"])], capture_output=True, text=True, timeout=60)
    assert run.returncode == 5, (run.stdout, run.stderr)
    assert "uses torchao, which needs Python (only AOT backends run in the C++ runtime)" in run.stderr
