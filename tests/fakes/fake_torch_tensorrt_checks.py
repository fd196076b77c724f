"""The argument checks of Torch-TensorRT 2.11 that the fake (fake_torch_tensorrt.py) repeats, with
the real messages: `torch_tensorrt.save` (_compile.py), `torch_tensorrt.dynamo.compile`
(dynamo/_compiler.py, with dynamo/utils.py's prepare_inputs) and the torch.compile backend's option
parsing (dynamo/utils.py's parse_dynamo_kwargs). The conformance tier runs the real functions on
every call the unit tests record and checks that the fake refuses everything the real refuses.

Where the fake is stricter than the real library it says so: unknown settings and options are
refused (2.11 ignores them silently, so a misspelt setting would never take effect)."""

from __future__ import annotations

from typing import Any

import torch

INPUT_TYPE: type = type(None)  # fake_torch_tensorrt sets its Input class
COMPILE_ONLY_PARAMETERS = {"torch_executed_modules", "engine_cache_dir", "engine_cache_size", "custom_engine_cache"}
FLOAT32_PRECISIONS = {torch.float32, torch.float4_e2m1fn_x2}


def prepare_inputs(inputs: Any) -> Any:
    """torch_tensorrt.dynamo.utils.prepare_inputs: Inputs and None pass, tensors and Python
    scalars become Inputs (a float or bool becomes a 0-d tensor input), containers recurse,
    anything else is refused."""
    if inputs is None or isinstance(inputs, INPUT_TYPE):
        return inputs
    if isinstance(inputs, (torch.Tensor, int, float, bool)):
        tensor = torch.tensor(inputs) if not isinstance(inputs, torch.Tensor) else inputs
        return ("Input", tuple(tensor.shape), tensor.dtype)  # what the real one makes an Input of
    if isinstance(inputs, (list, tuple)):
        prepared = [prepare_inputs(item) for item in inputs]
        return prepared if isinstance(inputs, list) else tuple(prepared)
    if isinstance(inputs, dict):
        return {key: prepare_inputs(value) for key, value in inputs.items()}
    raise ValueError(
        f"Invalid input type {type(inputs)} encountered in the dynamo_compile input parsing. "
        "Allowed input types: {torch_tensorrt.Input, torch.Tensor, list, tuple, dict}"
    )


def check_compile(inputs: Any, arg_inputs: Any, kwarg_inputs: Any, settings: dict, fields: frozenset) -> None:
    unknown = sorted(set(settings) - fields - COMPILE_ONLY_PARAMETERS)
    if unknown:  # stricter than 2.11, which drops unknown keywords
        raise TypeError(f"dynamo.compile() got settings Torch-TensorRT does not have: {unknown}")
    if settings.get("enable_cross_compile_for_windows"):
        raise ValueError(
            "Please use torch_tensorrt.dynamo.cross_compile_for_windows() if you want to cross compile "
            "the module in Linux for inferencing in Windows."
        )
    explicit = settings.get("use_explicit_typing", True) or settings.get("enable_autocast", False)
    precisions = set(settings.get("enabled_precisions", {torch.float32}))
    if explicit and (len(precisions) != 1 or not precisions & FLOAT32_PRECISIONS):
        raise AssertionError(
            f"use_explicit_typing was set to True, however found that enabled_precisions was also "
            f"specified (saw: {precisions}, expected: dtype.f32, dtype.f4). enabled_precisions should "
            "not be used when use_explicit_typing=True"
        )
    low = settings.get("autocast_low_precision_type")
    if low is not None and low not in (torch.float16, torch.bfloat16):
        raise ValueError(
            f"autocast_low_precision_type must be one of torch.float16, torch.bfloat16, dtype.f16, "
            f"dtype.bf16, got {low}"
        )
    if settings.get("enable_weight_streaming") and not explicit:
        raise AssertionError(
            "When enable_weight_streaming is enabled, it requires use_explicit_typing to be set to True"
        )
    if arg_inputs is None and kwarg_inputs is None and inputs is None:
        raise AssertionError("'arg_inputs', 'kwarg_inputs' and 'inputs' should not all be None.")
    if arg_inputs is not None and inputs is not None:
        raise AssertionError("'arg_inputs' and 'inputs' should not be used at the same time.")
    prepare_inputs(inputs or arg_inputs)
    prepare_inputs(kwarg_inputs or {})


