"""The comparison of two runs as one self-contained HTML page and as Markdown (the same rows in both)."""

from __future__ import annotations

from gpusight.run_report.compare import Comparison, Row, ratio_text
from gpusight.run_report.html import CSP, asset
from gpusight.run_report.markup import esc, when
from gpusight.run_report.speed_html import breakdown_bar
from gpusight.textsafe import md_escape
from gpusight.units import NA


def _html_rows(rows: tuple[Row, ...]) -> str:
    def ratio_cell(row: Row) -> str:
        return f"<td>{esc(ratio_text(row))}</td>"

    return "".join(f"<tr><th>{esc(r.label)}</th><td>{esc(r.a)}</td><td>{esc(r.b)}</td>{ratio_cell(r)}</tr>"
                   for r in rows)


def _table(rows: tuple[Row, ...], names: tuple[str, str]) -> str:
    return (f'<table class="figures compare"><thead><tr><th></th><th>A: {esc(names[0])}</th><th>B: {esc(names[1])}</th>'
            f"<th>B/A</th></tr></thead><tbody>{_html_rows(rows)}</tbody></table>")


def compare_html(c: Comparison) -> str:
    """The comparison as one HTML document (no script; the report's style inlined)."""
    spans = "".join(
        f"<li><b>{label}</b>: {esc(name)}, {esc(when(s.first_timestamp))} to {esc(when(s.last_timestamp))} UTC, "
        f"{s.snapshots} snapshots. Main job: {esc(why)}</li>"
        for label, name, s, why in zip("AB", c.names, c.summaries, c.matching, strict=True)
    )
    warnings = "".join(f"<li>{esc(w)}</li>" for w in c.warnings)
    bars = "".join(
        f"<div><h4>{label}: {esc(name)}</h4>"
        + (breakdown_bar(job.speed.breakdown) if job is not None and job.speed is not None
           and job.speed.breakdown is not None else "<p>Step-time breakdown: not measured.</p>") + "</div>"
        for label, name, job in zip("AB", c.names, c.jobs, strict=True)
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gpusight comparison: {esc(c.names[0])} and {esc(c.names[1])}</title>
<style>{asset("report.css")}</style>
</head><body>
<header><h1>gpusight: two runs compared</h1><ul>{spans}</ul></header>
{f'<section id="warnings"><h2>Read with care</h2><ul>{warnings}</ul></section>' if warnings else ""}
<section id="job"><h2>Main training job</h2>
<p class="note">Figures weighted by time over each run (percentiles to 1 %); B/A above 1 means B's figure is higher.
Steps/s is the slowest rank's; samples/s, tokens/s and FLOP/s are summed over the ranks.</p>
{_table(c.job_rows, c.names)}
<h3>Step-time breakdown, averaged over each run</h3><div class="charts">{bars}</div></section>
<section id="run"><h2>Whole run</h2>{_table(c.run_rows, c.names)}</section>
<footer><p>Made by gpusight (<code>gpusight --report A B</code>).</p></footer>
</body></html>
"""


def compare_markdown(c: Comparison) -> str:
    """The comparison as Markdown, its recorded text escaped for Markdown."""
    lines = ["# gpusight: two runs compared", ""]
    for label, name, s, why in zip("AB", c.names, c.summaries, c.matching, strict=True):
        lines.append(f"- **{label}**: {md_escape(name)}, {when(s.first_timestamp)} to {when(s.last_timestamp)} UTC, "
                     f"{s.snapshots} snapshots. Main job: {md_escape(why)}")
    if c.warnings:
        lines += ["", "Read with care:", ""] + [f"- {md_escape(w)}" for w in c.warnings]
    for title, rows in (("Main training job", c.job_rows), ("Whole run", c.run_rows)):
        lines += ["", f"## {title}", "", f"| | A: {md_escape(c.names[0])} | B: {md_escape(c.names[1])} | B/A |",
                  "| --- | --- | --- | --- |"]
        lines += [f"| {md_escape(r.label)} | {md_escape(r.a)} | {md_escape(r.b)} | {ratio_text(r)} |" for r in rows]
    lines += ["", "B/A above 1 means B's figure is higher; " + (NA + ": a figure unknown in either run or 0 in A."), ""]
    return "\n".join(lines)
