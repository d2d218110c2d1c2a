"""What every rule shares: the Rule record, building a Finding, and number formatting for evidence."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpusight.advice.config import Thresholds
from gpusight.advice.context import Context, Finding
from gpusight.advice.signals import Signal
from gpusight.snapshot.model import Advice, ProcessSample, Severity
from gpusight.textsafe import safe_text


def _default_hold(thresholds: Thresholds) -> float:
    """The common hold time, for rules without their own."""
    return thresholds.hold_s


@dataclass(frozen=True, slots=True)
class Rule:
    """One advice rule: its name (the advice id prefix), its check and how long it must hold."""

    name: str
    """Advice id prefix, e.g. ``"input_bound"``."""
    summary: str
    """What its advice means in a few words, the same for every scope and moment (e.g. for a label that must not
    change with the figures): ``"the GPU waits on its input pipeline"``."""
    evaluate: Callable[[Context], list[Finding]]
    """Findings for every scope where the condition holds now."""
    hold: Callable[[Thresholds], float] = _default_hold
    """Seconds the condition must hold before its advice appears."""
    needs: tuple[Signal, ...] = ()
    """The DeviceSample fields it cannot judge a GPU without (a tuple of fields: any one of them will do); the engine
    drops its findings about a GPU whose backend lacks one (:mod:`gpusight.advice.signals`; docs/advice.md's
    table)."""
    instant: bool = False
    """True when the condition reads the newest snapshot only, not a window of history: its last evaluation alone
    cannot judge a one-shot run's window, so there it must have held over part of it (see
    :meth:`~gpusight.advice.engine.AdviceEngine.judge_window`)."""

    def finding(
        self,
        severity: Severity,
        scope: str,
        title: str,
        evidence: str,
        action: str,
        devices: tuple[int, ...] | frozenset[int] = (),
    ) -> Finding:
        """A Finding with id ``"<name>:<scope>"`` (a scope made by :meth:`~gpusight.snapshot.model.ScopeKind.of`)."""
        advice = Advice(f"{self.name}:{scope}", severity, scope, title, evidence, action)
        return Finding(advice, frozenset(devices))


def pct(value: float) -> str:
    """A percentage for evidence text, e.g. ``"23 %"``."""
    return f"{value:.0f} %"


def pct_range(values: list[float]) -> str:
    """A range of percentages, e.g. ``"97-100 %"``, or one value when they round alike."""
    low, high = round(min(values)), round(max(values))
    return f"{low} %" if low == high else f"{low}-{high} %"


def gib(value: float) -> str:
    """Bytes as GiB with one decimal, e.g. ``"12.0 GiB"``."""
    return f"{value / 2**30:.1f} GiB"


def listing(items: list[str]) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def workers_phrase(count: int) -> str:
    """``"1 DataLoader worker"`` or ``"4 DataLoader workers"``."""
    return f"{count} DataLoader worker" + ("" if count == 1 else "s")


def minutes(seconds: float) -> str:
    """A duration for evidence: ``"45 s"`` below a minute, else ``"3 min"``."""
    return f"{seconds:.0f} s" if seconds < 60 else f"{seconds // 60:.0f} min"


COMMAND_LENGTH = 60
"""Longest command line quoted in evidence."""


def command_text(process: ProcessSample) -> str:
    """A process's command line (or name) for evidence, escaped and cut to ``COMMAND_LENGTH``."""
    return safe_text(process.cmdline or process.name, COMMAND_LENGTH) or "unknown command"
