"""The real Torch-TensorRT 2.11 (its pure-Python validation, imported in the sandbox of
torch_tensorrt_sandbox.py) judges aitune's Torch-TensorRT backends and the fake of tests/fakes:

* every call the unit tests make through the fake (CompilationSettings, Input, dynamo.compile,
  save, the torch.compile options) is replayed against the real library and must pass its checks;
* the fake CompilationSettings and aitune's stand-in have the real fields and defaults;
* every probe the real library refuses, the fake refuses with the same exception type.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import fake_torch_tensorrt
import fake_torch_tensorrt_checks as checks
import pytest
import torch
from conftest import real_or_skip
from fake_torch_tensorrt_journal import ENV as JOURNAL_ENV
from settings_normal_form import normal_form
from torch_tensorrt_probes import CUDA, PROBES, run_probes
from torch_tensorrt_sandbox import run_child

from aitune.torch.backend.common.torch_tensorrt_config import ENGINE_MODULE_CLASSES, CompilationSettingsStandIn

TESTS = Path(__file__).resolve().parent.parent
CALLS = {"CompilationSettings", "Input", "dynamo.compile", "save", "torch.compile"}


@pytest.fixture(scope="session")
def real_settings(installed_is_checkout) -> dict:
    return real_or_skip(lambda: run_child("settings"))


@pytest.mark.parametrize("settings_class", [fake_torch_tensorrt.FakeCompilationSettings, CompilationSettingsStandIn])
def test_the_settings_classes_have_the_real_fields_and_defaults(real_settings, settings_class):
    fields = [f.name for f in dataclasses.fields(settings_class)]
    assert fields == real_settings["fields"]
    ours = settings_class()
    differences = {
        name: (normal_form(getattr(ours, name)), real)
        for name, real in real_settings["defaults"].items()
        if name != "device" and normal_form(getattr(ours, name)) != real
    }  # the device is never stored
    assert not differences, f"{settings_class.__name__} defaults differ from the real ones (ours, real): {differences}"
    with pytest.raises(TypeError):
        settings_class(debug=True)  # refused like the real dataclass refuses it


def test_the_settings_aitune_passes_to_dynamo_compile_are_its_parameters(real_settings):
    """A setting dynamo.compile does not name goes to its **kwargs and is ignored there."""
    swallowed = set(real_settings["fields"]) - set(real_settings["compile_parameters"])
    assert swallowed == {"enable_cross_compile_for_windows"}, "re-check what aitune passes to dynamo.compile"
    assert swallowed <= set(checks.COMPILE_ONLY_PARAMETERS) | {"enable_cross_compile_for_windows"}


class FakeSide:
    """The probes' view of the fake (torch_tensorrt_probes.py)."""

    def __init__(self, folder: Path) -> None:
        self.trt = fake_torch_tensorrt.make_fake_torch_tensorrt()
        self.folder = folder
        self.ep = torch.export.export(torch.nn.Linear(3, 3), (torch.randn(2, 3),))
        self.Input = self.trt.Input

    def save(self, module=None, file_path=None, **kwargs) -> None:
        if module is None:
            module = self.ep.module()
            module._fake_exported_program = self.ep
        self.trt.save(module, str(self.folder / "probe.ep") if file_path is None else file_path, **kwargs)

    def compile(self, **kwargs) -> None:
        kwargs.setdefault("device", CUDA)
        self.trt.dynamo.compile(self.ep, **kwargs)

    def settings(self, **kwargs) -> None:
        self.trt.dynamo.CompilationSettings(**kwargs)

    def options(self, options: dict) -> None:
        checks.check_compile_options(options, fake_torch_tensorrt.SETTINGS_FIELDS)


def test_the_fake_refuses_whatever_the_real_library_refuses(real_settings, tmp_path):
    real = run_child("probe")
    fake = run_probes(FakeSide(tmp_path))
    assert set(real) == set(fake) == set(PROBES)
    too_permissive = {
        name: (fake[name], real[name]) for name in PROBES if real[name] != "ok" and fake[name] != real[name]
    }
    assert not too_permissive, f"the fake does not refuse as the real library does (fake, real): {too_permissive}"
    assert {name for name in PROBES if real[name] == "ok"} == {name for name in PROBES if fake[name] == "ok"}, (
        f"the fake refuses calls the real library takes: {[n for n in PROBES if real[n] == 'ok' != fake[n]]}"
    )


def test_every_call_the_unit_tests_make_passes_the_real_checks(real_settings, tmp_path):
    journal = tmp_path / "journal"
    journal.mkdir()
    # The unit tests of the Torch-TensorRT backends and the guide's snippet tests (tests/docs).
    files = sorted(str(p) for tier in ("unit", "docs") for p in (TESTS / tier).rglob("test_*torch_tensorrt*.py"))
    assert len(files) >= 2, files
    env = dict(os.environ, **{JOURNAL_ENV: str(journal)})
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not gpu", *files],
        cwd=TESTS,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    summary = [line for line in run.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert run.returncode == 0, (
        "the unit tests failed while recording:\n"
        + "\n".join(summary or run.stdout.splitlines()[-30:])
        + "\n"
        + run.stderr[-2000:]
    )
    results = run_child("replay", str(journal))
    seen = {r["call"] for r in results}
    assert CALLS <= seen, f"the unit tests recorded no {sorted(CALLS - seen)} call: the tier would judge nothing"
    failures = [r for r in results if not r["ok"]]
    listed = "\n".join(f"  {r['call']} from {r['test']}: {r['error']} ({r['where']})" for r in failures)
    assert not failures, f"{len(failures)} of {len(results)} calls fail the real Torch-TensorRT 2.11:\n{listed}"


def test_aitune_detects_the_pytorch_fallback_the_real_backend_returns(real_settings):
    """A failed engine build comes back from the real torch.compile backend as a graph without
    engine modules (pass_through_build_failures=False) or as the error (True); aitune counts engines
    by the real runtime classes' names, and the fake's engine module has the real name and module."""
    real = run_child("runtime")
    assert set(real["classes"]) == ENGINE_MODULE_CLASSES
    assert all(module.startswith("torch_tensorrt.dynamo.runtime") for module in real["classes"].values())
    fake_engine = fake_torch_tensorrt.FakeTorchTensorRTModule
    assert real["classes"][fake_engine.__name__] == fake_engine.__module__
    assert real["build_failure"] == {
        "False": "returned a GraphModule with 0 engine module(s)",
        "True": "raised the build error",
    }
