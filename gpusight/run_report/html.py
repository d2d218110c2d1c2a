"""The run report as one self-contained HTML file: tables in HTML, charts drawn by uPlot from inlined JSON.

Nothing is fetched: uPlot (vendored in ``assets/``, see ``assets/VENDORED.md``), the page's script and its style are
inlined, and a Content-Security-Policy forbids every network request. Every string from a recording is HTML-escaped
(:func:`html.escape`); the JSON inside ``<script>`` has ``<``, ``>``, ``&`` and U+2028/U+2029 escaped, so no
recorded text can close the script element or break the JavaScript.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from gpusight.run_report.health_html import health_cell, health_section, mig_table, xid_lanes
from gpusight.run_report.markup import chart, chart_slot, esc, hours, percentile_text, when
from gpusight.run_report.speed_html import speed_charts, speed_section
from gpusight.run_report.summary import (
    IDLE_UTIL_PERCENT,
    AdviceEpisode,
    Finding,
    GpuSummary,
    RunSummary,
    SeriesSet,
)
from gpusight.textsafe import safe_text
from gpusight.units import NA, fmt_bytes, fmt_duration, fmt_percent

MAX_PROCESS_ROWS = 200
"""Processes listed (most GPU-hours first); the rest are counted."""

MAX_EPISODE_ROWS = 500
"""Advice episodes listed in the table (the lanes show them all)."""

SECTIONS = ("summary", "health", "speed", "gpus", "host", "advice", "processes", "problems")
"""The ids of the report's sections, in order."""

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
"""The pages' Content-Security-Policy: nothing may be fetched."""

# Per chart: (id suffix, title, unit, [(metric, label, colour)], scale divisor, decimals)
_GPU_CHARTS: tuple[tuple[str, str, str, tuple[tuple[str, str, str], ...], float, int], ...] = (
    ("util", "Utilization", "%", (("utilization_gpu_percent", "GPU util", "#2b6cb0"),
                                  ("sm_active_percent", "SM active", "#2f855a"),
                                  ("tensor_active_percent", "Tensor active", "#b7791f")), 1.0, 1),
    ("memory", "Memory used", "GiB", (("memory_used_bytes", "Used", "#6b46c1"),), 2.0**30, 2),
    ("power", "Power", "W", (("power_watts", "Power", "#c53030"),), 1.0, 1),
    ("temperature", "Temperature", "°C", (("temperature_celsius", "Temperature", "#dd6b20"),), 1.0, 1),
    ("pcie", "PCIe", "MB/s", (("pcie_rx_bytes_per_s", "RX (to GPU)", "#319795"),
                              ("pcie_tx_bytes_per_s", "TX (from GPU)", "#805ad5")), 1e6, 1),
    ("video", "Video engines", "%", (("encoder_percent", "Encoder (NVENC)", "#d53f8c"),
                                     ("decoder_percent", "Decoder (NVDEC)", "#2c7a7b")), 1.0, 1),
)
_OPTIONAL_CHARTS = frozenset({"video"})
"""GPU charts drawn only for a GPU that reported one of their series (most GPUs never decode video)."""
_HOST_CHARTS: tuple[tuple[str, str, str, tuple[tuple[str, str, str], ...], float, int], ...] = (
    ("cpu", "CPU (mean over cores) and iowait", "%", (("cpu_percent", "CPU", "#2b6cb0"),
                                                      ("iowait_percent", "iowait", "#c53030")), 1.0, 1),
    ("memory", "Host memory used", "GiB", (("memory_used_bytes", "Used", "#6b46c1"),), 2.0**30, 2),
)


def asset(name: str) -> str:
    """The text of a file in ``assets/`` (vendored uPlot, the page's script and style)."""
    return resources.files("gpusight.run_report").joinpath("assets").joinpath(name).read_text(encoding="utf-8")


def script_json(data: object) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element (no ``</``, ``<!--``, U+2028/U+2029)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _chart_data(series: SeriesSet, origin: float) -> dict[str, Any]:
    """The charts as JSON: bucket offsets from ``origin`` and, per chart, its series' (min, mean, max) columns."""
    charts = []
    for index, metrics in series.devices.items():
        for suffix, title, unit, lines, divisor, decimals in _gpu_charts(metrics):
            charts.append(chart(f"gpu{index}-{suffix}", title, unit, lines, metrics, divisor, decimals))
    for suffix, title, unit, lines, divisor, decimals in _HOST_CHARTS:
        charts.append(chart(f"host-{suffix}", title, unit, lines, series.host, divisor, decimals))
    return {
        "origin": origin,
        "offsets": [round(t - origin, 2) for t in series.times],
        "bucket": series.bucket_seconds,
        "charts": charts,
    }


