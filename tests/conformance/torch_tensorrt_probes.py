"""Calls that probe Torch-TensorRT's argument checks, run against the real 2.11 (in the sandbox,
torch_tensorrt_child.py) and against the fake of tests/fakes (test_conformance_torch_tensorrt.py):
whatever the real library refuses, the fake must refuse with the same exception type.

Each probe takes a `side` with save(**kwargs), compile(**kwargs), settings(**kwargs),
options(dict), Input(**kwargs) and program(), the library's own entry points there."""

from __future__ import annotations

import torch

CUDA = torch.device("cuda:0")  # the real dynamo.compile takes CUDA devices only


def _x(side, static=False):
    low = [2, 3] if static else [1, 3]
    return side.Input(min_shape=low, opt_shape=[2, 3], max_shape=[2, 3], dtype=torch.float32, name="input_x")


PROBES = {
    # torch_tensorrt.save
    "save: a float keyword input": lambda s: s.save(
        arg_inputs=[torch.randn(2, 3)], kwarg_inputs={"scale": 0.5}, retrace=False
    ),
    "save: a positional None": lambda s: s.save(arg_inputs=[torch.randn(2, 3), None], retrace=False),
    "save: a positional bool": lambda s: s.save(arg_inputs=[torch.randn(2, 3), True], retrace=False),
    "save: a keyword None": lambda s: s.save(
        arg_inputs=[torch.randn(2, 3)], kwarg_inputs={"mask": None}, retrace=False
    ),
    "save: a str keyword with Inputs": lambda s: s.save(
        arg_inputs=[_x(s)], kwarg_inputs={"mode": "fast"}, retrace=False
    ),
    "save: a str keyword with an Input of min = max": lambda s: s.save(
        arg_inputs=[_x(s, static=True)], kwarg_inputs={"mode": "fast"}, retrace=False
    ),
    "save: tensors only": lambda s: s.save(arg_inputs=[torch.randn(2, 3)], retrace=False),
    "save: no inputs, retrace=False": lambda s: s.save(retrace=False),
    "save: an unknown output format": lambda s: s.save(retrace=False, output_format="onnx"),
    "save: no file path": lambda s: s.save(retrace=False, file_path=""),
    "save: a plain nn.Module": lambda s: s.save(retrace=False, module=torch.nn.Linear(3, 3)),
    # torch_tensorrt.dynamo.compile
    "compile: a str input": lambda s: s.compile(arg_inputs=[_x(s), "text"]),
    "compile: a float input": lambda s: s.compile(arg_inputs=[_x(s), 0.5]),
    "compile: a None input": lambda s: s.compile(arg_inputs=[_x(s), None]),
    "compile: a dict of Inputs": lambda s: s.compile(arg_inputs=[], kwarg_inputs={"x": _x(s)}),
    "compile: no inputs": lambda s: s.compile(),
    "compile: fp16 precision with explicit typing": lambda s: s.compile(
        arg_inputs=[_x(s)], enabled_precisions={torch.float16}
    ),
    "compile: fp16 precision with weak typing": lambda s: s.compile(
        arg_inputs=[_x(s)], use_explicit_typing=False, enabled_precisions={torch.float16}
    ),
    "compile: fp16 autocast": lambda s: s.compile(
        arg_inputs=[_x(s)], enable_autocast=True, autocast_low_precision_type=torch.float16
    ),
    "compile: fp32 as the autocast type": lambda s: s.compile(
        arg_inputs=[_x(s)], enable_autocast=True, autocast_low_precision_type=torch.float32
    ),
    "compile: weight streaming with weak typing": lambda s: s.compile(
        arg_inputs=[_x(s)], use_explicit_typing=False, enable_weight_streaming=True
    ),
    "compile: cross compilation for Windows": lambda s: s.compile(
        arg_inputs=[_x(s)], enable_cross_compile_for_windows=True
    ),
    # CompilationSettings and the torch.compile options
    "settings: an unknown keyword": lambda s: s.settings(debug=True),
    "settings: known keywords": lambda s: s.settings(workspace_size=1 << 20, min_block_size=1),
    "options: known keywords": lambda s: s.options({"workspace_size": 1 << 20, "device": CUDA}),
}


def run_probes(side) -> dict[str, str]:
    """{probe: "ok" or the name of the exception it raised}."""
    outcomes = {}
    for name, probe in PROBES.items():
        try:
            probe(side)
            outcomes[name] = "ok"
        except Exception as e:  # noqa: BLE001 - the outcome is what is compared
            outcomes[name] = type(e).__name__
    return outcomes
