"""``gpusight --check``: sample for a while with the advice engine, print the advice that stands, exit by its severity.

For cron jobs, Slurm prologs/epilogs and CI smoke tests (docs/check.md). Exit statuses: ``EXIT_OK`` when no
warn or critical advice stands, ``EXIT_WARN``, ``EXIT_CRITICAL`` (also when a GPU was lost during the
check) and ``EXIT_CANNOT_CHECK``.

A check judges the window it sampled as a whole, at its end (``Hysteresis(whole_window=True)``, :mod:`gpusight.advice.hysteresis`): the live screen's
hold times (thresholds ending in ``hold_s``) are not applied, and each averaging window (ending in ``window_s``)
longer than the check is cut to the check's time (``fit_thresholds``), so the rules' last evaluation spans it. The
report's first line says in plain words what was shortened, which live holds were not applied, and the longest
period of regular stalls the check could see (``longest_stall_period``). ``--once``/``--json`` with ``--duration``
judge their window the same way.
"""

from __future__ import annotations

import dataclasses
import math
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpusight.advice.config import Thresholds
from gpusight.advice.engine import AdviceEngine
from gpusight.facts.xid_catalog import xid_info
from gpusight.sampling.sampler import Sampler
from gpusight.snapshot.model import Severity, Snapshot, XidEvent
from gpusight.textsafe import safe_text

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress

EXIT_OK = 0
"""No advice at warn or above stands."""
EXIT_WARN = 1
"""Warn advice stands (and nothing critical)."""
EXIT_CRITICAL = 2
"""Critical advice stands, or a GPU was lost during the check."""
EXIT_CANNOT_CHECK = 3
"""Nothing could be checked: no NVML (and not --demo), no GPU, a bad recording or a usage error."""

WINDOW_SUFFIX = "window_s"
"""Thresholds ending in this are averaging windows; a short check cuts them to its time."""
HOLD_SUFFIX = "hold_s"
"""Thresholds ending in this are how long a condition must hold on a live screen; a one-shot run does not apply
them (it judges its window as a whole), and says which were longer than its data."""

STALL_WINDOW = "stall_window_s"
"""The periodic-stall rule's window: when a short run cuts it, the run says the longest period it could see."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Signals that end a check early; it still reports what stood then."""

_SLICE_S = 0.1
"""Longest sleep between looks at the stop flag."""


@dataclass(frozen=True, slots=True)
class CheckPlan:
    """What a check samples and how its thresholds were fitted."""

    what: str
    """The data checked, e.g. ``"live data"``, ``"demo data"``, ``"recording run.jsonl"``."""
    duration_s: float | None
    """Seconds of sampling asked for (recording time with a replay); None: a whole recording."""
    fitting: Fitting
    """Which windows and holds were cut to fit the check."""
    rules_run: bool = True
    """False when the rules are not run at all (a recording checked by the advice it recorded)."""


@dataclass(frozen=True, slots=True)
class Fitting:
    """The windows a short check cut to fit its time, and the live holds longer than its data."""

    data_s: float
    """Seconds of data the check's rules see: the check's time, with a demo's simulated history before it."""
    window_cap_s: float
    """Longest window kept, seconds (the data's time less one poll)."""
    cut: tuple[tuple[str, float], ...] = ()
    """(threshold name, its value before) for each window cut, in declaration order; empty when all fit."""
    holds_over: tuple[tuple[str, float], ...] = ()
    """(threshold name, its value) for each live hold longer than the data, which a live screen would wait out
    before showing advice and the one-shot verdict does not."""
    longest_stall_period_s: float = float("inf")
    """Longest period of regular stalls the data can show (``longest_stall_period``)."""
    shortest_stall_s: float = 0.0
    """Shortest stall the periodic-stall rule counts (``stall_min_s``); a period needs a stall and some work."""


@dataclass(frozen=True, slots=True)
class CheckResult:
    """What a check saw."""

    snapshot: Snapshot
    """The last snapshot, filtered like the other modes, with its advice."""
    elapsed_s: float
    """Seconds sampled (recording time with a replay)."""
    lost_gpus: frozenset[int]
    """GPUs found lost on any poll of the check."""
    stopped_by: str | None
    """Name of the signal that ended the check early, or None."""
    cannot_check: str | None
    """Why nothing could be checked, or None."""
    last_xids: dict[int, XidEvent] = field(default_factory=dict)
    """The latest Xid event each GPU reported on any poll of the check, by index (a GPU lost to Xid 79 may report
    it on the poll before it stopped answering)."""


def fitted_names(thresholds: Thresholds) -> list[str]:
    """Names of the thresholds a short check may cut: every ``*window_s`` field."""
    return [f.name for f in dataclasses.fields(thresholds) if f.name.endswith(WINDOW_SUFFIX)]


def hold_names(thresholds: Thresholds) -> list[str]:
    """Names of the live screen's hold times: every ``*hold_s`` field."""
    return [f.name for f in dataclasses.fields(thresholds) if f.name.endswith(HOLD_SUFFIX)]