def _all_inputs(obj: Any) -> bool:
    if isinstance(obj, INPUT_TYPE):
        return True
    if isinstance(obj, (list, tuple)):
        return all(_all_inputs(item) for item in obj)
    if isinstance(obj, dict):
        return all(_all_inputs(value) for value in obj.values())
    return False


def _tensors_or_inputs(obj: Any) -> None:
    """save()'s example tensors when not every input is an Input (_extract_tensor). An Input made
    from min/opt/max shapes is in Torch-TensorRT's dynamic mode even when they are equal."""
    if isinstance(obj, INPUT_TYPE) and obj.min_shape is not None:
        raise ValueError(
            "Requested an example tensor from a dynamic shaped input but did not specific which profile field to use."
        )
    if isinstance(obj, (INPUT_TYPE, torch.Tensor)):
        return
    if isinstance(obj, (list, tuple)):
        for item in obj:
            _tensors_or_inputs(item)
    elif isinstance(obj, dict):
        for value in obj.values():
            _tensors_or_inputs(value)
    else:
        raise TypeError(f"Unsupported input type: {type(obj)}. Expected torch.Tensor or torch_tensorrt.Input")


def check_save(
    module: Any,
    file_path: str,
    *,
    extra_files: Any = None,
    output_format: str = "exported_program",
    inputs: Any = None,
    arg_inputs: Any = None,
    kwarg_inputs: Any = None,
    retrace: bool = True,
    use_legacy_exporter: Any = None,
    pickle_protocol: int = 2,
    dynamic_shapes: Any = None,
    **kwargs: Any,
) -> None:
    if arg_inputs is not None and not all(isinstance(i, (torch.Tensor, INPUT_TYPE)) for i in arg_inputs):
        raise ValueError(
            "Not all inputs provided are torch.Tensor or torch_tensorrt.Input objects. Please provide "
            "inputs of a valid type"
        )
    if arg_inputs and inputs:
        raise AssertionError("'arg_inputs' and 'inputs' should not be used at the same time.")
    arg_inputs = inputs or arg_inputs
    kwarg_inputs = kwarg_inputs or {}
    if kwarg_inputs and any(value is None for value in kwarg_inputs.values()):
        raise ValueError("kwargs should not include None.")
    if not (_all_inputs(arg_inputs) and (not kwarg_inputs or _all_inputs(kwarg_inputs))):
        if arg_inputs is not None:
            _tensors_or_inputs(arg_inputs)
        _tensors_or_inputs(kwarg_inputs)
    if output_format not in {"exported_program", "torchscript", "aot_inductor"}:
        raise ValueError(
            f"Provided output_format {output_format} is not supported. Supported options are "
            "exported_program | torchscript"
        )
    if not file_path:
        raise ValueError("File path cannot be empty. Please provide a valid file path")
    if not isinstance(module, torch.fx.GraphModule):
        raise ValueError(
            "Input model is of type nn.Module. Saving nn.Module directly is not supported. Supported "
            "model types torch.jit.ScriptModule | torch.fx.GraphModule | torch.export.ExportedProgram."
        )
    if output_format != "exported_program":
        raise NotImplementedError(f"the fake saves exported programs only, not {output_format}")
    if retrace and not arg_inputs and not kwarg_inputs and dynamic_shapes is None:
        raise ValueError(
            "Provided model is a torch.fx.GraphModule without existing shape metadata and retrace is "
            "True, however no inputs specs were provided. Please provide valid torch.Tensors or "
            "torch_tensorrt.Input objects as inputs to retrace and save the model"
        )


def check_compile_options(options: dict, fields: frozenset) -> None:
    """parse_dynamo_kwargs keeps the options that are CompilationSettings fields and drops the rest
    silently; the fake refuses the rest."""
    unknown = sorted(set(options) - fields)
    if unknown:
        raise TypeError(f"torch.compile(backend='torch_tensorrt') options Torch-TensorRT does not have: {unknown}")
