"""What a JIT process says when it exits (docs/reference/jit.md, docs/reference/tuning.md#telemetry-and-report): the
outcome of every head, with an explanation when nothing was tuned, and the HTML tuning report (or the inspection
report)."""

from __future__ import annotations

import logging

from aitune.torch.jit import telemetry
from aitune.torch.jit.config import JITMode
from aitune.torch.jit.config import config as jit_config
from aitune.torch.jit.inspection import save_report_at_exit
from aitune.torch.jit.state import JITModuleState, runtime

logger = logging.getLogger("aitune")


def _why_not_tuned(head: object) -> str:
    """One sentence on why a head that is still recording was never tuned."""
    calls = head.num_calls  # type: ignore[attr-defined]
    if jit_config.mode is JITMode.TUNE_DEFERRED:
        return (
            f"recorded {calls} call(s) but aitune.torch.jit.tune.deferred() was never called "
            "(TUNE_DEFERRED tunes on the first forward after it)"
        )
    if calls < jit_config.min_samples:
        return f"recorded {calls} call(s), fewer than jit_config.min_samples={jit_config.min_samples}"
    return (
        f"recorded {calls} call(s) with the same shapes, so no dynamic axis was detected: with "
        f"jit_config.batch_axis_required=True and min_samples={jit_config.min_samples}, tuning waits for calls "
        "with two different batch sizes (or set jit_config.batch_axis_required = False)"
    )


def diagnostics() -> list[str]:
    """The lines logged at exit (also used by tests)."""
    heads = runtime.heads
    if not heads:
        return [
            "JIT tuning found no modules: no patched nn.Module was called. Enable JIT tuning before the model "
            "is constructed (AUTOWRAPT_BOOTSTRAP=aitune_enable_jit_tuning, `import aitune.torch.jit.enable` "
            "first, or build the model inside `prepare_for_jit_tuning()`), and check jit_config.skip_modules, "
            "patch_exclude and min_parameters."
        ]
    lines = []
    tuned = 0
    for head in heads:
        for node in [head, *head.descendants()]:
            if node.state is JITModuleState.TUNED:
                tuned += 1
                lines.append(f"module `{node.name}`: {node.describe()}")
            elif node.state is JITModuleState.RECORDING and node.tunable:
                lines.append(f"module `{node.name}` not tuned: {_why_not_tuned(node)}")
            elif node.state is JITModuleState.EAGER:
                hint = ""
                if node is head and not node.children and jit_config.max_depth_level <= 1:
                    hint = "; raise jit_config.max_depth_level to try its submodules instead"
                lines.append(f"module `{node.name}` runs eagerly: {node.reason}{hint}")
            elif node.state is JITModuleState.SKIPPED:
                lines.append(f"module `{node.name}` skipped: {node.reason}")
    if tuned == 0:
        lines.insert(0, f"JIT tuning tuned no module ({len(heads)} module(s) found):")
    else:
        lines.insert(0, f"JIT tuning tuned {tuned} module(s):")
    return lines


def at_exit() -> None:
    try:
        if jit_config.mode is JITMode.INSPECT:
            save_report_at_exit()
            return
        for line in diagnostics():
            logger.info("🧪 JIT: %s", line)
        telemetry.write_json()
        path = telemetry.write_html()
        if path is not None:
            logger.info("📄 JIT tuning report: %s", path)
    except Exception as e:  # noqa: BLE001 - never turn a clean exit into a traceback
        logger.warning("⚠️ JIT: exit report failed: %s: %s", type(e).__name__, e)
