"""Tuning telemetry JSON and HTML report (docs/reference/tuning.md#telemetry-and-report)."""

from aitune.torch.tune_data.html_report import render_html
from aitune.torch.tune_data.model import SCHEMA_VERSION, BuildReport, GraphReport, ModuleReport, RunReport
from aitune.torch.tune_data.recorder import current_run, graph_span, module_span, run_span, snapshot_tuning_data

__all__ = [
    "SCHEMA_VERSION",
    "BuildReport",
    "GraphReport",
    "ModuleReport",
    "RunReport",
    "current_run",
    "graph_span",
    "module_span",
    "render_html",
    "run_span",
    "snapshot_tuning_data",
]
