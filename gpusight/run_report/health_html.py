"""The run report's health section (each GPU's findings over the run and its worst moment, the Xid events), the
Xid events as lanes of the advice timeline, and the MIG instances under each GPU. Every recorded string is escaped."""

from __future__ import annotations

from typing import Any

from gpusight.facts.health import HealthLevel
from gpusight.facts.xid_catalog import CATALOG_URL
from gpusight.run_report.health import GpuHealthRun, RunHealth
from gpusight.run_report.markup import esc, when
from gpusight.units import NA, fmt_bytes, fmt_percent

LEVEL_CLASS = {HealthLevel.DRAIN: "critical", HealthLevel.WARN: "warn", HealthLevel.NOTICE: "info",
               HealthLevel.OK: "info"}
"""The severity class (colour) of each health level, as the advice's."""


def level_text(level: HealthLevel) -> str:
    """``"drain"``, ``"warn"``, ``"notice"`` or ``"ok"``."""
    return level.name.lower()


def health_cell(gpu: GpuHealthRun | None) -> str:
    """The per-GPU table's health cell: the worst level and score of the run, or N/A when never read."""
    if gpu is None:
        return f'<span class="na">{NA}</span>'
    score = NA if gpu.worst_score is None else f"{gpu.worst_score}/100"
    return f'<span class="sev-{LEVEL_CLASS[gpu.worst_level]}">{esc(level_text(gpu.worst_level))}, {esc(score)}</span>'


def health_section(health: RunHealth) -> str:
    """The health section: per GPU its worst moment and every finding; then the Xid events."""
    blocks = [_gpu_block(gpu) for gpu in health.gpus]
    body = "".join(blocks) or "<p>No hardware health was recorded (recorded before gpusight read it, or NVML gave none).</p>"
    if health.instances_omitted:
        body += f'<p class="note">{health.instances_omitted} more MIG instances not listed.</p>'
    return f"""<section id="health"><h2>Hardware health</h2>
<p class="note">Judged on every snapshot as the live badge, advice and <code>--check</code> judge it. A drain finding
(pending or failed row remap, an Xid whose action is a reset or a reboot, a degraded PCIe link) means the GPU needed a
reset before its next job. Xid meanings follow NVIDIA's Xid catalog ({esc(CATALOG_URL.partition("://")[2])}).</p>
{body}{_xid_table(health)}</section>"""


def _gpu_block(gpu: GpuHealthRun) -> str:
    worst = NA if gpu.worst_score is None else f"{gpu.worst_score}/100 at {when(gpu.worst_at)}"
    last = NA if gpu.last_score is None else f"{gpu.last_score}/100"
    rows = "".join(
        f'<tr class="sev-{LEVEL_CLASS[f.level]}"><td>{esc(level_text(f.level))}</td><td class="wrap">{esc(f.title)}</td>'
        f'<td class="wrap">{esc(f.evidence)}</td><td class="wrap">{esc(f.action)}</td>'
        f"<td>{esc(when(f.first_seen))} – {esc(when(f.last_seen))}</td></tr>"
        for f in gpu.findings
    )
    table = (f"<table><thead><tr><th>Level</th><th>Finding</th><th>Evidence (latest)</th><th>Action</th>"
             f"<th>Seen</th></tr></thead><tbody>{rows}</tbody></table>" if rows else "<p>No finding during the run.</p>")
    return (f'<div class="gpu-health" id="health-gpu-{gpu.index}"><h3>GPU {gpu.index}: worst '
            f'<span class="sev-{LEVEL_CLASS[gpu.worst_level]}">{esc(level_text(gpu.worst_level))}</span>, lowest score '
            f"{esc(worst)}, last {esc(last)}</h3>{table}</div>")


def _xid_table(health: RunHealth) -> str:
    if not health.xids:
        return "<h3>Xid events</h3><p>No Xid event was recorded.</p>"
    rows = "".join(
        f'<tr class="sev-{"critical" if x.drains else "info"}"><td>{esc(when(x.timestamp))}</td><td>{x.device_index}</td>'
        f"<td>{NA if x.gpu_instance_id is None else x.gpu_instance_id}</td><td>{x.code}</td>"
        f'<td class="wrap">{esc(x.meaning)}</td><td>{"drain" if x.drains else "no"}</td></tr>'
        for x in health.xids
    )
    more = f'<p class="note">{health.xids_omitted} more Xid events not listed.</p>' if health.xids_omitted else ""
    return (f"<h3>Xid events</h3><table><thead><tr><th>Time</th><th>GPU</th><th>MIG instance</th><th>Xid</th>"
            f"<th>Meaning</th><th>Drain</th></tr></thead><tbody>{rows}</tbody></table>{more}")


def xid_lanes(health: RunHealth, origin: float) -> list[dict[str, Any]]:
    """The Xid events as timeline entries, one lane per GPU (``xid:gpu2``), critical where the Xid drains."""
    return [
        {"id": f"xid:gpu{x.device_index}", "severity": "critical" if x.drains else "info",
         "title": f"Xid {x.code} on GPU {x.device_index}: {x.meaning}", "start": round(x.timestamp - origin, 2),
         "end": round(x.timestamp - origin, 2)}
        for x in health.xids
    ]


def mig_table(health: RunHealth, index: int) -> str:
    """The MIG instances of GPU ``index`` over the run; empty when it had none."""
    rows = "".join(
        f"<tr><td>{m.device_index}.{m.gpu_instance_id}</td><td>{esc(m.profile) or NA}</td>"
        f"<td>{NA if m.compute_instance_id is None else m.compute_instance_id}</td>"
        f"<td>{esc(fmt_bytes(m.peak_memory_bytes))} / {esc(fmt_bytes(m.memory_total_bytes))}</td>"
        f"<td>{_activity(m.mean_sm_active, m.note)}</td><td>{esc(', '.join(map(str, m.pids))) or 'none'}</td>"
        f"<td>{esc(when(m.first_seen))} – {esc(when(m.last_seen))}</td></tr>"
        for m in health.instances if m.device_index == index
    )
    if not rows:
        return ""
    return (f"<h4>MIG instances</h4><table class=\"mig\"><thead><tr><th>Instance</th><th>Profile</th><th>CI</th>"
            f"<th>Peak memory</th><th>Mean SM active</th><th>Processes</th><th>Seen</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def _activity(mean: float | None, note: str) -> str:
    if mean is not None:
        return esc(fmt_percent(mean))
    return f'<span class="na">{NA}{": " + esc(note) if note else ""}</span>'
