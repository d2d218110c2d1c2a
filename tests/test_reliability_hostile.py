"""Hostile input end to end: any text in any string field of a snapshot, hostile recordings, and a real process
whose command line carries escapes, markup, invalid UTF-8 and 100 KB of arguments.

``test_textsafe.py`` proves :func:`gpusight.textsafe.safe_text` on its own; here the property is checked
on what gpusight actually prints (the ``--once`` table and the Markdown report) and shows (the TUI), so a
field that skips ``safe_text`` is caught.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpusight.oneshot import render_once
from gpusight.recordings.replay import ReplaySource
from gpusight.sampling.history import History
from gpusight.sampling.sampler import Sampler
from gpusight.snapshot.model import (
    Advice,
    DeviceSample,
    DriverInfo,
    ErrorNote,
    GpuProcessType,
    HostSample,
    ProcessRole,
    ProcessSample,
    Severity,
    Snapshot,
    SourceKind,
)
from gpusight.snapshot.serialize import snapshot_from_dict
from gpusight.snapshot_export.markdown import render_markdown
from gpusight.ui.main.app import GpusightApp
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env
from support.procs import sleeper

UNSAFE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""Characters that must never reach a terminal from untrusted text (newline is the renderer's own)."""

CONTROL_HEAVY = st.characters(codec="utf-8", exclude_categories=("Cs",)) | st.sampled_from(
    ["\x1b", "\x1b[", "\x1b]", "\x07", "\x9b", "\r", "\n", "\x00", "\u202e", "[", "]", "[b]", "[/]", "|", "`"]
)
"""Characters drawn for the property tests, biased towards escapes, controls and markup."""

HOSTILE_TEXT = st.lists(CONTROL_HEAVY, max_size=40).map("".join)
"""Arbitrary text with many escape and markup fragments."""


@st.composite
def hostile_snapshots(draw: st.DrawFn) -> Snapshot:
    """A snapshot whose every free-text field is drawn from HOSTILE_TEXT (fields with a fixed set of values from it)."""

    def text() -> str:
        return draw(HOSTILE_TEXT)

    device = DeviceSample(index=0, name=text(), uuid=text(), utilization_gpu_percent=50.0,
                          throttle_reasons=(text(), text()), error=text())
    lost = DeviceSample(index=1, name=text(), lost=True, error=text())
    trainer = ProcessSample(pid=10, device_index=0, name=text(), cmdline=text(), user=text(), status=text(),
                            note=text(), num_workers=1, gpu_process_type=draw(st.sampled_from(GpuProcessType)))
    worker = ProcessSample(pid=11, role=ProcessRole.DATALOADER_WORKER, device_index=0, trainer_pid=10, name=text(),
                           cmdline=text(), user=text(), status=text(), note=text())
    return Snapshot(
        timestamp=1_700_000_000.0,
        source=draw(st.sampled_from(SourceKind)),
        host=HostSample(hostname=text(), cpu_percent_per_core=(10.0,)),
        driver=DriverInfo(driver_version=text(), cuda_driver_version=text(), nvml_version=text()),
        devices=(device, lost),
        processes=(trainer, worker),
        advice=(Advice(id=text(), severity=draw(st.sampled_from(Severity)), scope=text(), title=text(), evidence=text(), action=text()),),
        errors=(ErrorNote(text(), text()),),
        label=text(),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_snapshots(), st.sampled_from([None, 60, 120]))
def test_the_once_table_never_prints_a_control_character(snapshot, width):
    out = render_once(snapshot, width)
    assert not UNSAFE.search(out), repr(UNSAFE.search(out))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_snapshots())
def test_the_markdown_report_never_contains_a_control_character(snapshot):
    history = History(10)
    history.append(snapshot)
    out = render_markdown(snapshot, history)
    assert not UNSAFE.search(out), repr(UNSAFE.search(out))


