"""The command line as users run it: real `gpusight` / `gps` processes, stdout a pipe (so one-shot is implied)."""

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import jsonschema
import pytest

from gpusight.snapshot.schema import json_schema
from gpusight.snapshot.serialize import snapshot_from_dict

GPUSIGHT = [sys.executable, "-m", "gpusight"]


def run(*args, timeout=60, env=None):
    return subprocess.run([*GPUSIGHT, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_console_scripts_gpusight_and_gps_are_the_same_program():
    for name in ("gpusight", "gps"):
        exe = shutil.which(name)
        assert exe, f"{name} is not installed as a console script"
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0
        assert out.stdout.startswith("gpusight ")


def env_with_switch(value):
    """This process's environment with GPUSIGHT_PARTIAL_OUTPUT set to ``value`` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "GPUSIGHT_PARTIAL_OUTPUT"}
    if value is not None:
        env["GPUSIGHT_PARTIAL_OUTPUT"] = value
    return env


@pytest.mark.parametrize(
    ("switch", "line"),
    [(None, "partial output: active"), ("1", "partial output: active"),
     ("0", "partial output: off (GPUSIGHT_PARTIAL_OUTPUT=0)"), ("off", "partial output: off (GPUSIGHT_PARTIAL_OUTPUT=off)")],
)
def test_version_verbose_says_whether_partial_output_is_active(switch, line):
    from gpusight import __version__

    for argv in (["--version", "--verbose"], ["--verbose", "--version"]):
        out = run(*argv, env=env_with_switch(switch))
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == [f"gpusight {__version__}", line]
        assert out.stderr == ""


def test_version_prints_only_the_version():
    from gpusight import __version__

    for argv in (["--version"], ["--demo", "--check", "--version"]):  # other flags, even incomplete, do not matter
        out = run(*argv)
        assert out.returncode == 0, out.stderr
        assert out.stdout == f"gpusight {__version__}\n"
        assert out.stderr == ""
    alone = run("--verbose")
    assert alone.returncode == 2 and "--verbose needs --version" in alone.stderr


def test_version_loads_neither_the_user_interface_nor_the_demo_nor_the_checks():
    """Nor does any start before its run asks: ``--help`` names the demo's scenarios from gpusight.demo.catalog."""
    code = (
        "import sys\nfrom gpusight.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit as exit:\n    assert exit.code == 0\n"
        "print(sorted(m for m in ('textual.app', 'gpusight.ui.main.app', 'gpusight.demo.scenarios', 'gpusight.demo.source', "
        "'gpusight.check') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "[]"


def test_help_documents_every_flag():
    out = run("--help")
    assert out.returncode == 0
    for flag in ("--demo", "--replay", "--loop", "--record", "--once", "--json", "--duration", "--interval", "--refresh",
                 "--export", "--export-dir", "--readonly", "--ascii", "--no-advice", "--config", "--version",
                 "--verbose", "--gpus", "--cuda-visible", "--user", "--no-filters", "--json-schema"):
        assert flag in out.stdout
    assert "input-bound" in out.stdout  # scenarios are listed


def test_demo_help_lists_every_scenario_with_its_story():
    from gpusight.demo.source import SCENARIOS

    out = run("--demo", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split()).replace("- ", "-")  # argparse wraps lines, also after a hyphen
    for name, story in SCENARIOS.items():
        assert f"{name}: {' '.join(story.split()[:3])}" in text, name


def test_interval_below_the_minimum_is_refused():
    out = run("--demo", "--interval", "0.05")
    assert out.returncode == 2
    assert "at least 0.1" in out.stderr


@pytest.mark.parametrize("seconds", ["0.05", "3601"])
def test_refresh_outside_the_interval_range_is_refused_as_interval_is(seconds):
    out = run("--demo", "--refresh", seconds)
    assert out.returncode == 2
    assert "--refresh must be at least 0.1 and at most 3600 seconds" in out.stderr


def test_unknown_demo_scenario_is_refused_with_the_choices():
    out = run("--demo", "no-such-thing")
    assert out.returncode == 2
    assert "healthy" in out.stderr


def test_a_pipe_implies_one_shot_and_the_demo_is_labelled_simulated():
    out = run("--demo", "healthy")
    assert out.returncode == 0, out.stderr
    assert "demo: healthy (simulated)" in out.stdout
    assert "pt_data_worker" in out.stdout
    assert "NVIDIA H100" in out.stdout


def test_json_output_follows_the_contract():
    out = run("--demo", "idle-holding", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    snapshot = snapshot_from_dict(data, complete=True)
    assert snapshot.source == "demo"
    assert "simulated" in snapshot.label
    assert snapshot.devices and snapshot.processes and snapshot.advice
    workers = [p for p in snapshot.processes if p.role == "dataloader_worker"]
    trainers = {p.pid for p in snapshot.processes if p.role == "gpu"}
    assert workers and all(w.trainer_pid in trainers for w in workers)


def test_json_output_passes_the_published_json_schema():
    out = run("--demo", "mixed", "--json")
    assert out.returncode == 0, out.stderr
    jsonschema.validate(json.loads(out.stdout), json_schema())


def test_json_schema_flag_prints_the_schema_other_tools_validate_with(tmp_path):
    printed = run("--json-schema")
    assert printed.returncode == 0, printed.stderr
    schema = json.loads(printed.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    snapshot = json.loads(run("--demo", "input-bound", "--json").stdout)
    jsonschema.validate(snapshot, schema)
    snapshot["processes"][0]["role"] = "trainer"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(snapshot, schema)


def test_record_then_replay_round_trips_and_skips_a_corrupt_line(tmp_path):
    recording = tmp_path / "run.jsonl"
    out = run("--demo", "throttling", "--record", str(recording), "--duration", "1.2", "--interval", "0.2", "--json")
    assert out.returncode == 0, out.stderr
    lines = recording.read_text().splitlines()
    assert len(lines) >= 5
    recorded = [json.loads(line) for line in lines]
    assert all(snapshot_from_dict(r, complete=True).source == "demo" for r in recorded)
    # corrupt the middle of the recording
    lines.insert(2, '{"schema": 1, "timestamp": tru')
    recording.write_text("\n".join(lines) + "\n")
    replay = run("--replay", str(recording), "--json", "--duration", "1.5", "--interval", "0.1")
    assert replay.returncode == 0, replay.stderr
    data = json.loads(replay.stdout)
    assert data["source"] == "replay"
    assert any(e["scope"] == "replay" and "line 3" in e["message"] for e in data["errors"])
    names = {d["name"] for d in data["devices"]}
    assert names == {d["name"] for d in recorded[-1]["devices"]}


def test_gzip_recording_replays(tmp_path):
    recording = tmp_path / "run.jsonl.gz"
    out = run("--demo", "imbalance", "--record", str(recording), "--duration", "0.6", "--interval", "0.2", "--json")
    assert out.returncode == 0, out.stderr
    with gzip.open(recording, "rt") as fh:
        assert sum(1 for _ in fh) >= 3
    replay = run("--replay", str(recording))
    assert replay.returncode == 0, replay.stderr
    assert "replay: run.jsonl.gz" in replay.stdout


def test_missing_or_empty_recording_gives_one_clear_line(tmp_path):
    missing = run("--replay", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 1
    assert missing.stderr.startswith("gpusight: ") and "nope.jsonl" in missing.stderr
    assert "Traceback" not in missing.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = run("--replay", str(empty))
    assert out.returncode == 1 and "Traceback" not in out.stderr


def test_unwritable_recording_path_is_reported(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = run("--demo", "--record", str(blocker / "sub" / "rec.jsonl"), "--once")
    assert out.returncode == 1
    assert out.stderr.startswith("gpusight: ") and "Traceback" not in out.stderr


def test_headless_recording_runs_until_sigterm_and_keeps_every_line(tmp_path):
    recording = tmp_path / "bg.jsonl"
    proc = subprocess.Popen([*GPUSIGHT, "--demo", "--record", str(recording), "--interval", "0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if recording.exists() and len(recording.read_text().splitlines()) >= 5:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "recorded" in err
    lines = recording.read_text().splitlines()
    assert len(lines) >= 5
    for line in lines:
        snapshot_from_dict(json.loads(line), complete=True)


def test_once_export_writes_report_and_json(tmp_path):
    out = run("--demo", "input-bound", "--once", "--export", str(tmp_path / "exp"))
    assert out.returncode == 0, out.stderr
    files = sorted(p.suffix for p in (tmp_path / "exp").iterdir())
    assert ".json" in files and ".md" in files and ".svg" in files


def test_once_shows_pcie_rx_and_tx_in_columns_of_their_own():
    out = run("--demo", "--once")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = next(line for line in lines if line.startswith("GPU ") and "NAME" in line)
    rx_end = header.index("PCIe RX") + len("PCIe RX")
    tx_end = header.index("PCIe TX") + len("PCIe TX")
    rows = lines[lines.index(header) + 1: lines.index(header) + 9]
    rate = re.compile(r"\d+(\.\d+)?[kMG]?B/s")
    for row in rows:  # each rate ends under its own heading, with a space before it
        assert rate.fullmatch(row[:rx_end].split()[-1]), row
        assert rate.fullmatch(row[rx_end:tx_end].split()[-1]), row
    assert "B/s/" not in out.stdout
