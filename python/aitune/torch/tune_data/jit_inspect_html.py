"""The JIT inspection report (docs/reference/jit.md): one self-contained HTML page (inline CSS, no scripts,
nothing from the network) listing every patched module with its calls, timings and types."""

from __future__ import annotations

import datetime
import html

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;background:#fafafa}
h1{font-size:22px}table{border-collapse:collapse;font-size:13px;background:#fff}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}th{background:#eee}
td.num{text-align:right;font-variant-numeric:tabular-nums}.bar{background:#1f77b4;height:8px}
code{font-size:12px}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _types(counts: dict[str, int]) -> str:
    return "<br>".join(f"<code>{_e(t)}</code> ×{n}" for t, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def render_inspection_html(rows: list[dict[str, object]], model_name: str) -> str:
    created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    # The title and the "Model: <name>" line are AITune's (docs/guide.md, "Coming from AITune").
    out = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>AITune Model Inspector: {_e(model_name)}</title><style>{_CSS}</style></head><body>",
        f'<h1>aitune JIT inspection: {_e(model_name)}</h1><p class="model">Model: {_e(model_name)}</p>',
        f"<p>Created {created}. {len(rows)} patched module(s). Times are wall-clock, CUDA-synchronised for "
        "modules on a GPU; a child's time is part of its parent's.</p>",
    ]
    if not rows:
        out.append(
            "<p><b>No patched module was called.</b> Enable inspection before the model is built "
            "(<code>import aitune.torch.jit.enable_inspection</code>).</p>"
        )
    else:
        out.append("<h2>Execution Details</h2>")
        out.append(
            "<table><tr><th>Module</th><th>Class</th><th>State</th><th>Call Count</th><th>Total time (s)</th>"
            "<th>Avg time (s)</th><th>% of head</th><th># of params</th><th>Argument types</th>"
            "<th>Output types</th></tr>"
        )
        for row in rows:
            share = 100.0 * float(row.get("share_of_head", 0.0))
            pad = 16 * int(row.get("level", 0))
            out.append(
                f'<tr><td style="padding-left:{pad + 8}px">{_e(row["name"])}</td><td>{_e(row["class"])}</td>'
                f"<td>{_e(row['state'])}</td><td class=num>{int(row['calls'])}</td>"
                f"<td class=num>{row['total_time_s']:.6f}</td><td class=num>{row['avg_time_s']:.6f}</td>"
                f'<td class=num>{share:.1f}<div class=bar style="width:{min(share, 100.0):.0f}px"></div></td>'
                f"<td class=num>{int(row['parameters']):,}</td><td>{_types(row['arg_types'])}</td>"
                f"<td>{_types(row['output_types'])}</td></tr>"
            )
        out.append("</table>")
    out.append("</body></html>")
    return "".join(out)
