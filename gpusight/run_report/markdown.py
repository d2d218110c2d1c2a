"""The run summary as a Markdown section, for the report of the ``s`` export (same numbers as the HTML report)."""

from __future__ import annotations

from gpusight.run_report.markup import hours, percentile_text, when
from gpusight.run_report.summary import IDLE_UTIL_PERCENT, RunSummary
from gpusight.textsafe import md_escape
from gpusight.units import NA, fmt_duration, fmt_percent


def summary_markdown(summary: RunSummary, html_name: str | None = None) -> list[str]:
    """The lines of a ``## Run summary`` section (recorded text escaped for Markdown); ``html_name`` is
    the HTML report beside the Markdown (linked when given)."""
    lines = ["## Run summary", ""]
    if summary.snapshots == 0:
        return lines + ["No samples yet.", ""]
    lines.append(
        f"Over this session's history: {summary.snapshots} samples from {when(summary.first_timestamp)} to "
        f"{when(summary.last_timestamp)} UTC ({fmt_duration(summary.covered_seconds)}, gaps excluded)."
    )
    if html_name is not None:
        lines.append(f"Plots of the same numbers: [{md_escape(html_name)}]({md_escape(html_name)}).")
    lines += ["", f"Idle GPU-hours: {hours(summary.idle_gpu_hours)} (utilization at or below "
              f"{IDLE_UTIL_PERCENT:g} % in a sample).", ""]
    lines.append("| GPU | Mean util | p95 util | Idle GPU-h | SM active | Tensor active |")
    lines.append("| --- | --- | --- | --- | --- | --- |")
    for gpu in summary.gpus:
        sm = NA if gpu.mean_sm_active is None else fmt_percent(gpu.mean_sm_active)
        tensor = NA if gpu.mean_tensor_active is None else fmt_percent(gpu.mean_tensor_active)
        lines.append(f"| {gpu.index} | {fmt_percent(gpu.mean_util)} | {percentile_text(gpu.p95_util)} | "
                     f"{hours(gpu.idle_hours)} | {sm} | {tensor} |")
    lines += ["", "Top findings:", ""]
    if not summary.findings:
        lines.append("- None: no advice was raised.")
    for number, finding in enumerate(summary.findings, 1):
        episodes = f"{finding.episodes} episode{'s' if finding.episodes != 1 else ''}"
        lines.append(f"{number}. **{md_escape(str(finding.severity))}: {md_escape(finding.summary)}** ({md_escape(finding.scope)}, "
                     f"{fmt_duration(finding.seconds)} in {episodes}): {md_escape(finding.title)}. "
                     f"Action: {md_escape(finding.action)}")
    lines.append("")
    return lines
