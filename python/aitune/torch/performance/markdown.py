"""A Markdown view of a PerformanceProfile's data, in AITune's sections (docs/guide.md, "Profiling a
call"): the overview table, "## Runs", "## Regions", "## Per-Run Attribution" (each region's
share of each run, and the residual), "## Profiler Key Averages" (by CPU and by device total) and
"## Warnings". Programs that read AITune's report find the same headings and columns."""

from __future__ import annotations

Row = list[object]


def _time(value_us: float | None) -> str:
    if value_us is None:
        return "-"
    return f"{value_us / 1000:.3f} ms" if value_us >= 1000 else f"{value_us:.1f} us"


def _share(fraction: float | None) -> str:
    return "-" if fraction is None else f"{100 * fraction:.1f}%"


def _cell(value: object) -> str:
    """A table cell: a `|` would end the cell and a newline the row."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(headers: list[str], rows: list[Row]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _section(heading: str, body: str) -> str:
    return f"{heading}\n\n{body}"


def _overview(data: dict[str, object]) -> str:
    config, inputs = data["config"], data["input"]
    rows = [
        ["Created", f"`{data['created_at']}`"],
        ["aitune Version", f"`{data['aitune_version']}`"],
        ["Target", f"`{data['target']['type']}`"],
        ["Warmup Runs", config["warmup_runs"]],
        ["Measured Runs", config["measured_runs"]],
        ["Uses Inference Function", "yes" if config["uses_inference_function"] else "no"],
        ["Input Args", inputs["args_count"]],
        ["Input Kwargs", ", ".join(f"`{k}`" for k in inputs["kwargs"]) or "-"],
    ]
    return _section("# Performance Profile", _table(["Field", "Value"], rows))


def _runs(data: dict[str, object]) -> str:
    rows = [
        [
            run["run_index"],
            _time(run["timing"].get("wall_time_us")),
            _time(run["timing"].get("cpu_time_us")),
            _time(run["timing"].get("device_time_us")),
        ]
        for run in data["runs"]
    ]
    return _section("## Runs", _table(["Run", "Wall", "CPU", "Device"], rows))


def _regions(data: dict[str, object]) -> str:
    if not data["regions"]:
        return _section("## Regions", "No regions were observed.")
    rows = [
        [f"`{r['id']}`", r["name"], r["kind"], r.get("wrapper_state", "-"), f"`{r['module_type']}`"]
        for r in data["regions"]
    ]
    return _section("## Regions", _table(["Region", "Name", "Kind", "State", "Module Type"], rows))


def _attribution(data: dict[str, object]) -> str | None:
    """One row per region and run, then the run's residual: what no region accounts for."""
    rows: list[Row] = []
    for run in data["runs"]:
        for region in run["regions"]:
            rows.append(
                [
                    run["run_index"],
                    f"`{region['region_id']}`",
                    region.get("calls", 1),
                    _time(region.get("cpu_time_us")),
                    _share(region.get("cpu_time_fraction")),
                    _time(region.get("device_time_us")),
                    _share(region.get("device_time_fraction")),
                ]
            )
        rest = run["residual"]
        rows.append(
            [
                run["run_index"],
                "_(residual)_",
                "-",
                _time(rest.get("cpu_time_us")),
                _share(rest.get("cpu_time_fraction")),
                _time(rest.get("device_time_us")),
                _share(rest.get("device_time_fraction")),
            ]
        )
    if not rows:
        return None
    headers = ["Run", "Region", "Calls", "CPU", "CPU Fraction", "Device", "Device Fraction"]
    return _section("## Per-Run Attribution", _table(headers, rows))


def _key_averages(data: dict[str, object]) -> str:
    views = data["profiler"]["key_averages"]
    parts = ["## Profiler Key Averages"]
    for key, title in (("cpu_time_total", "Sorted By CPU Total"), ("device_time_total", "Sorted By Device Total")):
        if key not in views:
            continue
        rows = [
            [
                f"`{e['key']}`",
                e["device_type"],
                e["count"],
                _time(e.get("self_cpu_time_total_us")),
                _time(e.get("cpu_time_total_us")),
                _time(e.get("self_device_time_total_us")),
                _time(e.get("device_time_total_us")),
            ]
            for e in views[key]["events"]
        ]
        headers = ["Name", "Device", "Count", "Self CPU", "CPU Total", "Self Device", "Device Total"]
        parts.append(_section(f"### {title}", _table(headers, rows)))
    return "\n\n".join(parts)


def _warnings(data: dict[str, object]) -> str:
    if not data["warnings"]:
        return _section("## Warnings", "No warnings.")
    rows = [[w["code"], w.get("source", "-"), w["message"]] for w in data["warnings"]]
    return _section("## Warnings", _table(["Code", "Source", "Message"], rows))


def render_markdown(data: dict[str, object]) -> str:
    sections = [_overview(data), _runs(data), _regions(data), _attribution(data), _key_averages(data), _warnings(data)]
    return "\n\n".join(s for s in sections if s) + "\n"
