"""Issues 5 and 24 on a GPU: build real TensorRT engines for ResNet-50 (torchvision) and BERT-base
(transformers, random weights: no download) in fp32 and with FP16 autocast, with the SINGLE,
SAMPLES_USED and custom profiles, CUDA graphs on and off; check each against eager and time it.

Every variant is also served in a shape order that replays earlier shapes after later ones were
captured (1, 4, 8, 1, 8, 4, 1, fresh inputs each time: a graph replaying another shape's context
state, or stale inputs, shows as an error), from two threads on their own streams at once, and
with inputs that are not 256-byte aligned; each of those calls is checked against eager. With
two GPUs, a saved variant is loaded onto cuda:1 while cuda:0 is current and checked the same
way (and cuda:0 must still be current after). Writes one JSON object (--out) and prints it.
Exits 0 with "skipped: tensorrt not installed" when TensorRT is absent, so the GPU run script
can call it unconditionally.

    python benchmarks/tensorrt_verify.py --out tensorrt_verify.json [--quick] [--models resnet50]
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


REPLAY_ORDER = (1, 4, 8, 1, 8, 4, 1)


def _first(out: Any) -> Any:
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        return next(iter(out.values()))
    return out[0]


def _max_err(out: Any, ref: Any) -> float:
    return (_first(out).float() - _first(ref).float()).abs().max().item()


def _misaligned(value: Any) -> Any:
    """The same values at an address 1 element past an aligned one (contiguous, not 256-byte aligned)."""
    import torch

    if isinstance(value, dict):
        return {k: _misaligned(v) for k, v in value.items()}
    buffer = torch.empty(value.numel() + 1, dtype=value.dtype, device=value.device)
    shifted = buffer[1:].view(value.shape)
    shifted.copy_(value)
    assert shifted.is_contiguous() and shifted.data_ptr() % 256
    return shifted


def _serving_checks(wrapped: Any, model: Any, sample: Callable, size: int, call: Callable) -> dict:
    """Earlier shapes after later captures, two threads on their own streams, unaligned inputs."""
    import threading

    import torch

    result: dict[str, Any] = {"replay_order": list(REPLAY_ORDER), "replay_max_abs_err": []}
    with torch.no_grad():
        for batch in REPLAY_ORDER:
            x = sample(batch, size)
            result["replay_max_abs_err"].append(_max_err(call(wrapped, x), call(model, x)))
        result["unaligned_max_abs_err"] = [
            _max_err(call(wrapped, _misaligned(x)), call(model, x)) for x in (sample(4, size), sample(1, size))
        ]
    errors: list[float] = []
    failures: list[str] = []

    def serve(stream: Any) -> None:
        try:
            with torch.no_grad(), torch.cuda.stream(stream):
                for batch in (4, 1, 8, 4):
                    x = sample(batch, size)
                    out, ref = call(wrapped, x), call(model, x)
                    stream.synchronize()
                    errors.append(_max_err(out, ref))
        except Exception as e:  # noqa: BLE001 - reported in the result
            failures.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=serve, args=(torch.cuda.Stream(),)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result["threads_max_abs_err"] = errors
    result["threads_failures"] = failures
    return result


def _second_gpu_check(
    wrapped: Any, name: str, model: Any, factory: Callable, sample: Callable, size: int, call: Callable
) -> dict:
    """ait.load(..., device_map) onto cuda:1 while cuda:0 is current."""
    import copy

    import torch

    import aitune.torch as ait

    folder = Path(tempfile.mkdtemp(prefix="aitune-trt-verify-load-"))
    path = ait.save(wrapped, folder / "model.ait")
    torch.cuda.set_device(0)
    reference = copy.deepcopy(model).to("cuda:1")
    loaded = ait.load(factory(), path, device_map={name: "cuda:1"})
    current_after_load = torch.cuda.current_device()
    errs = []
    with torch.no_grad():
        for batch in (1, 4, 8):
            x = sample(batch, size)
            x = {k: v.to("cuda:1") for k, v in x.items()} if isinstance(x, dict) else x.to("cuda:1")
            errs.append(_max_err(call(loaded, x), call(reference, x)))
    return {"max_abs_err": errs, "current_device_after": [current_after_load, torch.cuda.current_device()]}


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
    result.update(_serving_checks(wrapped, model, sample, size, call))
    checked = result["max_abs_err"] + result["replay_max_abs_err"] + result["unaligned_max_abs_err"]
    checked += result["threads_max_abs_err"]
    if torch.cuda.device_count() > 1 and label == "fp32-single-cudagraphs":
        name = f"{model_name}-{label}"
        result["second_gpu"] = _second_gpu_check(wrapped, name, model, factory, sample, size, call)
        checked += result["second_gpu"]["max_abs_err"]
    tolerance = 1e-2 if label.startswith("fp32") else 5e-1  # absolute, on O(1) activations
    result["ok"] = (
        all(e <= tolerance for e in checked)
        and not result["threads_failures"]
        and len(result["threads_max_abs_err"]) == 8
        and result.get("second_gpu", {}).get("current_device_after", [0, 0]) == [0, 0]
    )
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--quick", action="store_true", help="fewer timed iterations")
    parser.add_argument("--models", nargs="*", help="only these (resnet50, bert-base)")
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
        if args.models and name not in args.models:
            continue
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