def _gpu_charts(metrics: dict[str, Any]) -> list[tuple[str, str, str, tuple[tuple[str, str, str], ...], float, int]]:
    """The charts of a GPU with ``metrics`` reported: every chart but an optional one none of whose series it has."""
    return [c for c in _GPU_CHARTS if c[0] not in _OPTIONAL_CHARTS or any(line[0] in metrics for line in c[3])]


def _summary_section(summary: RunSummary) -> str:
    health = {gpu.index: gpu for gpu in summary.health.gpus}
    rows = "".join(_gpu_row(gpu, health_cell(health.get(gpu.index))) for gpu in summary.gpus)
    host = summary.host
    findings = "".join(_finding(f) for f in summary.findings) or "<li>No advice was raised.</li>"
    return f"""<section id="summary"><h2>Summary</h2>
<div class="facts">
<div><b>{esc(hours(summary.idle_gpu_hours))}</b> idle GPU-hours</div>
<div><b>{esc(fmt_duration(summary.covered_seconds))}</b> recorded</div>
<div><b>{len(summary.gpus)}</b> GPUs</div>
<div><b>{len(summary.processes)}</b> GPU processes</div>
<div><b>{esc(fmt_percent(host.mean_cpu))}</b> mean host CPU</div>
<div><b>{esc(fmt_percent(host.mean_iowait))}</b> mean iowait</div>
</div>
<h3>Top findings</h3><ol class="findings">{findings}</ol>
<h3>Per GPU</h3>
<table><thead><tr><th>GPU</th><th>Name</th><th>Mean util</th><th>p95 util</th><th>Idle GPU-h</th>
<th>Reported h</th><th>SM active</th><th>Tensor active</th><th>Peak memory</th><th>Seen</th><th>Lost</th>
<th>Health (worst)</th></tr></thead>
<tbody>{rows}</tbody></table>
<p class="note">Idle: utilization at or below {IDLE_UTIL_PERCENT:g} % in a sample (the advice rules' idle threshold).
Means and percentiles are weighted by time; gaps in the recording count for nothing.</p>
</section>"""


def _gpu_row(gpu: GpuSummary, health: str) -> str:
    not_reported = '<span class="na">not reported</span>'
    sm = not_reported if gpu.mean_sm_active is None else esc(fmt_percent(gpu.mean_sm_active))
    tensor = not_reported if gpu.mean_tensor_active is None else esc(fmt_percent(gpu.mean_tensor_active))
    memory = fmt_bytes(gpu.peak_memory_bytes)
    if gpu.memory_total_bytes:
        memory += f" / {fmt_bytes(gpu.memory_total_bytes)}"
    lost = "" if gpu.lost_at is None else f"from {when(gpu.lost_at)} ({fmt_duration(gpu.lost_hours * 3600)})"
    p95 = percentile_text(gpu.p95_util)
    return (f"<tr><td>{gpu.index}</td><td>{esc(gpu.name) or NA}</td><td>{esc(fmt_percent(gpu.mean_util))}</td>"
            f"<td>{esc(p95)}</td><td>{esc(hours(gpu.idle_hours))}</td><td>{esc(hours(gpu.reported_hours))}</td>"
            f"<td>{sm}</td><td>{tensor}</td><td>{esc(memory)}</td>"
            f"<td>{esc(when(gpu.first_seen))} – {esc(when(gpu.last_seen))}</td><td>{esc(lost)}</td><td>{health}</td></tr>")


def _finding(finding: Finding) -> str:
    return (f'<li class="sev-{esc(finding.severity)}"><b>{esc(finding.severity)}: {esc(finding.summary)}</b> '
            f"({esc(finding.scope)}, {esc(fmt_duration(finding.seconds))} in {finding.episodes} "
            f"episode{'s' if finding.episodes != 1 else ''})<br>{esc(finding.title)}"
            f'<br><span class="action">Action: {esc(finding.action)}</span></li>')


