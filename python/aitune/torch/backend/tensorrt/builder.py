"""Engine building with the TensorRT Python API (docs/reference/tensorrt.md). Every function takes the
`tensorrt` module as a parameter, so unit tests pass a recording fake and GPU runs the real one."""

from __future__ import annotations

import collections
import contextlib
import fcntl
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

from aitune.torch.backend.tensorrt.tensorrt_config import TensorRTBackendConfig
from aitune.torch.utils.env import env_bool

logger = logging.getLogger("aitune")
trt_logger = logging.getLogger("tensorrt")

TIMING_CACHE_ENV = "AITUNE_TRT_TIMING_CACHE"
WORKSPACE_HINT = (
    "(this often means the builder ran out of workspace/GPU memory; try a smaller workspace_size or free GPU memory)"
)
_NO_IMPLEMENTATION = "Could not find any implementation for node"


def make_logger(trt: Any) -> Any:
    """A trt.ILogger that forwards to the Python logger `tensorrt` with a `[TRT]` prefix and keeps
    the last error lines for build-failure messages."""
    severity = trt.ILogger.Severity
    levels = {
        severity.INTERNAL_ERROR: logging.CRITICAL,
        severity.ERROR: logging.ERROR,
        severity.WARNING: logging.WARNING,
        severity.INFO: logging.INFO,
        severity.VERBOSE: logging.DEBUG,
    }
    errors = (severity.INTERNAL_ERROR, severity.ERROR)

    class _Logger(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.errors: collections.deque[str] = collections.deque(maxlen=10)

        def log(self, sev: Any, msg: str) -> None:
            if sev in errors:
                self.errors.append(msg)
            trt_logger.log(levels.get(sev, logging.INFO), "[TRT] %s", msg)

    return _Logger()


def default_timing_cache_path(trt: Any, cache_dir: Path, sm: str) -> Path | None:
    """<cache_dir>/tensorrt/timing_cache_sm<SM>_trt<version>.bin; None when
    AITUNE_TRT_TIMING_CACHE=0 turns the default cache off."""
    if not env_bool(TIMING_CACHE_ENV, True):
        return None
    return Path(cache_dir) / "tensorrt" / f"timing_cache_sm{sm}_trt{trt.__version__}.bin"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def load_timing_cache(builder_config: Any, path: Path | None) -> bool:
    """Attaches the cache at `path` (or an empty one) to the builder config. Returns whether the
    merged cache should be written back: False when TensorRT rejected the file, which is then
    left untouched and the build runs without it."""
    data = b""
    if path is not None and Path(path).is_file():
        with _file_lock(Path(path)):
            data = Path(path).read_bytes()
    if data:
        try:
            cache = builder_config.create_timing_cache(data)
            accepted = cache is not None and builder_config.set_timing_cache(cache, ignore_mismatch=False)
        except Exception as e:  # noqa: BLE001 - TensorRT raises its own types for a foreign cache
            accepted = False
            logger.debug("TensorRT timing cache %s: %s", path, e)
        if accepted:
            return True
        logger.warning(
            "TensorRT rejected the timing cache %s (a different TensorRT version or GPU?); building "
            "without it and leaving the file untouched",
            path,
        )
        builder_config.set_timing_cache(builder_config.create_timing_cache(b""), ignore_mismatch=False)
        return False
    builder_config.set_timing_cache(builder_config.create_timing_cache(b""), ignore_mismatch=False)
    return path is not None


def save_timing_cache(builder_config: Any, path: Path) -> None:
    """Writes the builder's merged cache over `path`: a temporary file renamed into place under a
    file lock, so concurrent builds never see a half-written cache."""
    path = Path(path)
    cache = builder_config.get_timing_cache()
    if cache is None:
        return
    data = bytes(memoryview(cache.serialize()))
    with _file_lock(path):
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def apply_builder_settings(trt: Any, builder_config: Any, config: TensorRTBackendConfig) -> None:
    """Maps the config fields onto the builder config (docs/reference/tensorrt.md#builder-settings table)."""
    if config.workspace_size is not None:
        builder_config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, config.workspace_size)
    if config.optimization_level is not None:
        builder_config.builder_optimization_level = config.optimization_level
    if config.compatibility_level is not None:
        level = getattr(trt.HardwareCompatibilityLevel, config.compatibility_level)
        builder_config.hardware_compatibility_level = level
    if config.enable_tf32:
        builder_config.set_flag(trt.BuilderFlag.TF32)
    else:
        builder_config.clear_flag(trt.BuilderFlag.TF32)


