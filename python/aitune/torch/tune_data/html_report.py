"""Self-contained HTML tuning report (docs/reference/tuning.md#telemetry-and-report): inline CSS and hand-drawn inline
SVG, no scripts from the network, rendered from the telemetry JSON (schema_version 4)."""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path
from typing import Any

from aitune.utils.json_types import JSONDict

_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
_EAGER_COLOR = "#555555"

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;background:#fafafa}
h1{font-size:22px}h2{font-size:19px;border-bottom:2px solid #ccc;padding-bottom:4px;margin-top:32px}
h3{font-size:16px;margin-top:24px}h4{font-size:14px;margin:16px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px;background:#fff}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}th{background:#eee}
td a,td code{overflow-wrap:anywhere}
.ok{color:#19752b;font-weight:600}.fail{color:#b00020;font-weight:600}.skip{color:#8a6d00;font-weight:600}
.graph{border:1px solid #ddd;border-radius:6px;padding:8px 16px;margin:12px 0;background:#fff}
.charts{display:flex;flex-wrap:wrap;gap:16px}pre{white-space:pre-wrap;font-size:12px;background:#f3f3f3;padding:6px}
.sel{background:#eef7ee;border:1px solid #9c9;padding:6px 10px;border-radius:4px}
code{font-size:12px}svg text{font-family:system-ui,sans-serif}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _fmt(value: object, digits: int = 4) -> str:
    if isinstance(value, bool) or value is None:
        return _e(value)
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return _e(value)


def _table(headers: list[str], rows: list[list[Any]], raw: bool = False) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c if raw else _fmt(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _kv_table(data: dict[str, Any]) -> str:
    return _table(
        ["Key", "Value"],
        [[k, v if not isinstance(v, (dict, list)) else json.dumps(v)] for k, v in (data or {}).items()],
    )


def _spec_tables(title: str, spec: dict[str, Any]) -> str:
    out = f"<h4>{_e(title)}</h4>"
    tensors = spec.get("tensors") or []
    out += (
        _table(
            ["Access Path", "Semantic Path", "Shape", "Min Shape", "Max Shape", "Dtype"],
            [
                [
                    t.get("access_path"),
                    t.get("semantic_path"),
                    t.get("shape"),
                    t.get("min_shape"),
                    t.get("max_shape"),
                    t.get("dtype"),
                ]
                for t in tensors
            ],
        )
        if tensors
        else "<p>(no tensors)</p>"
    )
    if spec.get("other"):
        out += _table(
            ["Access Path", "Semantic Path", "Value"],
            [[c.get("access_path"), c.get("semantic_path"), c.get("value")] for c in spec["other"]],
        )
    return out


def _worst(correctness: dict[str, Any]) -> dict[str, Any]:
    """The worst leaf of a candidate's numeric check: its error, shown beside its speed."""
    worst = correctness.get("worst")
    return worst if isinstance(worst, dict) else {}


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _nice_step(span: float, count: int = 4) -> float:
    """A 1-2-5 step that splits `span` into about `count` intervals (round axis labels)."""
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)


def _tick_label(value: float) -> str:
    """Short axis labels: 3300 -> 3.3k (scientific notation would overlap the axis title)."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def _line_chart(
    title: str,
    y_label: str,
    series: list[tuple[str, str, list[dict[str, Any]]]],
    key: str,
    whiskers: tuple[str, str] | None = None,
) -> str:
    """series: (label, color, points with batch_size and the key). X is log2 batch size."""
    width, height, left, right, top, bottom = 520, 300, 64, 170, 28, 42
    pts: list[tuple[str, str, list[tuple[float, float, float | None, float | None]]]] = []
    for label, color, rows in series:
        line = []
        for r in rows:
            x, y = _num(r.get("batch_size")), _num(r.get(key))
            if x is None or y is None or x <= 0:
                continue
            lo = _num(r.get(whiskers[0])) if whiskers else None
            hi = _num(r.get(whiskers[1])) if whiskers else None
            line.append((x, y, lo, hi))
        if line:
            pts.append((label, color, sorted(line)))
    if not pts:
        return ""
    xs = [p[0] for _, _, line in pts for p in line]
    ys = [v for _, _, line in pts for p in line for v in (p[1], p[2], p[3]) if v is not None]
    x0, x1 = math.log2(min(xs)), math.log2(max(xs))
    if x1 - x0 < 1e-9:
        x0, x1 = x0 - 1, x1 + 1
    step = _nice_step(max(ys) * 1.05 or 1.0)
    y1 = step * math.ceil(max(ys) * 1.05 / step) if max(ys) > 0 else 1.0
    pw, ph = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + (math.log2(x) - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return top + ph - (y / y1) * ph

    parts = [
        f'<svg width="{width}" height="{height}" role="img" '
        f'aria-label="{_e(title)}" style="background:#fff;border:1px solid #ddd">',
        f'<text x="{width / 2 - right / 2}" y="18" text-anchor="middle" font-size="13">{_e(title)}</text>',
        f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#333"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#333"/>',
    ]
    for i in range(round(y1 / step) + 1):
        y = step * i
        parts.append(f'<line x1="{left - 4}" y1="{sy(y):.1f}" x2="{left + pw}" y2="{sy(y):.1f}" stroke="#eee"/>')
        parts.append(
            f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end" font-size="10">{_tick_label(y)}</text>'
        )
    for x in sorted(set(xs)):
        parts.append(f'<text x="{sx(x):.1f}" y="{top + ph + 14}" text-anchor="middle" font-size="10">{int(x)}</text>')
    parts.append(f'<text x="{left + pw / 2}" y="{height - 8}" text-anchor="middle" font-size="11">batch size</text>')
    parts.append(
        f'<text x="14" y="{top + ph / 2}" text-anchor="middle" font-size="11" '
        f'transform="rotate(-90 14 {top + ph / 2})">{_e(y_label)}</text>'
    )
    for n, (label, color, line) in enumerate(pts):
        dash = ' stroke-dasharray="5,3"' if color == _EAGER_COLOR else ""
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y, _, _ in line)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{path}"/>')
        for x, y, lo, hi in line:
            cx, cy = sx(x), sy(y)
            if hi is not None:
                # whisker from the mean up to p99, with ticks at p90 and p99
                parts.append(f'<line x1="{cx:.1f}" y1="{cy:.1f}" x2="{cx:.1f}" y2="{sy(hi):.1f}" stroke="{color}"/>')
                parts.append(
                    f'<line x1="{cx - 4:.1f}" y1="{sy(hi):.1f}" x2="{cx + 4:.1f}" y2="{sy(hi):.1f}" stroke="{color}"/>'
                )
            if lo is not None:
                parts.append(
                    f'<line x1="{cx - 3:.1f}" y1="{sy(lo):.1f}" x2="{cx + 3:.1f}" y2="{sy(lo):.1f}" stroke="{color}"/>'
                )
            tip = f"{label}: bs={int(x)}, {key}={y:.4g}" + (f", p90={lo:.4g}, p99={hi:.4g}" if hi is not None else "")
            parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3" fill="{color}"><title>{_e(tip)}</title></circle>')
        ly = top + 8 + n * 16
        parts.append(f'<rect x="{left + pw + 10}" y="{ly - 8}" width="12" height="4" fill="{color}"/>')
        short = label if len(label) <= 24 else label[:23] + "…"
        parts.append(f'<text x="{left + pw + 26}" y="{ly}" font-size="10"><title>{_e(label)}</title>{_e(short)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _bar_chart(title: str, bars: list[tuple[str, float, str]]) -> str:
    bars = [(label, v, c) for label, v, c in bars if _num(v) is not None]
    if not bars:
        return ""
    label_w, bar_w, row_h = 220, 260, 20
    height = 30 + row_h * len(bars) + 10
    vmax = max(v for _, v, _ in bars) or 1.0
    parts = [
        f'<svg width="{label_w + bar_w + 80}" height="{height}" role="img" '
        f'aria-label="{_e(title)}" style="background:#fff;border:1px solid #ddd">',
        f'<text x="10" y="18" font-size="13">{_e(title)}</text>',
    ]
    for i, (label, v, color) in enumerate(bars):
        y = 30 + i * row_h
        w = max(1.0, v / vmax * bar_w)
        short = label if len(label) <= 34 else label[:33] + "…"
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end" font-size="10"><title>{_e(label)}</title>'
            f"{_e(short)}</text>"
        )
        parts.append(f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row_h - 6}" fill="{color}"/>')
        parts.append(f'<text x="{label_w + w + 4:.1f}" y="{y + 12}" font-size="10">{v:.3g} s</text>')
    parts.append("</svg>")
    return "".join(parts)


def _link(path: str | None, base: Path | None) -> str:
    if not path:
        return ""
    href = path
    if base is not None:
        try:
            href = os.path.relpath(path, base)
        except ValueError:
            href = path
    href = "/".join(href.split(os.sep))
    return f'<a href="{_e(href)}">{_e(path)}</a>'


def _status(build: dict[str, Any]) -> str:
    if build.get("skipped"):
        return '<span class="skip">skipped</span>'
    return '<span class="ok">success</span>' if build.get("success") else '<span class="fail">failed</span>'


def _graph_summary(graph: JSONDict, base: Path | None) -> list[str]:
    """The graph's heading and strategy row, a failure or kept-eager note, the selection, the specs."""
    out = [f'<div class="graph"><h3>Graph <code>{_e(graph.get("display_name") or graph.get("name"))}</code></h3>']
    # long paths are links, which may wrap anywhere (CSS), so the table fits the page
    out.append(
        _table(
            ["Strategy", "Description", "Device", "Samples", "Duration [s]", "Cache dir"],
            [
                [
                    _e(graph.get("strategy")),
                    _e(graph.get("strategy_description")),
                    _e(graph.get("device")),
                    _fmt(graph.get("num_samples")),
                    _fmt(graph.get("duration_s")),
                    _link(graph.get("cache_dir"), base),
                ]
            ],
            raw=True,
        )
    )
    if graph.get("exception"):
        exc = graph["exception"]
        out.append(
            f'<p class="fail">Graph tuning failed: {_e(exc.get("type"))}: {_e(exc.get("message"))}</p>'
            f"<details><summary>traceback</summary><pre>{_e(exc.get('traceback'))}</pre></details>"
        )
    if graph.get("outcome") == "kept_eager":
        out.append(f'<p class="skip"><b>Kept eager:</b> {_e(graph.get("outcome_message"))}</p>')
    search = graph.get("max_batch_search") or {}
    if search.get("stopped_by"):
        out.append(
            f"<p>Max-batch search stopped by {_e(search.get('stopped_by'))} after "
            f"{_fmt(search.get('elapsed_s'))} s.</p>"
        )
    sel = graph.get("selected_backend")
    speedup = graph.get("speedup")
    out.append(
        '<div class="sel"><b>Selected:</b> '
        + (_e(sel) if sel else "<i>none</i>")
        + (f" &nbsp; <b>speedup vs eager:</b> {_fmt(speedup, 4)}x" if _num(speedup) is not None else "")
        + f"<br><b>Rule:</b> {_e(graph.get('selection_rule'))}</div>"
    )
    out.append(_spec_tables("Input spec", graph.get("input_spec") or {}))
    out.append(_spec_tables("Output spec", graph.get("output_spec") or {}))
    return out


def _candidates_table(builds: list[dict[str, Any]], base: Path | None) -> str:
    rows = []
    for b in builds:
        err = b.get("error") or {}
        reason = b.get("skipped") or (f"{err.get('type')}: {err.get('message')}" if err else "")
        corr = b.get("correctness") or {}
        corr_text = (
            ""
            if not corr
            else ("passed" if corr.get("passed") else "failed")
            + f" ({_e(corr.get('precision_class'))}"
            + (f"; rel_l2 {_fmt(_worst(corr).get('rel_l2_error'), 3)}" if _worst(corr) else "")
            + (f"; decided by {_e(corr.get('decided_by'))})" if corr.get("decided_by") else ")")
        )
        meas = b.get("measurements") or []
        res = b.get("result") or {}
        meas_text = f"{len(meas)} batch sizes" if meas else ""
        if res.get("selected_batch_size") is not None:
            meas_text += f"; selected bs={res.get('selected_batch_size')}"
        steps = ", ".join(f"{s.get('name')} {_fmt(s.get('duration_s'), 3)}s" for s in b.get("steps") or [])
        detail = (
            f"<details><summary>{_e(reason[:120])}</summary><pre>{_e(err.get('traceback'))}</pre></details>"
            if err.get("traceback")
            else _e(reason)
        )
        rows.append(
            [
                f"<code>{_e(b.get('backend'))}</code>",
                _status(b),
                _fmt(b.get("duration_s"), 4),
                _e(steps),
                corr_text,
                _e(meas_text),
                _fmt(res.get("speedup_vs_eager")),
                detail,
                _link(b.get("log_file"), base),
            ]
        )
    return (
        _table(
            [
                "Backend",
                "Status",
                "Duration [s]",
                "Steps",
                "Correctness",
                "Measurements",
                "Speedup vs eager",
                "Failure / skip reason",
                "build.log",
            ],
            rows,
            raw=True,
        )
        if rows
        else "<p>(no candidates)</p>"
    )


def _measured_series(graph: JSONDict, builds: list[dict[str, Any]]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(label, colour, measurement rows) of every measured candidate, then of the eager baseline."""
    series = []
    color_i = 0
    for b in builds:
        if b.get("measurements"):
            series.append((b.get("backend") or "?", _COLORS[color_i % len(_COLORS)], b["measurements"]))
            color_i += 1
    if graph.get("baseline_measurements"):
        series.append(("eager baseline", _EAGER_COLOR, graph["baseline_measurements"]))
    return series


def _charts(builds: list[dict[str, Any]], series: list[tuple[str, str, list[dict[str, Any]]]]) -> str:
    charts = [
        _line_chart(
            "Latency (mean, whiskers p90/p99)",
            "host latency [ms]",
            series,
            "host_latency_ms_mean",
            ("host_latency_ms_p90", "host_latency_ms_p99"),
        ),
        _line_chart("Throughput", "samples / s", series, "throughput_per_s"),
        _bar_chart(
            "Build time",
            [
                (
                    b.get("backend") or "?",
                    b.get("duration_s"),
                    _COLORS[i % len(_COLORS)] if b.get("success") else "#b00020",
                )
                for i, b in enumerate(builds)
                if not b.get("skipped")
            ],
        ),
    ]
    charts = [c for c in charts if c]
    return '<div class="charts">' + "".join(charts) + "</div>" if charts else ""


def _numeric_table(builds: list[dict[str, Any]]) -> str:
    numeric_rows = []
    for b in builds:
        corr = b.get("correctness") or {}
        leaves = corr.get("leaves") or ([corr.get("worst")] if corr.get("worst") else [])
        for leaf in leaves:
            numeric_rows.append(
                [
                    b.get("backend"),
                    corr.get("precision_class"),
                    leaf.get("path", leaf.get("leaf", "")),
                    leaf.get("max_abs_error"),
                    leaf.get("max_rel_error"),
                    leaf.get("rel_l2_error"),
                    leaf.get("mismatch_fraction"),
                    leaf.get("has_nan"),
                    corr.get("passed"),
                ]
            )
    if not numeric_rows:
        return ""
    return "<h4>Numeric check</h4>" + _table(
        [
            "Backend",
            "Precision class",
            "Leaf",
            "Max abs err",
            "Max rel err",
            "Rel L2 err",
            "Mismatch fraction",
            "NaN",
            "Passed",
        ],
        numeric_rows,
    )


def _measurements_table(series: list[tuple[str, str, list[dict[str, Any]]]]) -> str:
    meas_rows = []
    for label, _, rows_ in series:
        for r in rows_:
            meas_rows.append(
                [
                    label,
                    r.get("batch_size"),
                    r.get("host_latency_ms_mean"),
                    r.get("host_latency_ms_median"),
                    r.get("host_latency_ms_p90"),
                    r.get("host_latency_ms_p99"),
                    r.get("host_latency_cv"),
                    r.get("throughput_per_s"),
                    r.get("num_measured_calls"),
                ]
            )
    if not meas_rows:
        return ""
    return "<h4>Measurements</h4>" + _table(
        [
            "Backend",
            "Batch",
            "Mean [ms]",
            "Median [ms]",
            "p90 [ms]",
            "p99 [ms]",
            "CV",
            "Throughput [/s]",
            "Calls",
        ],
        meas_rows,
    )


def _graph_html(graph: JSONDict, base: Path | None) -> str:
    builds = graph.get("builds") or []
    series = _measured_series(graph, builds)
    out = _graph_summary(graph, base)
    out += ["<h4>Candidates</h4>", _candidates_table(builds, base), _charts(builds, series)]
    out += [_numeric_table(builds), _measurements_table(series)]
    if graph.get("perf_validation_results"):
        out.append("<h4>Performance validation</h4>")
        keys = sorted({k for r in graph["perf_validation_results"] for k in r})
        out.append(_table(keys, [[r.get(k) for k in keys] for r in graph["perf_validation_results"]]))
    out.append("</div>")
    return "".join(out)


def render_html(data: dict[str, Any], report_path: str | os.PathLike | None = None) -> str:
    """One self-contained HTML page for a RunReport JSON dict."""
    base = Path(report_path).parent if report_path else None
    out = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        "<title>aitune tuning report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>aitune tuning report</h1>",
    ]
    exc = data.get("exception")
    out.append(
        _table(
            ["Schema", "aitune", "Mode", "Started", "Duration [s]", "Result"],
            [
                [
                    _e(data.get("schema_version")),
                    _e(data.get("aitune_version")),
                    _e(data.get("mode")),
                    _e(data.get("started_at")),
                    _fmt(data.get("duration_s")),
                    f'<span class="fail">{_e(exc.get("type"))}: {_e(exc.get("message"))}</span>'
                    if exc
                    else '<span class="ok">completed</span>',
                ]
            ],
            raw=True,
        )
    )
    for module in data.get("modules") or []:
        out.append(f"<h2>Module <code>{_e(module.get('name'))}</code></h2>")
        out.append(f"<p>Duration: {_fmt(module.get('duration_s'))} s</p>")
        if module.get("exception"):
            m_exc = module["exception"]
            out.append(f'<p class="fail">Module failed: {_e(m_exc.get("type"))}: {_e(m_exc.get("message"))}</p>')
        for graph in module.get("graphs") or []:
            out.append(_graph_html(graph, base))
    out.append("<h2>Environment fingerprint</h2>" + _kv_table(data.get("fingerprint") or {}))
    out.append("<h2>Configuration</h2>" + _kv_table(data.get("config") or {}))
    out.append("</body></html>")
    return "".join(out)
