"""Hardware health: a GPU that must be drained (pending or failed row remap, a draining Xid, a degraded PCIe link),
one with a lesser fault, or one worth watching, as :func:`gpusight.facts.health.assess` judges it.

The judgement is the one the badge, the detail screen and the cluster view use, so they agree. Faults show at once
(no hold): a pending remap or an Xid does not flicker, and a GPU that must be drained should be drained now. A lost
GPU is judged too: its last Xid (79, fallen off the bus) is the reason it stopped answering.
"""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule
from gpusight.facts.health import HealthAssessment, HealthLevel, assess
from gpusight.snapshot.model import ScopeKind, Severity

SEVERITIES = {HealthLevel.DRAIN: Severity.CRITICAL, HealthLevel.WARN: Severity.WARN, HealthLevel.NOTICE: Severity.INFO}
"""The advice severity of each health level that gets advice (``OK`` gets none)."""


def _evaluate(ctx: Context) -> list[Finding]:
    findings = []
    for device in sorted(ctx.snapshot.devices, key=lambda d: d.index):
        judged = assess(device, ctx.now)
        if judged.level is HealthLevel.OK:
            continue
        findings.append(_advise(device.index, judged))
    return findings


def _advise(index: int, judged: HealthAssessment) -> Finding:
    """One piece of advice for GPU ``index``: the worst level's findings with their evidence and actions, the rest
    named after them."""
    level = judged.level
    worst = [f for f in judged.findings if f.level is level]
    rest = [f for f in judged.findings if f.level is not level]
    title = worst[0].title + (f" (and {len(worst) - 1} more)" if len(worst) > 1 else "")
    if level is HealthLevel.DRAIN:
        title = f"drain gpu{index} / reset needed: {title}"
    else:
        title = f"GPU {index} health: {title}"
    evidence = "; ".join(_distinct([f.evidence for f in worst]))
    if rest:
        evidence += "; also " + ", ".join(f.title for f in rest)
    if judged.score is not None:
        evidence += f"; health score {judged.score}/100"
    action = "; ".join(_distinct([f.action for f in worst]))
    devices = () if level is HealthLevel.NOTICE else (index,)
    return RULE.finding(SEVERITIES[level], ScopeKind.GPU.of(index), title, evidence, action, devices)


def _distinct(texts: list[str]) -> list[str]:
    """``texts`` without repeats and without any text another one already contains, in their order (a degraded
    link's width and generation findings state the same link)."""
    unique = list(dict.fromkeys(texts))
    return [text for text in unique if not any(text != other and text in other for other in unique)]


RULE = Rule("health", "GPU hardware fault", _evaluate, needs=("health",), hold=lambda thresholds: 0.0)
"""A GPU's hardware health as :func:`~gpusight.facts.health.assess` judges it, shown at once."""