def parse_onnx(trt: Any, builder: Any, trt_log: Any, onnx_path: Path) -> Any:
    """A strongly typed network parsed from `onnx_path` (precision comes from the ONNX types)."""
    flags = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, trt_log)
    if not parser.parse_from_file(str(onnx_path)):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        listed = "\n".join(f"  - {e}" for e in errors) or "  (the parser reported no error text)"
        raise RuntimeError(f"TensorRT could not parse {onnx_path}:\n{listed}")
    return network, parser


def add_profiles(builder: Any, builder_config: Any, network: Any, profiles: list, names: list[str | None]) -> None:
    """One TensorRT optimization profile per aitune profile, for the network's inputs. `names[i]`
    is the ONNX/engine name of graph tensor input i (None when the export dropped it). A network
    without inputs gets no profile; a profile TensorRT refuses (add_optimization_profile returns
    -1) fails the build here, not later with an engine whose profile indices are shifted."""
    taken = {network.get_input(i).name for i in range(network.num_inputs)}
    for number, profile in enumerate(profiles):
        trt_profile = builder.create_optimization_profile()
        shapes = {}
        for name, (low, opt, high) in zip(names, profile):
            if name is not None and name in taken:
                shapes[name] = (tuple(low), tuple(opt), tuple(high))
                trt_profile.set_shape(name, *shapes[name])
        if not shapes:
            continue
        index = builder_config.add_optimization_profile(trt_profile)
        if index != number:
            listed = ", ".join(
                f"{name}: min={list(a)}, opt={list(b)}, max={list(c)}" for name, (a, b, c) in shapes.items()
            )
            raise RuntimeError(
                f"TensorRT refused optimization profile {number} ({listed}): add_optimization_profile "
                f"returned {index}, expected {number}"
            )


def build_engine(
    trt: Any,
    onnx_path: Path,
    plan_path: Path,
    profiles: list,
    names: list[str | None],
    config: TensorRTBackendConfig,
    timing_cache: Path | None,
) -> bytes:
    """Parses, configures and builds; writes the plan to `plan_path` and the timing cache back to
    `timing_cache` after the build succeeded. Returns the serialized plan."""
    trt_log = make_logger(trt)
    builder = trt.Builder(trt_log)
    network, _parser = parse_onnx(trt, builder, trt_log, onnx_path)
    builder_config = builder.create_builder_config()
    apply_builder_settings(trt, builder_config, config)
    add_profiles(builder, builder_config, network, profiles, names)
    write_back = load_timing_cache(builder_config, timing_cache)
    serialized = builder.build_serialized_network(network, builder_config)
    if serialized is None:
        tail = list(trt_log.errors)[-5:]
        quoted = "\n".join(f"  {line}" for line in tail) or "  (TensorRT logged no error)"
        hint = f" {WORKSPACE_HINT}" if any(_NO_IMPLEMENTATION in line for line in tail) else ""
        raise RuntimeError(f"TensorRT engine build failed for {onnx_path}{hint}. Last TensorRT errors:\n{quoted}")
    plan = bytes(memoryview(serialized))
    plan_path.parent.mkdir(parents=True, exist_ok=True)
    plan_path.write_bytes(plan)
    if write_back and timing_cache is not None:
        save_timing_cache(builder_config, timing_cache)
    return plan
