"""JIT tuning end to end in fresh processes (docs/reference/jit.md, docs/reference/tuning.md): started by
AUTOWRAPT_BOOTSTRAP=aitune_enable_jit_tuning, tuned with the Inductor JIT backend on CPU, reused
by a second process (asserted from the telemetry), reported in HTML at exit; the inspection
report; the exit diagnostics when nothing was found."""

from __future__ import annotations

import json
import re

from jit_helpers import run_jit_child

NET_SCRIPT = r"""
import json, sys, torch
from aitune.torch import jit_config
from aitune.torch.backend import TorchInductorJitBackend
from aitune.torch.tune_strategy import FirstWinsStrategy
from aitune.torch.jit.patched_module import get_patched

# The gate is off so the outcome does not depend on how Inductor compares with eager on this CPU.
jit_config.strategy = FirstWinsStrategy(backends=[TorchInductorJitBackend()]).enable_performance_validation(False)
jit_config.device = "cpu"

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(8, 16)
        self.l2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.l2(torch.tanh(self.l1(x)))

torch.manual_seed(0)
net = Net().eval()
x = torch.randn(2, 8)
with torch.no_grad():
    first = net(x)    # recorded, then tuned (TUNE_EAGER, min_samples=1)
    second = net(x)   # served by the tuned backend
    eager = Net.forward(net, x)  # the children are detached: plain eager
torch.testing.assert_close(first, eager)
torch.testing.assert_close(second, eager)
head = get_patched(net)
print("RESULT " + json.dumps({"state": head.state.name, "name": head.name,
                              "backend": head.tuned.backends[0][1].describe() if head.tuned else None,
                              "children_patched": [get_patched(m) is not None for m in (net.l1, net.l2)]}))
"""


def _result(log: str) -> dict:
    line = next(line for line in log.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def test_bootstrap_tunes_with_inductor_and_a_second_process_reuses_it(tmp_path):
    first_log, report = run_jit_child(NET_SCRIPT, tmp_path)
    result = _result(first_log)
    assert result == {
        "state": "TUNED",
        "name": "Net",
        "backend": "TorchInductorJitBackend()",
        "children_patched": [False, False],
    }, first_log
    assert "JIT tuning enabled" in first_log and "🧪 JIT: JIT tuning tuned 1 module(s):" in first_log
    data = json.loads(report.read_text())
    assert data["mode"] == "JIT" and data["config"]["jit"]["device"] == "cpu"
    (module,) = data["modules"]
    (graph,) = module["graphs"]
    assert module["name"] == "Net" and graph["selected_backend"] == "TorchInductorJitBackend()"
    assert [(b["backend"], b["success"]) for b in graph["builds"]] == [("TorchInductorJitBackend()", True)]
    html = report.with_suffix(".html").read_text()
    assert "TorchInductorJitBackend" in html and "Net" in html
    stored = list((tmp_path / "jit" / "results" / "Net").glob("*.ait"))
    assert len(stored) == 1
    builds = sorted(p.name for p in (tmp_path / "jit").iterdir() if p.name.startswith("__main__.Net-"))
    assert len(builds) == 1  # <qualified name>-<model fingerprint[:10]>

    second_log, report = run_jit_child(NET_SCRIPT, tmp_path)
    assert _result(second_log)["state"] == "TUNED"
    assert "♻️ Reusing tuning result for module `Net` graph `0`" in second_log
    data = json.loads(report.read_text())
    (graph,) = data["modules"][0]["graphs"]
    assert graph["builds"] == [], graph  # nothing was built in the second process
    rule = graph["selection_rule"]
    assert rule.startswith("reused stored tuning result") and str(stored[0]) in rule
    assert list((tmp_path / "jit" / "results" / "Net").glob("*.ait")) == stored


def test_bootstrap_with_no_module_explains_it_at_exit(tmp_path):
    log, report = run_jit_child("import torch\nprint('done')\n", tmp_path)
    assert "JIT tuning enabled" in log
    assert "JIT tuning found no modules" in log and "prepare_for_jit_tuning()" in log
    assert not report.exists()  # nothing tuned: no telemetry written


INSPECT_SCRIPT = r"""
import sys, torch
import aitune.torch.jit.enable_inspection as inspection

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x))

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Block()
        self.dec = Block()

    def forward(self, x, mask=None):
        return self.dec(self.enc(x)), {"mask": mask}

model = Model().eval()
with torch.no_grad():
    for batch in (1, 2, 3):
        model(torch.randn(batch, 4), mask=torch.ones(batch, dtype=torch.bool))
if len(sys.argv) > 1:
    inspection.save_report(sys.argv[1], "my-model")
"""


def test_inspection_report_at_exit_and_on_request(tmp_path):
    run_jit_child(INSPECT_SCRIPT, tmp_path, bootstrap=False)
    (page,) = tmp_path.glob("jit_inspect_*.html")
    html = page.read_text()
    for name in ("Model", "Model.enc", "Model.dec", "Model.enc.lin", "Model.dec.lin"):
        assert f">{name}</td>" in html, name
    row = re.search(r">Model\.enc</td><td>Block</td><td>INSPECTED</td><td class=num>(\d+)</td>", html)
    assert row and row.group(1) == "3"
    assert "Tensor[float32, 2d, cpu]" in html and "Tensor[bool, 1d, cpu]" in html  # argument types
    assert "tuple[" in html  # output type of Model
    assert "http://" not in html and "https://" not in html and "<script" not in html  # self-contained

    requested = tmp_path / "requested" / "inspect.html"
    for old in tmp_path.glob("jit_inspect_*.html"):
        old.unlink()
    run_jit_child(INSPECT_SCRIPT, tmp_path, str(requested), bootstrap=False)
    assert "aitune JIT inspection: my-model" in requested.read_text()
    assert not list(tmp_path.glob("jit_inspect_*.html"))  # save_report was called: no report at exit
