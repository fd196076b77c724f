"""A Markdown view of a PerformanceProfile's data: overview, runs, regions (with each run's
shares and the residual), the profiler's top operators and warnings."""

from __future__ import annotations

from typing import Any


def _us(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.3f} ms" if value >= 1000 else f"{value:.1f} us"


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(data: dict[str, Any]) -> str:
    config, inputs = data["config"], data["input"]
    sections = [
        "# Performance Profile",
        _table(
            ["Field", "Value"],
            [
                ["Created", f"`{data['created_at']}`"],
                ["aitune version", f"`{data['aitune_version']}`"],
                ["Target", f"`{data['target']['type']}`"],
                ["Warmup runs", config["warmup_runs"]],
                ["Measured runs", config["measured_runs"]],
                ["Uses inference function", "yes" if config["uses_inference_function"] else "no"],
                ["Input args", inputs["args_count"]],
                ["Input kwargs", ", ".join(inputs["kwargs"]) or "-"],
            ],
        ),
    ]
    sections += [
        "## Runs",
        _table(
            ["Run", "Wall", "CPU", "Device", "Residual CPU"],
            [
                [
                    r["run_index"],
                    _us(r["timing"]["wall_time_us"]),
                    _us(r["timing"]["cpu_time_us"]),
                    _us(r["timing"].get("device_time_us")),
                    _pct(r["residual"]["cpu_time_fraction"]),
                ]
                for r in data["runs"]
            ],
        ),
    ]
    if data["regions"]:
        shares: dict[str, list[float]] = {}
        for run in data["runs"]:
            for row in run["regions"]:
                shares.setdefault(row["region_id"], []).append(row.get("cpu_time_fraction", 0.0))
        sections += [
            "## Regions",
            _table(
                ["Region", "Kind", "State", "Module type", "Mean CPU share"],
                [
                    [
                        f"`{r['id']}`",
                        r["kind"],
                        r.get("wrapper_state", "-"),
                        f"`{r['module_type']}`",
                        _pct(sum(shares.get(r["id"], [])) / len(shares[r["id"]]) if shares.get(r["id"]) else None),
                    ]
                    for r in data["regions"]
                ],
            ),
        ]
    else:
        sections += ["## Regions", "No regions were observed."]
    for name, view in data["profiler"]["key_averages"].items():
        sections += [
            f"## Top operators by {name.replace('_', ' ')}",
            _table(
                ["Operator", "Device", "Calls", "Self CPU", "CPU total", "Device total"],
                [
                    [
                        f"`{e['key']}`",
                        e["device_type"],
                        e["count"],
                        _us(e["self_cpu_time_total_us"]),
                        _us(e["cpu_time_total_us"]),
                        _us(e.get("device_time_total_us")),
                    ]
                    for e in view["events"]
                ],
            ),
        ]
    if data["warnings"]:
        sections += ["## Warnings", "\n".join(f"- `{w['code']}`: {w['message']}" for w in data["warnings"])]
    return "\n\n".join(sections) + "\n"