def _gpus_section(summary: RunSummary) -> str:
    blocks = []
    for gpu in summary.gpus:
        metrics = summary.series.devices.get(gpu.index, {})
        charts = "".join(chart_slot(f"gpu{gpu.index}-{c[0]}") for c in _gpu_charts(metrics))
        blocks.append(f'<div class="gpu" id="gpu-{gpu.index}"><h3>GPU {gpu.index} {esc(gpu.name)}</h3>'
                      f'<div class="charts">{charts}</div>{mig_table(summary.health, gpu.index)}</div>')
    body = "".join(blocks) or "<p>No GPU in this recording.</p>"
    return f"""<section id="gpus"><h2>GPUs</h2>
<p class="note">Each line is the mean of a time bucket; the shaded band spans the bucket's minimum to maximum, so a
short stall stays visible when a long run is drawn. Drag across a chart to zoom every chart to that time range;
double-click or <button type="button" id="reset-zoom">Reset zoom</button> to see the whole run.</p>
{body}</section>"""


def _host_section(summary: RunSummary) -> str:
    host = summary.host
    charts = "".join(chart_slot(f"host-{c[0]}") for c in _HOST_CHARTS)
    memory = fmt_bytes(host.peak_memory_bytes)
    if host.memory_total_bytes:
        memory += f" of {fmt_bytes(host.memory_total_bytes)}"
    return f"""<section id="host"><h2>Host {esc(host.hostname)}</h2>
<p>Mean CPU {esc(fmt_percent(host.mean_cpu))}, mean iowait {esc(fmt_percent(host.mean_iowait))}, peak memory used
{esc(memory)}.</p><div class="charts host">{charts}</div></section>"""


def _advice_section(summary: RunSummary) -> str:
    rows = "".join(_episode_row(e) for e in summary.episodes[:MAX_EPISODE_ROWS])
    more = len(summary.episodes) - MAX_EPISODE_ROWS + summary.episodes_omitted
    note = f"<p class=\"note\">{more} more episodes not listed.</p>" if more > 0 else ""
    table = (f"<table><thead><tr><th>Severity</th><th>Advice</th><th>Scope</th><th>Raised</th><th>Cleared</th>"
             f"<th>Stood</th></tr></thead><tbody>{rows}</tbody></table>{note}") if rows else "<p>No advice was raised.</p>"
    return f"""<section id="advice"><h2>Advice timeline</h2>
<p class="note">One lane per piece of advice; lanes named <code>xid:gpuN</code> mark the Xid events of GPU N.</p>
<div id="lanes" class="lanes"></div>
{table}</section>"""


def _episode_row(e: AdviceEpisode) -> str:
    cleared = "still standing at the end" if e.cleared is None else when(e.cleared)
    return (f'<tr class="sev-{esc(e.severity)}"><td>{esc(e.severity)}</td><td class="wrap">{esc(e.title)}</td>'
            f"<td>{esc(e.scope)}</td><td>{esc(when(e.raised))}</td><td>{esc(cleared)}</td>"
            f"<td>{esc(fmt_duration(e.seconds))}</td></tr>")


def _processes_section(summary: RunSummary, missing: str) -> str:
    rows = []
    for p in summary.processes[:MAX_PROCESS_ROWS]:
        sm = NA if p.sm_gpu_hours is None else hours(p.sm_gpu_hours)
        job = "" if p.job is None else str(p.job)
        rank = "" if p.rank is None else str(p.rank)
        gpus = ",".join(str(d) for d in p.devices)
        rows.append(f"<tr><td>{p.pid}</td><td>{esc(p.user) or NA}</td><td>{esc(gpus)}</td><td>{esc(job)}</td>"
                    f"<td>{esc(rank)}</td><td>{esc(hours(p.gpu_hours))}</td><td>{esc(sm)}</td>"
                    f"<td>{esc(fmt_bytes(p.peak_memory_bytes))}</td><td>{esc(when(p.first_seen))}</td>"
                    f'<td>{esc(when(p.last_seen))}</td><td class="cmd">{esc(p.command) or NA}</td></tr>')
    more = len(summary.processes) - MAX_PROCESS_ROWS
    note = f'<p class="note">{more} more processes not listed.</p>' if more > 0 else ""
    processes = (f"<table><thead><tr><th>PID</th><th>User</th><th>GPUs</th><th>Job</th><th>Rank</th><th>GPU-h</th>"
                 f"<th>SM-weighted GPU-h</th><th>Peak GPU memory</th><th>First seen</th><th>Last seen</th>"
                 f"<th>Command</th></tr></thead><tbody>{''.join(rows)}</tbody></table>{note}"
                 if rows else f"<p>{esc(missing)}</p>")
    job_rows = "".join(
        f"<tr><td>{j.id}</td><td>{esc(j.kind)}</td><td>{esc(','.join(map(str, j.devices)))}</td>"
        f"<td>{j.processes}</td><td>{esc(','.join(map(str, j.ranks)))}</td><td>{esc(hours(j.gpu_hours))}</td>"
        f"<td>{esc(fmt_bytes(j.peak_memory_bytes))}</td><td>{esc(when(j.first_seen))}</td>"
        f'<td>{esc(when(j.last_seen))}</td><td class="wrap">{esc(j.evidence)}</td></tr>'
        for j in summary.jobs
    )
    jobs = (f"<table><thead><tr><th>Job</th><th>Kind</th><th>GPUs</th><th>Processes</th><th>Ranks</th><th>GPU-h</th>"
            f"<th>Peak GPU memory</th><th>First seen</th><th>Last seen</th><th>Evidence</th></tr></thead>"
            f"<tbody>{job_rows}</tbody></table>" if job_rows else "<p>No jobs in this recording.</p>")
    return f"""<section id="processes"><h2>Processes and jobs</h2>
<p class="note">GPU-hours: time a process held a GPU context, per GPU; SM-weighted: the same weighted by the
process's SM share as NVML reports it.</p>
<h3>GPU processes</h3>{processes}<h3>Jobs</h3>{jobs}</section>"""