def longest_stall_period(thresholds: Thresholds, data_s: float) -> float:
    """Longest period (seconds) of regular stalls that ``data_s`` seconds of data always show to the periodic-stall
    rule: it needs ``stall_min_count`` stalls whose starts it sees, the last lasting ``stall_min_s``; in the worst
    phase the first starts a whole period after the data does, so ``count`` periods and one shortest stall."""
    return max(0.0, data_s - thresholds.stall_min_s) / max(1, thresholds.stall_min_count)


def fit_thresholds(thresholds: Thresholds, available_s: float | None, interval_s: float) -> tuple[Thresholds, Fitting]:
    """``thresholds`` with the windows that do not fit ``available_s`` seconds of data cut to fit.

    One poll interval is kept aside, so the last evaluation's window starts at the first poll. Thresholds that fit
    keep their values; nothing changes when the time is unknown (a whole recording).
    """
    if available_s is None:
        return thresholds, Fitting(float("inf"), float("inf"))
    window_cap = max(0.0, available_s - interval_s)
    cut = tuple((name, getattr(thresholds, name)) for name in fitted_names(thresholds)
                if getattr(thresholds, name) > window_cap)
    holds = tuple((name, getattr(thresholds, name)) for name in hold_names(thresholds)
                  if getattr(thresholds, name) > window_cap)
    changes: dict[str, Any] = {name: window_cap for name, _ in cut}
    fitted = dataclasses.replace(thresholds, **changes)
    longest = longest_stall_period(fitted, available_s)
    return fitted, Fitting(available_s, window_cap, cut, holds, longest, fitted.stall_min_s)


def plan_check(engine: AdviceEngine, interval_s: float, what: str, duration_s: float | None,
               available_s: float | None, rules_run: bool = True) -> CheckPlan:
    """Fit ``engine``'s windows to ``available_s`` seconds of data (see ``fit_thresholds``), have it judge the window
    as a whole (:meth:`~gpusight.advice.engine.AdviceEngine.judge_window`) and describe the run; ``rules_run`` is
    False when the advice checked is not the rules' (a recording's recorded advice)."""
    engine.thresholds, fitting = fit_thresholds(engine.thresholds, available_s, interval_s)
    engine.judge_window()
    return CheckPlan(what, duration_s, fitting, rules_run)


class StopFlag:
    """Set by SIGINT or SIGTERM while ``catching`` is active; remembers which signal came."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        """Name of the signal received, or None."""

    @property
    def requested(self) -> bool:
        """True once a stop signal arrived."""
        return self.signal_name is not None

    @contextmanager
    def catching(self) -> Iterator[None]:
        """Catch the stop signals inside the block, restoring the previous handlers after it."""

        def handler(signum: int, frame: object) -> None:
            self.signal_name = signal.Signals(signum).name

        previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)

    def sleep(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; False when a stop signal cut it short."""
        end = time.monotonic() + seconds
        while not self.requested:
            remaining = end - time.monotonic()
            if remaining <= 0:
                return True
            time.sleep(min(_SLICE_S, remaining))
        return False


def sample_for_check(sampler: Sampler, duration_s: float | None, live: bool,
              finished: Callable[[], bool] | None = None, progress: ReadProgress | None = None) -> CheckResult:
    """Sample with ``sampler`` and return what stood at the end.

    Live or demo data (``finished`` None) is polled at the sampler's interval for ``duration_s``
    seconds. A recording (``finished`` says when it has been read to its end) is read as fast as it
    goes, to its end or for ``duration_s`` seconds of recording time. SIGINT and SIGTERM end either
    early. ``live`` data with no GPU after the first poll ends the check at once: nothing to check.
    ``progress``, when given, is told the whole seconds sampled of ``duration_s`` after each poll.
    """
    stop = StopFlag()
    lost: set[int] = set()
    xids: dict[int, XidEvent] = {}

    def poll() -> Snapshot:
        snapshot = sampler.poll_once()
        lost.update(d.index for d in snapshot.devices if d.lost)
        for device in snapshot.devices:
            if device.health is not None and device.health.xid_recent:
                xids[device.index] = device.health.xid_recent[-1]
        return snapshot

    with stop.catching():
        snapshot = poll()
        started, start_clock = snapshot.timestamp, time.monotonic()
        if live and not snapshot.devices:
            return CheckResult(snapshot, 0.0, frozenset(lost), None, _why_no_gpus(snapshot), xids)
        if progress is not None and duration_s is not None:
            progress.begin(math.ceil(duration_s))
        if finished is not None:
            while not stop.requested and not finished():
                if duration_s is not None and snapshot.timestamp - started >= duration_s:
                    break
                snapshot = poll()
                if progress is not None:
                    progress.reached(int(snapshot.timestamp - started))
            elapsed = snapshot.timestamp - started
        else:
            end = start_clock + (duration_s or 0.0)
            while (remaining := end - time.monotonic()) > 0 and stop.sleep(min(sampler.interval, remaining)):
                snapshot = poll()
                if progress is not None:
                    progress.reached(int(time.monotonic() - start_clock))
            elapsed = time.monotonic() - start_clock
    return CheckResult(snapshot, elapsed, frozenset(lost), stop.signal_name, None, xids)


