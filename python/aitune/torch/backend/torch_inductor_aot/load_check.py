"""The load check of an AOTInductor package (docs/guide.md "Threat model"): before this process
loads a package's native library, a child process loads it the same way (aitune._C.AotiRunner)
and, when the graph is known, makes its first call on a stored sample (or zeros of the recorded
minimum shapes). A library that crashes or hangs when loaded or on its first call -- seen with
some compiler/libstdc++ combinations, and what a damaged `.so` with recomputed hashes does --
then costs the child, not the tuning or serving process: an error instead of a dead process or
a stall. The child is given `config.aoti_load_check_timeout_s` (AITUNE_AOTI_LOAD_CHECK_TIMEOUT_S,
default 120 s) and killed after it.

What it does not do: a hostile library runs its code in the child too, and one that behaves on
the first call may still misbehave on a later one, in this process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.utils._pytree as pytree
from safetensors.torch import load_file, save_file

from aitune._native import _C
from aitune.exceptions import CorruptCheckpointError
from aitune.torch.backend.torch_inductor_aot.global_libstdcxx import promote_libstdcxx
from aitune.torch.backend.torch_inductor_aot.input_order import input_order, spec_paths
from aitune.torch.checkpoint.graphs import graph_from_native, graph_to_json
from aitune.torch.config import config
from aitune.torch.graph.graph_spec import GraphSpec, Sample

# Set to 0 to skip the check (for packages built and loaded in an environment known to work).
LOAD_PROBE_ENV = "AITUNE_AOTI_LOAD_PROBE"
_LOADED = "aitune-load-check: loaded"
_CALLED = "aitune-load-check: called"


def enabled() -> bool:
    return os.environ.get(LOAD_PROBE_ENV, "1") != "0"


def first_call_inputs(graph: GraphSpec, sample: Sample | None) -> list[torch.Tensor]:
    """One tensor per tensor input of `graph` (input_spec.tensors order): the sample's, or zeros
    of the recorded minimum shape and first dtype when there is no sample."""
    if sample is not None:
        _, leaves = _C.flatten_call(_C.Signature(graph.forward_params), sample.args, sample.kwargs, False, -1)
        tensors = [leaf.value for leaf in leaves if leaf.is_tensor]
        if len(tensors) == len(graph.input_spec.tensors):
            return [t.detach().to("cpu").contiguous() for t in tensors]
    return [
        torch.zeros(list(leaf.spec.min_shape), dtype=leaf.dtypes[0] if leaf.dtypes else torch.float32)
        for leaf in graph.input_spec.tensors
    ]


def check_package(
    path: Path,
    device_index: int,
    graph: GraphSpec | None = None,
    sample: Sample | None = None,
    *,
    from_checkpoint: bool,
    timeout_s: float | None = None,
) -> None:
    """Loads `path` in a child process and, with `graph`, makes its first call there. Raises
    CorruptCheckpointError (`from_checkpoint`: the package came from a file) or RuntimeError (a
    package just built: the candidate fails) when the child crashes, fails or runs past the
    timeout."""
    timeout_s = config.aoti_load_check_timeout_s if timeout_s is None else timeout_s
    with tempfile.TemporaryDirectory(prefix="aitune-load-check-") as folder:
        job: dict[str, object] = {"package": str(path), "device_index": device_index, "graph": None}
        if graph is not None:
            inputs = first_call_inputs(graph, sample)
            save_file({str(i): t for i, t in enumerate(inputs)}, os.path.join(folder, "inputs.safetensors"))
            job["graph"] = json.dumps(graph_to_json(graph))
            job["params"] = [list(p) for p in graph.forward_params]
            job["inputs"] = os.path.join(folder, "inputs.safetensors")
        job_file = os.path.join(folder, "job.json")
        Path(job_file).write_text(json.dumps(job))
        command = [sys.executable, "-m", "aitune.torch.backend.torch_inductor_aot.load_check", job_file]
        try:
            result = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            stage = _stage(e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace"))
            _fail(
                path,
                from_checkpoint,
                f"{stage} did not finish within {timeout_s:g} s (config.aoti_load_check_timeout_s, "
                "AITUNE_AOTI_LOAD_CHECK_TIMEOUT_S)",
            )
    if result.returncode == 0 and (_CALLED in result.stdout or (graph is None and _LOADED in result.stdout)):
        return
    stage = _stage(result.stdout)
    if result.returncode < 0:
        try:
            name = signal.Signals(-result.returncode).name
        except ValueError:
            name = f"signal {-result.returncode}"
        _fail(path, from_checkpoint, f"{stage} crashes ({name})")
    tail = "\n".join(result.stderr.strip().splitlines()[-5:])
    _fail(path, from_checkpoint, f"{stage} fails (exit {result.returncode}):\n{tail}")


def _stage(stdout: str) -> str:
    return "its first call" if _LOADED in (stdout or "") else "loading it"


def _fail(path: Path, from_checkpoint: bool, what: str) -> None:
    where = f"AOTInductor package {path}: {what} in a check process"
    if from_checkpoint:
        raise CorruptCheckpointError(
            f"{where}, so aitune does not serve it: the package is corrupt or was built for another "
            f"environment (a checksum does not vouch for native code). Set {LOAD_PROBE_ENV}=0 to skip this check."
        )
    raise RuntimeError(
        f"{where}: torch's AOTIModelPackageLoader cannot serve packages built in this environment, so "
        f"TorchInductorAotBackend cannot serve it. Set {LOAD_PROBE_ENV}=0 to skip this check."
    )


def _child(job_file: str) -> int:
    """The child: load as the parent will (AotiRunner, libstdc++ promoted), then the first call."""
    job = json.loads(Path(job_file).read_text())
    promote_libstdcxx()
    runner = _C.AotiRunner.load(job["package"], int(job["device_index"]))
    print(_LOADED, flush=True)
    if job["graph"] is None:
        return 0
    graph = graph_from_native(_C.read_graph_spec(job["graph"]), [tuple(p) for p in job["params"]], None)
    order = input_order(spec_paths(pytree.treespec_loads(runner.call_spec[0])), graph)
    tensors = load_file(job["inputs"])
    device = torch.device(runner.device)
    with torch.no_grad():
        runner.run([tensors[str(i)].to(device) for i in order])
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    print(_CALLED, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