def _problems_section(summary: RunSummary) -> str:
    items = [f"<li>{esc(p)}</li>" for p in summary.problems]
    if summary.problems_omitted:
        items.append(f"<li>{summary.problems_omitted} more damaged parts.</li>")
    items += [f"<li>gap: no snapshot from {esc(when(a))} to {esc(when(b))} ({esc(fmt_duration(b - a))})</li>"
              for a, b in summary.gaps]
    if summary.gaps_omitted:
        items.append(f"<li>{summary.gaps_omitted} more gaps.</li>")
    if summary.out_of_order:
        items.append(f"<li>{summary.out_of_order} snapshots not later than the one before them were skipped "
                     "(the clock stepped back).</li>")
    body = f"<ul>{''.join(items)}</ul>" if items else "<p>None: every part of the recording was read.</p>"
    return f'<section id="problems"><h2>Problems</h2>{body}</section>'


def _credits() -> str:
    """The footer crediting uPlot, with its MIT notice (the licence asks for it in every copy, and the page is one)."""
    notice = esc(asset("uPlot.LICENSE").strip())
    return ("<footer><p>Made by gpusight. Charts drawn with uPlot (github.com/leeoniya/uPlot), inlined under its "
            f"licence:</p><details><summary>uPlot's licence</summary><pre>{notice}</pre></details></footer>")


def render_html(summary: RunSummary, source: str, no_processes: str = "No GPU processes in this recording.") -> str:
    """The report of ``summary`` as one HTML document; ``source`` (a file name or a session) is shown as text,
    ``no_processes`` where there is no process to list."""
    source = safe_text(source, 200)
    origin = summary.first_timestamp or 0.0
    data = _chart_data(summary.series, origin)
    data["charts"] += speed_charts(summary)
    data["episodes"] = xid_lanes(summary.health, origin) + [
        {"id": e.advice_id, "severity": str(e.severity), "title": e.title, "start": round(e.raised - origin, 2),
         "end": round((e.cleared if e.cleared is not None else (summary.last_timestamp or origin)) - origin, 2)}
        for e in summary.episodes
    ]
    labels = ", ".join(summary.labels)
    span = f"{when(summary.first_timestamp)} to {when(summary.last_timestamp)} UTC"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gpusight run report: {esc(source)}</title>
<style>{asset("uPlot.min.css")}</style>
<style>{asset("report.css")}</style>
</head><body data-ready="false">
<header><h1>gpusight run report</h1>
<p>{esc(source)}{" — " + esc(labels) if labels else ""}<br>{esc(span)}, {summary.snapshots} snapshots,
every {esc(f"{summary.interval_seconds:.3g}" if summary.interval_seconds else NA)} s. Charts: buckets of
{esc(f"{summary.series.bucket_seconds:g}")} s.</p></header>
<pre id="js-errors" hidden></pre>
{_summary_section(summary)}
{health_section(summary.health)}
{speed_section(summary)}
{_gpus_section(summary)}
{_host_section(summary)}
{_advice_section(summary)}
{_processes_section(summary, no_processes)}
{_problems_section(summary)}
{_credits()}
<script type="application/json" id="report-data">{script_json(data)}</script>
<script>{asset("errors.js")}</script>
<script>{asset("uPlot.iife.min.js")}</script>
<script>{asset("report.js")}</script>
</body></html>
"""
