"""One consistent verdict per GPU: bottleneck rules in precedence order, and tuning advice only where the GPU waits on nothing outside it.

Applied once by the engine, to the findings of each evaluation and again to what hysteresis shows,
so no rule has to know which others exist.
"""

from __future__ import annotations

from gpusight.advice.context import Finding

BOTTLENECKS = (
    "stuck",
    "periodic_stall",
    "decoder_bound",
    "storage_bound",
    "few_workers",
    "input_bound",
    "straggler",
    "imbalance",
    "comm_bound",
    "pcie_h2d",
    "launch_bound",
    "gpu_underused",
)
"""Rules that name what limits a GPU, most specific first. A finding of a later rule is dropped when every
GPU it concerns is covered by findings of earlier rules: a stuck job is not also launch-bound, a stalled or
storage-bound GPU is not also "left waiting by the training code", a GPU waiting on its video decoder is not also
waiting on its CPU workers, and heavy PCIe copies are not also a code gap."""

WAITS_OUTSIDE = frozenset(BOTTLENECKS[:BOTTLENECKS.index("launch_bound")])
"""Bottlenecks outside the GPU's own work: the GPU waits on a dead or diverged rank, the video decoder, storage, the input pipeline,
a straggling rank, a busier peer, communication or host copies (not launch-bound or code gaps, which tuning may
help)."""

TUNING = frozenset({"batch_headroom", "mixed_precision", "low_mfu"})
"""Advice that makes the GPU's own work faster, useless while it waits on something outside it."""


def rule_of(finding: Finding) -> str:
    """The rule name of a finding (its advice id up to the colon)."""
    return finding.advice.id.partition(":")[0]


def consistent(findings: list[Finding]) -> list[Finding]:
    """``findings`` without those a higher-precedence bottleneck or an outside wait contradicts, in their order."""
    by_rule: dict[str, list[Finding]] = {}
    for finding in findings:
        by_rule.setdefault(rule_of(finding), []).append(finding)
    dropped: set[int] = set()
    covered: set[int] = set()
    outside: set[int] = set()
    for name in BOTTLENECKS:
        kept = []
        for finding in by_rule.get(name, ()):
            if finding.devices and finding.devices <= covered:
                dropped.add(id(finding))
            else:
                kept.append(finding)
        for finding in kept:
            covered |= finding.devices
            if name in WAITS_OUTSIDE:
                outside |= finding.devices
    for name in TUNING:
        dropped.update(id(finding) for finding in by_rule.get(name, ()) if finding.devices & outside)
    return [finding for finding in findings if id(finding) not in dropped]