def _why_no_gpus(snapshot: Snapshot) -> str:
    """The source's own reason there are no GPUs (driver missing, ...), or a plain one."""
    reasons = [e.message for e in snapshot.errors if e.scope in ("nvml", "filter")]
    return "; ".join(reasons) if reasons else "no NVIDIA GPU found"


def exit_status(result: CheckResult) -> int:
    """The check's exit status (see the ``EXIT_*`` constants)."""
    if result.cannot_check is not None:
        return EXIT_CANNOT_CHECK
    severities = {advice.severity for advice in result.snapshot.advice}
    if Severity.CRITICAL in severities or result.lost_gpus:
        return EXIT_CRITICAL
    return EXIT_WARN if Severity.WARN in severities else EXIT_OK


def headline(plan: CheckPlan, result: CheckResult, interval_s: float) -> str:
    """The report's first line: what was checked, for how long, and which of the rules' times were shortened to fit."""
    devices = len(result.snapshot.devices)
    if plan.duration_s is None:
        span = f"{result.elapsed_s:.0f} s of {plan.what} (the whole recording)"
    else:
        span = f"{plan.duration_s:g} s of {plan.what}"
    line = f"gpusight check: {span}, {devices} GPU{'s' if devices != 1 else ''}, polled every {interval_s:.3g} s"
    if result.stopped_by is not None:
        line += f"; stopped by {result.stopped_by} after {result.elapsed_s:.1f} s"
    if plan.rules_run and plan.duration_s is not None:
        line += "; " + judging_text(plan)
    return line


def judging_text(plan: CheckPlan) -> str:
    """How a one-shot run's rules judged its window, e.g. ``rules shortened to fit the 10 s checked: averages over
    9.5 s, not window_s 30 s, stall_window_s 60 s; advice judged on the window as a whole at its end, without the
    live screen's holds (longer than the data: hold_s 15 s, ...); regular stalls seen up to a 3.0 s period``."""
    fitting = plan.fitting
    data = f"the {plan.duration_s:g} s checked"
    if plan.duration_s is not None and fitting.data_s > plan.duration_s:
        history = fitting.data_s - plan.duration_s
        data = f"{fitting.data_s:.0f} s of data ({plan.duration_s:g} s checked after {history:.0f} s of simulated history)"
    parts = []
    if fitting.cut:
        windows = ", ".join(f"{name} {value:g} s" for name, value in fitting.cut)
        parts.append(f"rules shortened to fit {data}: averages over {fitting.window_cap_s:.1f} s, not {windows}")
    else:
        parts.append("rule windows fit as set")
    judged = "advice judged on the window as a whole at its end"
    if fitting.holds_over:
        holds = ", ".join(f"{name} {value:g} s" for name, value in fitting.holds_over)
        judged += f", without the live screen's holds (longer than the data: {holds})"
    parts.append(judged)
    if any(name == STALL_WINDOW for name, _ in fitting.cut):
        longest = fitting.longest_stall_period_s
        parts.append(f"regular stalls seen up to a {longest:.1f} s period" if longest > 2 * fitting.shortest_stall_s
                     else "too short to see regular stalls (they take stall_min_count periods and a stall)")
    return "; ".join(parts)


def _lost_xid(result: CheckResult, index: int) -> str:
    """``"; its last Xid: 79 (GPU has fallen off the bus)"`` for a lost GPU that reported an Xid, else empty."""
    event = result.last_xids.get(index)
    if event is None:
        return ""
    return f"; its last Xid: {event.code} ({xid_info(event.code).meaning})"


def render_check(plan: CheckPlan, result: CheckResult, interval_s: float) -> str:
    """The text report: headline, each standing advice, lost GPUs, notes, and the verdict with its exit status."""
    snapshot = result.snapshot
    lines = [headline(plan, result, interval_s), ""]
    for item in snapshot.advice:
        lines.append(f"{safe_text(item.severity).upper():<8} {safe_text(item.scope)}: {safe_text(item.title)}")
        lines.append(f"         evidence: {safe_text(item.evidence)}")
        lines.append(f"         action:   {safe_text(item.action)}")
    if not snapshot.advice:
        lines.append("no advice stands")
    lines += [f"LOST     gpu{index}: the GPU stopped answering during the check{_lost_xid(result, index)}"
              for index in sorted(result.lost_gpus)]
    lost_scopes = {f"gpu{index}" for index in result.lost_gpus}
    notes = [e for e in snapshot.errors if e.scope not in lost_scopes]
    if notes:
        lines.append("")
        lines += [f"note: {safe_text(e.scope)}: {safe_text(e.message)}" for e in notes]
    counts = {severity: sum(1 for a in snapshot.advice if a.severity == severity) for severity in Severity}
    summary = ", ".join(f"{counts[s]} {s}" for s in Severity)
    lines += ["", f"result: {summary}; exit {exit_status(result)}"]
    return "\n".join(lines) + "\n"
