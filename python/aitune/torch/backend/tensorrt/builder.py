"""Engine building with the TensorRT Python API (docs/reference/tensorrt.md). Every function takes the
`tensorrt` module as a parameter, so unit tests pass a recording fake and GPU runs the real one."""

from __future__ import annotations

import collections
import contextlib
import fcntl
import logging
import os
import tempfile
import threading
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


_PROCESS_LOGGERS: dict[Any, Any] = {}
_PROCESS_LOGGERS_LOCK = threading.Lock()


def process_logger(trt: Any) -> Any:
    """The one trt.ILogger aitune gives every Builder, Runtime and OnnxParser of this process.
    TensorRT treats its logger as process-wide (a message of a later builder or runtime may go to
    the first logger it was given), so a logger per object would quote another object's errors, or
    none (docs/reference/tensorrt.md#runtime-and-timing-cache). Keyed by the module's ILogger class: one per
    `tensorrt` module."""
    with _PROCESS_LOGGERS_LOCK:
        found = _PROCESS_LOGGERS.get(trt.ILogger)
        if found is None:
            found = _PROCESS_LOGGERS[trt.ILogger] = _make_logger(trt)
        return found


class ErrorLines:
    """The last error lines a logger received, numbered: mark() before an operation and since(mark)
    after it quote what that operation logged (and what concurrent ones did: the logger is shared).
    TensorRT calls its logger from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lines: collections.deque[tuple[int, str]] = collections.deque(maxlen=64)
        self._count = 0

    def add(self, line: str) -> None:
        with self._lock:
            self._count += 1
            self._lines.append((self._count, line))

    def mark(self) -> int:
        with self._lock:
            return self._count

    def since(self, mark: int) -> list[str]:
        with self._lock:
            return [line for number, line in self._lines if number > mark]


def _make_logger(trt: Any) -> Any:
    """A trt.ILogger that forwards to the Python logger `tensorrt` with a `[TRT]` prefix and keeps
    its error lines in `.errors` (ErrorLines)."""
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
            self.errors = ErrorLines()

        def log(self, sev: Any, msg: str) -> None:
            if sev in errors:
                self.errors.add(msg)
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


def reconcile_profiles(network: Any, profiles: list, names: list[str | None]) -> list:
    """The profiles with every axis the export made static set to its size (min = opt = max):
    TensorRT refuses a range on a static network dimension, and the engine serves only that size
    there (docs/reference/tensorrt.md#optimization-profiles). A static size outside a profile's range fails here."""
    static = {}
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        static[tensor.name] = tuple(tensor.shape)
    reconciled, reported = [], set()
    for number, profile in enumerate(profiles):
        entries = []
        for name, (low, opt, high) in zip(names, profile):
            low, opt, high = list(low), list(opt), list(high)
            shape = static.get(name) if name is not None else None
            if shape is not None and len(shape) != len(low):
                raise RuntimeError(
                    f"Optimization profile {number} for TensorRT input '{name}': the network input has rank "
                    f"{len(shape)} ({list(shape)}); expected the profile's rank {len(low)}, got min={low}"
                )
            for axis, size in enumerate(shape or ()):
                if size < 0 or low[axis] == opt[axis] == high[axis] == size:
                    continue
                if not low[axis] <= size <= high[axis]:
                    raise RuntimeError(
                        f"Optimization profile {number} for TensorRT input '{name}': the export made axis {axis} "
                        f"static with size {size}; expected a size in the profile's range [{low[axis]}, "
                        f"{high[axis]}], got {size}"
                    )
                if (name, axis) not in reported:
                    reported.add((name, axis))
                    logger.warning(
                        "TensorRT input '%s' axis %d: the ONNX export made it static (size %d), so the engine "
                        "serves only that size there instead of [%d, %d]; other sizes run outside its profiles",
                        name,
                        axis,
                        size,
                        low[axis],
                        high[axis],
                    )
                low[axis] = opt[axis] = high[axis] = size
            entries.append((low, opt, high))
        reconciled.append(entries)
    return reconciled


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
) -> tuple[bytes, list]:
    """Parses, configures and builds; writes the plan to `plan_path` and the timing cache back to
    `timing_cache` after the build succeeded. Returns the serialized plan and the profiles it was
    built with (reconcile_profiles: the axes the export made static have their size)."""
    trt_log = process_logger(trt)
    mark = trt_log.errors.mark()
    builder = trt.Builder(trt_log)
    network, _parser = parse_onnx(trt, builder, trt_log, onnx_path)
    builder_config = builder.create_builder_config()
    apply_builder_settings(trt, builder_config, config)
    profiles = reconcile_profiles(network, profiles, names)
    add_profiles(builder, builder_config, network, profiles, names)
    write_back = load_timing_cache(builder_config, timing_cache)
    serialized = builder.build_serialized_network(network, builder_config)
    if serialized is None:
        tail = trt_log.errors.since(mark)[-5:]
        quoted = "\n".join(f"  {line}" for line in tail) or "  (TensorRT logged no error)"
        hint = f" {WORKSPACE_HINT}" if any(_NO_IMPLEMENTATION in line for line in tail) else ""
        raise RuntimeError(f"TensorRT engine build failed for {onnx_path}{hint}. Last TensorRT errors:\n{quoted}")
    plan = bytes(memoryview(serialized))
    plan_path.parent.mkdir(parents=True, exist_ok=True)
    plan_path.write_bytes(plan)
    if write_back and timing_cache is not None:
        save_timing_cache(builder_config, timing_cache)
    return plan, profiles
