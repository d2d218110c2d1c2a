"""Throttling: thermal, power-cap or hardware slowdown clock reasons active for a while."""

from __future__ import annotations

from gpusight.advice.context import Context, Finding
from gpusight.advice.rules.base import Rule, listing
from gpusight.snapshot.model import DeviceSample, ScopeKind, Severity

ACTIONS = {
    "hw_thermal": "hardware thermal slowdown: check fans, airflow, inlet temperature and dust",
    "sw_thermal": "driver thermal limit: improve cooling (airflow, fan curve, inlet temperature)",
    "hw_slowdown": "hardware slowdown (thermal or power-supply emergency): check cooling and the PSU",
    "hw_power_brake": "external power brake asserted: check the power supply and chassis power budget",
    "sw_power_cap": (
        "running at the power limit, which is normal under full load; if the limit was lowered "
        "(nvidia-smi -q -d POWER: enforced below default), raise it with nvidia-smi -pl"
    ),
}
"""What to check for each costly throttle reason, most serious first."""

SEVERE = frozenset({"hw_thermal", "sw_thermal", "hw_slowdown", "hw_power_brake"})
"""Reasons that mean something is wrong (warn); the power cap alone is informational."""


def _evaluate(ctx: Context) -> list[Finding]:
    findings = []
    for index, device in sorted(ctx.devices.items()):
        reasons = [reason for reason in ACTIONS if reason in device.throttle_reasons]
        if not reasons:
            continue
        evidence = f"GPU {index} clocks held down by {listing(reasons)}; " + _readings(ctx, device)
        action = "; ".join(ACTIONS[reason] for reason in reasons) + "; details: nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER"
        severity = Severity.WARN if SEVERE.intersection(reasons) else Severity.INFO
        kind = "thermal/hardware" if severity == Severity.WARN else "power-cap"
        title = f"GPU {index} is {kind} throttled: every kernel runs slower"
        findings.append(RULE.finding(severity, ScopeKind.GPU.of(index), title, evidence, action, (index,)))
    return findings


def _readings(ctx: Context, device: DeviceSample) -> str:
    """Temperature, power and how far the SM clock sits below its recent peak."""
    parts = []
    if device.temperature_celsius is not None:
        parts.append(f"{device.temperature_celsius:.0f} C")
    if device.power_watts is not None:
        power = f"{device.power_watts:.0f} W"
        if device.power_limit_watts:
            power += f" of {device.power_limit_watts:.0f} W limit"
        parts.append(power)
    clock = ctx.device_stat(device.index, "clock_sm_mhz")
    if device.clock_sm_mhz is not None:
        text = f"SM clock {device.clock_sm_mhz} MHz"
        if clock is not None and clock.maximum > device.clock_sm_mhz:
            drop = 100.0 * (clock.maximum - device.clock_sm_mhz) / clock.maximum
            text += f", {drop:.0f} % below its {clock.maximum:.0f} MHz peak in the last {ctx.thresholds.window_s:.0f} s"
        parts.append(text)
    return ", ".join(parts) if parts else "no clock, power or temperature readings"


RULE = Rule("throttling", "clocks throttled", _evaluate,
            needs=("throttle_reasons",), hold=lambda thresholds: thresholds.throttle_hold_s)
"""Costly clock-event reasons active for ``throttle_hold_s``."""
