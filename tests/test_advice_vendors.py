"""Advice on GPUs with AMD's signals only (utilization, memory, power, temperature, clocks; no GPM, NVLink, throttle
reasons, compute capability or PCIe throughput), and rules that declare the signals they need (``Rule.needs``).

The scenarios are the existing tables' (tests/test_advice_rules.py, test_advice_jobs.py, test_advice_speed.py) with
every GPU rewritten as the amdgpu backend reports an AMD Instinct MI300X: input-bound, stragglers, idle-holding and
the speed/MFU advice must decide as they do on NVIDIA; a rule needing a signal AMD lacks must stay silent.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from test_advice_jobs import CASES as JOB_CASES
from test_advice_rules import CASES as RULE_CASES
from test_advice_speed import CASES as SPEED_CASES

from gpusight.advice.config import Thresholds
from gpusight.advice.context import Context, Finding
from gpusight.advice.rules import RULES
from gpusight.advice.signals import speaks_to_all
from gpusight.sampling.history import History
from gpusight.snapshot.model import Advice, DeviceSample, Severity, Snapshot, Vendor
from support.advice_frames import Case, Frame, check, run
from support.vendor_devices import amd_gpu, intel_gpu, nvidia_gpu

DOCS = Path(__file__).parent.parent / "docs" / "advice.md"

AMD_SIGNALS = ("index", "lost", "error", "utilization_gpu_percent", "utilization_memory_percent", "memory_used_bytes",
               "memory_total_bytes", "power_watts", "power_limit_watts", "temperature_celsius", "fan_percent",
               "clock_sm_mhz", "clock_memory_mhz", "energy_joules", "temperature_junction_celsius",
               "temperature_memory_celsius", "health")
"""What the amdgpu backend reads of a GPU (sysfs, hwmon, pp_dpm_*); everything else is None on AMD."""


def as_amd(device: DeviceSample) -> DeviceSample:
    """``device`` with only AMD's signals, named and made as an MI300X."""
    kept = {field: getattr(device, field) for field in AMD_SIGNALS}
    return DeviceSample(**kept, name="AMD Instinct MI300X", vendor=Vendor.AMD, kernel_driver="amdgpu")


def on_amd(frame: Frame) -> Frame:
    """``frame`` with every GPU rewritten by :func:`as_amd`."""
    def amd_frame(t: float) -> Snapshot:
        snap = frame(t)
        return dataclasses.replace(snap, devices=tuple(as_amd(d) for d in snap.devices))
    return amd_frame


def _rule_of(case: Case) -> str:
    return case.advice_id.split(":", 1)[0]


STATIC = ("name", "uuid", "pci_bus_id", "minor_number", "cuda_index", "vendor", "kernel_driver", "compute_capability")
"""Fields that name a GPU rather than measure it (``as_amd`` drops them all the same: AMD has no CUDA capability)."""


def _needs_only_amd_signals(case: Case) -> bool:
    """Whether the case's GPUs carry nothing AMD lacks (GPM, NVLink, throttle reasons, MIG...) for its verdict to
    hang on: the rest are the scenarios the rule must decide alike on AMD."""
    others = [f.name for f in dataclasses.fields(DeviceSample) if f.name not in AMD_SIGNALS + STATIC]
    return not any(getattr(d, field) not in (None, (), False) for d in case.frame(0.0).devices for field in others)


WORKS_ON_AMD = ("input_bound", "straggler", "idle_holding", "low_mfu", "stuck")
"""Rules the issue requires on AMD (stuck reads power against the limit, which amdgpu gives)."""


def _amd_texts(texts: tuple[str, ...]) -> tuple[str, ...]:
    """Expected texts less those quoting the NVIDIA GPU's name, which is the MI300X's here (its peaks too)."""
    return tuple(text for text in texts if "NVIDIA" not in text)


AMD_CASES = [dataclasses.replace(case, frame=on_amd(case.frame), name=f"{case.name} (AMD)",
                                 evidence=_amd_texts(case.evidence), action=_amd_texts(case.action))
             for case in RULE_CASES + JOB_CASES + SPEED_CASES
             if _rule_of(case) in WORKS_ON_AMD and _needs_only_amd_signals(case)]


@pytest.mark.parametrize("case", AMD_CASES, ids=lambda case: case.name)
def test_rules_decide_on_amds_signals_as_on_nvidias(case: Case) -> None:
    check(case)


