"""The tier's own rules (conftest.py): it skips where its wheels cannot be had, except in CI or
when required, where it fails; and it refuses to judge an installed aitune that is not the
checkout's code."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REQUIRED_ENV, real_or_skip, stale_installed_files
from real_wheels import WheelMissing, WheelUnavailable


def _unreachable():
    raise WheelUnavailable("the package registry is unreachable: `pip download tensorrt-cu13-bindings` failed")


@pytest.mark.parametrize(
    "env, outcome",
    [
        ({}, "skip"),
        ({"CI": "true"}, "fail"),
        ({"CI": "true", REQUIRED_ENV: "0"}, "skip"),
        ({REQUIRED_ENV: "1"}, "fail"),
        ({"CI": "false"}, "skip"),
    ],
)
def test_unfetchable_wheels_skip_locally_and_fail_in_ci(monkeypatch, env, outcome):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(REQUIRED_ENV, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    expected = pytest.fail.Exception if outcome == "fail" else pytest.skip.Exception
    with pytest.raises(expected, match="registry is unreachable") as raised:
        real_or_skip(_unreachable)
    if outcome == "fail":
        assert "python tests/conformance/real_wheels.py" in str(raised.value)


def test_a_wheel_the_registry_lacks_always_fails(monkeypatch):
    monkeypatch.delenv("CI", raising=False)

    def missing():
        raise WheelMissing("the registry lists tensorrt-cu13-bindings but not 11.4.0.106")

    with pytest.raises(pytest.fail.Exception, match="not 11.4.0.106"):
        real_or_skip(missing)


def test_an_installed_copy_that_differs_from_the_checkout_is_named(tmp_path):
    checkout, installed = tmp_path / "checkout", tmp_path / "installed"
    for root in (checkout, installed):
        (root / "torch" / "backend" / "tensorrt").mkdir(parents=True)
        (root / "torch" / "backend" / "common").mkdir(parents=True)
        (root / "torch" / "backend" / "tensorrt" / "builder.py").write_text("A = 1\n")
        (root / "torch" / "backend" / "common" / "torch_tensorrt_config.py").write_text("B = 1\n")
    assert stale_installed_files(checkout, installed) == []
    (checkout / "torch" / "backend" / "tensorrt" / "builder.py").write_text("A = 2\n")
    (checkout / "torch" / "backend" / "tensorrt" / "cuda_ops.py").write_text("C = 1\n")
    assert stale_installed_files(checkout, installed) == [
        str(Path("torch/backend/tensorrt/builder.py")),
        str(Path("torch/backend/tensorrt/cuda_ops.py")),
    ]