def hostile_recording(path: Path) -> Path:
    """A recording mixing snapshots full of hostile text with lines that are not snapshots at all."""
    evil = "\x1b]0;owned\x07[b]bold[/b]\x1b[2J\u202e"

    def line(timestamp: object, **extra: object) -> dict:
        data = {
            "schema": 1, "source": "nvml", "timestamp": timestamp, "label": evil,
            "driver": {"driver_version": evil, "cuda_driver_version": evil, "nvml_version": evil},
            "devices": [{"index": 0, "name": evil, "utilization_gpu_percent": 1e300, "memory_used_bytes": 10**40,
                         "memory_total_bytes": 0, "temperature_celsius": -273, "throttle_reasons": [evil, "[b]"]}],
            "processes": [{"pid": 10**18, "device_index": 0, "name": evil, "cmdline": evil * 5000, "user": evil,
                           "status": evil, "gpu_memory_bytes": -5, "cpu_percent": 1e308, "num_workers": -3}],
            "errors": [{"scope": evil, "message": "line\nbreak" + evil}],
            "advice": [{"id": evil, "severity": "warn", "scope": evil, "title": evil, "evidence": evil,
                        "action": evil}],
        }
        data.update(extra)
        return data

    lines = [
        json.dumps(line(1_700_000_000.0)),
        json.dumps(line(1_700_000_000.5, advice=[{"id": "a", "severity": evil, "scope": "host", "title": "t",
                                                  "evidence": "e", "action": "a"}])),
        json.dumps(line(1e400)),  # Infinity once parsed
        json.dumps(line(float("nan"))),
        json.dumps(line(1e17)),
        json.dumps(line(1_700_000_001.0, label=["not", "text"])),
        json.dumps(line(1_700_000_002.0, devices=[{"index": 0, "power_watts": float("inf")}])),
        "[" * 100_000 + "]" * 100_000,
        json.dumps(line(1_700_000_003.0)),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_hostile_recording_replays_escaped_and_names_every_bad_line(tmp_path):
    path = hostile_recording(tmp_path / "hostile.jsonl")

    table = subprocess.run([sys.executable, "-m", "gpusight", "--replay", str(path), "--once"],
                           capture_output=True, text=True, timeout=60, check=False)
    as_json = subprocess.run([sys.executable, "-m", "gpusight", "--replay", str(path), "--json"],
                             capture_output=True, text=True, timeout=60, check=False)

    assert table.returncode == 0, table.stderr
    assert "Traceback" not in table.stderr and not UNSAFE.search(table.stdout)
    assert "[b]bold[/b]" in table.stdout  # markup shown literally, not interpreted
    problems = [line for line in table.stdout.splitlines() if line.strip().startswith("replay: line")]
    assert [p.split(":")[1].strip() for p in problems] == ["line 2", "line 3", "line 4", "line 5", "line 6"]
    assert problems[0].endswith("advice[0].severity must be one of 'critical', 'warn', 'info'")  # not quoted
    assert "replay: 2 more damaged lines skipped" in table.stdout  # lines 7 and 8, the last the 100,000-deep nesting
    assert as_json.returncode == 0 and snapshot_from_dict(json.loads(as_json.stdout), complete=True).timestamp > 0


def test_a_hostile_recording_shows_escaped_in_the_tui(tmp_path):
    sampler = Sampler(ReplaySource(hostile_recording(tmp_path / "hostile.jsonl")), 3600.0, History(50))
    sampler.poll_once()
    app = GpusightApp(sampler, live=False)
    segments: list[str] = []

    async def main() -> None:
        async with app.run_test(size=(160, 45)) as pilot:
            await pilot.pause()
            for strip in app.screen._compositor.render_strips():
                segments.extend(segment.text for segment in strip)

    asyncio.run(main())

    text = "".join(segments)
    assert "owned" not in text  # the OSC title payload was removed with its sequence
    assert not UNSAFE.search(text)
    assert "[b]bold[/b]" in text


def test_a_real_process_with_a_hostile_100_kb_command_line_is_listed_escaped(tmp_path, fake_nvml_lib):
    args = ("\x1b]0;owned\x07", "[red]markup[/red]", b"bad\xff\xfeutf8", "\x1b[2J\rclear", "x" * 100_000)
    with sleeper(*args) as proc:
        path = FakeScenario(gpus=[FakeGpu(compute_processes=[(proc.pid, 1 << 30)])]).write(tmp_path / "s.txt")
        env = fake_nvml_env(fake_nvml_lib, path)
        table = subprocess.run([sys.executable, "-m", "gpusight", "--once"], capture_output=True, text=True, env=env,
                               timeout=60, check=False)
        as_json = subprocess.run([sys.executable, "-m", "gpusight", "--json"], capture_output=True, text=True, env=env,
                                 timeout=60, check=False)

    assert table.returncode == 0 and "Traceback" not in table.stderr
    [row] = [line for line in table.stdout.splitlines() if f" {proc.pid} " in line]
    assert not UNSAFE.search(table.stdout)
    assert "[red]markup[/red]" in row and "bad\ufffd\ufffdutf8" in row and "x" * 100_000 in row
    [process] = [p for p in json.loads(as_json.stdout)["processes"] if p["pid"] == proc.pid]
    assert "\x1b]0;owned\x07" in process["cmdline"]  # the JSON keeps the raw text; only displays escape it
    assert len(process["cmdline"]) > 100_000


def test_the_hostile_snapshot_strategy_really_is_hostile():
    """The property tests above are only as good as their input: it must carry raw escapes into the model."""
    found: list[str] = []

    def strings(value: object) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict):
            return [s for v in value.values() for s in strings(v)]
        if isinstance(value, (list, tuple)):
            return [s for v in value for s in strings(v)]
        return []

    @settings(max_examples=50, deadline=None)
    @given(hostile_snapshots())
    def collect(snapshot: Snapshot) -> None:
        found.extend(strings(dataclasses.asdict(snapshot)))

    collect()
    assert any("\x1b" in s for s in found) and any("[b]" in s for s in found) and any("\x9b" in s for s in found)
