"""Issue 5 on a GPU: build real TensorRT engines for ResNet-50 (torchvision) and BERT-base
(transformers, random weights: no download) in fp32 and with FP16 autocast, with the SINGLE,
SAMPLES_USED and custom profiles, CUDA graphs on and off; check each against eager and time it.
Writes one JSON object (--out) and prints it. Exits 0 with "skipped: tensorrt not installed" when
TensorRT is absent, so the GPU run script can call it unconditionally.

    python benchmarks/tensorrt_verify.py --out tensorrt_verify.json [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable


def _timed(fn: Callable[[], Any], iters: int) -> dict[str, float]:
    import torch

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return {"median_ms": statistics.median(times), "min_ms": min(times)}


def _models() -> dict[str, tuple[Callable[[], Any], Callable[[int, int], Any]]]:
    """name -> (model factory, sample(batch, size) factory)."""
    import torch

    models: dict[str, Any] = {}
    if importlib.util.find_spec("torchvision"):
        import torchvision

        models["resnet50"] = (
            lambda: torchvision.models.resnet50().eval().cuda(),
            lambda b, s: torch.randn(b, 3, s, s, device="cuda"),
        )
    if importlib.util.find_spec("transformers"):
        from transformers import BertConfig, BertModel

        def bert() -> Any:
            return BertModel(BertConfig(), add_pooling_layer=False).eval().cuda()

        def tokens(b: int, s: int) -> Any:
            return {
                "input_ids": torch.randint(0, 30000, (b, s), device="cuda"),
                "attention_mask": torch.ones(b, s, dtype=torch.long, device="cuda"),
            }

        models["bert-base"] = (bert, tokens)
    return models


def _variants(name: str) -> list[tuple[str, dict]]:
    from aitune.torch.backend.tensorrt import ONNXAutoCastConfig, ProfileMode, TensorRTProfile

    if name == "resnet50":
        custom = [TensorRTProfile().add_input_shape("x", (1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224))]
    else:
        # BertModel.forward(input_ids, attention_mask, ...): top-level paths are the parameter names.
        custom = [
            TensorRTProfile()
            .add_input_shape("input_ids", (1, 128), (4, 128), (8, 128))
            .add_input_shape("attention_mask", (1, 128), (4, 128), (8, 128))
        ]
    return [
        ("fp32-single", {}),
        ("fp32-single-cudagraphs", {"use_cuda_graphs": True}),
        ("fp16-single", {"quantization_config": ONNXAutoCastConfig(precision="fp16")}),
        (
            "fp16-single-cudagraphs",
            {"quantization_config": ONNXAutoCastConfig(precision="fp16"), "use_cuda_graphs": True},
        ),
        ("fp32-samples-used", {"profiles": ProfileMode.SAMPLES_USED}),
        ("fp32-custom", {"profiles": custom}),
    ]


def _run_variant(model_name: str, factory: Callable, sample: Callable, label: str, fields: dict, iters: int) -> dict:
    import torch

    import aitune.torch as ait
    from aitune.torch.backend import TensorRTBackend, TensorRTBackendConfig
    from aitune.torch.config import config

    from aitune.torch import module_registry

    module_registry.clear()
    config.max_num_samples_stored = 8
    model = factory()
    size = 224 if model_name == "resnet50" else 128
    calls = [sample(b, size) for b in (1, 4, 8)]
    call = (lambda m, x: m(**x)) if isinstance(calls[0], dict) else (lambda m, x: m(x))
    with torch.no_grad():
        eager = [call(model, x) for x in calls]
    strategy = ait.OneBackendStrategy(TensorRTBackend(TensorRTBackendConfig(**fields)))
    strategy.enable_performance_validation(False).enable_find_max_batch_size(False)
    wrapped = ait.Module(model, f"{model_name}-{label}", strategy=strategy)
    start = time.perf_counter()
    ait.tune(lambda x: call(wrapped, x), calls, device="cuda:0")
    build_s = time.perf_counter() - start
    result: dict[str, Any] = {"build_s": build_s}
    with torch.no_grad():
        for x, ref in zip(calls, eager):
            out = call(wrapped, x)
            a = out if isinstance(out, torch.Tensor) else out[0]
            r = ref if isinstance(ref, torch.Tensor) else ref[0]
            err = (a.float() - r.float()).abs().max().item()
            result.setdefault("max_abs_err", []).append(err)
        x = calls[1]
        result["trt"] = _timed(lambda: call(wrapped, x), iters)
        result["eager"] = _timed(lambda: call(model, x), iters)
    tolerance = 1e-2 if label.startswith("fp32") else 5e-1  # absolute, on O(1) activations
    result["ok"] = all(e <= tolerance for e in result["max_abs_err"])
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--quick", action="store_true", help="fewer timed iterations")
    args = parser.parse_args()
    if importlib.util.find_spec("tensorrt") is None:
        print("skipped: tensorrt not installed")
        return 0
    import torch

    if not torch.cuda.is_available():
        print("skipped: no CUDA GPU")
        return 0
    iters = 20 if args.quick else 200
    report: dict[str, Any] = {
        "tensorrt": __import__("tensorrt").__version__,
        "gpu": torch.cuda.get_device_name(0),
        "results": {},
    }
    tempfile.tempdir = tempfile.mkdtemp(prefix="aitune-trt-verify-")
    for name, (factory, sample) in _models().items():
        for label, fields in _variants(name):
            key = f"{name}/{label}"
            try:
                report["results"][key] = _run_variant(name, factory, sample, label, fields, iters)
            except Exception as e:  # noqa: BLE001 - one failing variant must not hide the others
                report["results"][key] = {
                    "ok": False,
                    "error": f"{type(e).__name__}: {e}",
                    "traceback": traceback.format_exc()[-2000:],
                }
            print(key, json.dumps({k: v for k, v in report["results"][key].items() if k != "traceback"}), flush=True)
    text = json.dumps(report, indent=2)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0 if all(r.get("ok") for r in report["results"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
