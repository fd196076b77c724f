"""Tuning telemetry (docs/reference/tuning.md#telemetry-and-report), by its former single-module name:
the names of the model (model.py), the recorder (recorder.py) and `atomic_write_text`
(utils/fs.py), for the callers that import `tune_data.report`. New code imports those modules."""

from aitune.torch.tune_data.model import (
    SCHEMA_VERSION,
    BuildReport,
    GraphReport,
    ModuleReport,
    RunReport,
    error_dict,
)
from aitune.torch.tune_data.recorder import (
    _state,
    adopt_builds,
    begin_build,
    current_run,
    end_build,
    fail_build,
    graph_span,
    module_outcome,
    module_span,
    record_correctness,
    record_max_batch_search,
    record_measurements,
    record_module_outcome,
    record_outcome,
    record_selection,
    record_skipped,
    record_step,
    run_span,
    selection_rule,
    snapshot_tuning_data,
)
from aitune.torch.utils.fs import atomic_write_text

__all__ = ["SCHEMA_VERSION", "BuildReport", "GraphReport", "ModuleReport", "RunReport", "_state", "adopt_builds",
           "atomic_write_text", "begin_build", "current_run", "end_build", "error_dict", "fail_build", "graph_span",
           "module_outcome", "module_span", "record_correctness", "record_max_batch_search", "record_measurements",
           "record_module_outcome", "record_outcome", "record_selection", "record_skipped", "record_step", "run_span",
           "selection_rule", "snapshot_tuning_data"]