def test_the_amd_table_covers_each_required_rule_firing() -> None:
    assert {_rule_of(case) for case in AMD_CASES if case.fires} >= {"input_bound", "straggler", "idle_holding", "low_mfu"}


NEEDS_WHAT_AMD_LACKS = {rule.name for rule in RULES
                        if any(all(field not in AMD_SIGNALS for field in ((need,) if isinstance(need, str) else need))
                               for need in rule.needs)}
"""Rules that need a signal no AMD GPU has: GPM, NVLink, throttle reasons, compute capability, decoder, MIG."""
SILENT_CASES = [case for case in RULE_CASES + JOB_CASES + SPEED_CASES
                if case.fires and _rule_of(case) in NEEDS_WHAT_AMD_LACKS]


def test_rules_needing_gpm_throttle_reasons_or_mig_are_declared_so() -> None:
    assert {"launch_bound", "serving_batching", "throttling", "mixed_precision", "pcie_h2d",
            "mig_idle_holding", "mig_free"} <= NEEDS_WHAT_AMD_LACKS
    assert not NEEDS_WHAT_AMD_LACKS & set(WORKS_ON_AMD)


@pytest.mark.parametrize("case", SILENT_CASES, ids=lambda case: case.name)
def test_a_rule_needing_what_amd_lacks_stays_silent_there(case: Case) -> None:
    advice = {a.id for a in run(on_amd(case.frame), case.seconds)}
    assert not any(advice_id.startswith(_rule_of(case) + ":") for advice_id in advice)


def test_every_needed_signal_is_a_device_field() -> None:
    fields = {field.name for field in dataclasses.fields(DeviceSample)}
    for rule in RULES:
        for need in rule.needs:
            assert set((need,) if isinstance(need, str) else need) <= fields, rule.name


def _context(*devices: DeviceSample) -> Context:
    snap = Snapshot(timestamp=1000.0, source="demo", devices=devices)  # type: ignore[arg-type]
    history = History()
    history.append(snap)
    return Context(snap, history, Thresholds())


def _finding(*devices: int) -> Finding:
    return Finding(Advice("x:gpu0", Severity.WARN, "gpu0", "t", "e", "a"), frozenset(devices))


@pytest.mark.parametrize(("needs", "speaks"), [
    ((), True),
    (("utilization_gpu_percent",), True),
    (("utilization_gpu_percent", "power_watts"), True),
    (("sm_active_percent",), False),
    (("nvlink_tx_bytes_per_s",), False),
    ((("utilization_gpu_percent", "sm_active_percent"),), True),
    ((("sm_active_percent", "tensor_active_percent"),), False),
])
def test_the_engine_speaks_of_a_gpu_only_with_every_signal_its_rule_needs(needs, speaks: bool) -> None:
    ctx = _context(amd_gpu(0), nvidia_gpu(1))
    assert speaks_to_all(ctx, _finding(0), needs) is speaks
    assert speaks_to_all(ctx, _finding(1), needs)  # the H100 has GPM and NVLink
    assert speaks_to_all(ctx, _finding(0, 1), needs) is speaks  # a job over both is judged by its poorest GPU


def test_a_signal_missing_now_but_read_in_the_window_does_not_silence_a_rule() -> None:
    history = History()
    for t, util in ((1000.0, 50.0), (1000.25, None)):
        snap = Snapshot(timestamp=t, source="demo", devices=(intel_gpu(0, utilization_gpu_percent=util),))  # type: ignore[arg-type]
        history.append(snap)
    ctx = Context(snap, history, Thresholds())
    assert speaks_to_all(ctx, _finding(0), ("utilization_gpu_percent",))
    assert not speaks_to_all(ctx, _finding(0), ("utilization_memory_percent",))  # never read on this xe GPU


def test_docs_list_every_rule_with_the_signals_it_needs() -> None:
    rows = {}
    section = DOCS.read_text(encoding="utf-8").split("## Signals each rule needs", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        match = re.match(r"\| `([a-z0-9_]+)` \| (.*?) \|", line)
        if match:
            rows[match.group(1)] = match.group(2)
    for rule in RULES:
        assert rule.name in rows, rule.name
        for need in rule.needs:
            for field in (need,) if isinstance(need, str) else need:
                assert f"`{field}`" in rows[rule.name], (rule.name, field)
