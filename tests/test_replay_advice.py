"""Replay and report agree about one recording's advice: ``--replay`` shows the advice the recording carries, from
the first frame and after a seek, named as recorded, and ``--once``, ``--json`` and ``--check`` of the recording say
the same as ``--report``; a recording that carries no advice is re-evaluated, and says so.

Everything runs the real command line: the recordings are made with ``--record`` (a demo run, whose advice stands
from its first snapshot thanks to the demo's prefilled history) or with the real sampler on simulated time, the
replays run in tmux, and the expected advice is read from the report's own data.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_ui_e2e_tmux import Tmux, gpusight_command, wait_until

from gpusight.recordings.opening import open_seekable
from support.recordings import write_demo_recording

pytestmark = pytest.mark.skipif(__import__("shutil").which("tmux") is None, reason="needs tmux")

SEVERITY_BADGES = {"critical": "CRIT", "warn": "WARN", "info": "INFO"}
"""The advice summary line's badge of each severity."""


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(gpusight_command(*args), cwd=cwd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env={**os.environ, "TZ": "UTC"})


@pytest.fixture(scope="module")
def demo_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A headless ``--demo input-bound --record``: its warnings stand from the first snapshot to the last."""
    folder = tmp_path_factory.mktemp("replay-advice")
    result = run("--demo", "input-bound", "--record", "run.gtop", "--duration", "4", cwd=folder)
    assert result.returncode == 0, result.stderr
    return folder / "run.gtop"


@pytest.fixture(scope="module")
def changing_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six minutes, healthy then input-bound every two minutes: the advice is raised and cleared along the way."""
    folder = tmp_path_factory.mktemp("replay-advice-changing")
    return write_demo_recording(folder / "changing.gtop", 360, scenarios=("healthy", "input-bound"), segment_s=120)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    server = Tmux(f"gpusight-replay-advice-{os.getpid()}-{time.monotonic_ns()}")
    yield server
    server.kill_server()


def report_episodes(recording: Path) -> tuple[list[dict[str, object]], float]:
    """The advice episodes of ``--report FILE`` (offsets from the first snapshot) and the recording's length."""
    output = recording.with_suffix(".html")
    result = run("--report", str(recording), "-o", str(output), "--force", cwd=recording.parent)  # asked again
    assert result.returncode == 0, result.stderr
    data = json.loads(output.read_text().split('id="report-data">', 1)[1].split("</script>", 1)[0])
    seekable = open_seekable(recording)
    length = seekable.last_timestamp - data["origin"]
    seekable.close()
    return data["episodes"], round(length, 2)


def standing(recording: Path, offset: float) -> dict[str, str]:
    """Severity by advice id of what the report says stood ``offset`` seconds into ``recording``.

    The offset must lie well away from every raising and clearing after the first snapshot, so a poll more or less
    does not matter.
    """
    episodes, length = report_episodes(recording)
    found: dict[str, str] = {}
    for episode in episodes:
        start, end = float(episode["start"]), float(episode["end"])  # type: ignore[arg-type]
        assert (start == 0 or abs(start - offset) > 10) and (abs(end - offset) > 10 or end >= length), episode
        if start <= offset < end or start <= offset and end >= length:
            found[str(episode["id"])] = str(episode["severity"])
    return found


def summary_line(screen: str) -> str | None:
    """The one-line advice digest of an 80x24 screen (it has the ``a advice`` key), or None."""
    return next((line for line in screen.splitlines() if " a advice" in line), None)


def counts_in(line: str) -> dict[str, int]:
    """Advice counts by badge on the digest line, e.g. ``{"WARN": 4}``."""
    return {badge: int(count) for count, badge in re.findall(r"(\d+) (CRIT|WARN|INFO)\b", line)}


def expected_counts(advice: dict[str, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for severity in advice.values():
        counts[SEVERITY_BADGES[severity]] = counts.get(SEVERITY_BADGES[severity], 0) + 1
    return counts


def shows_recorded(tmux: Tmux, advice: dict[str, str]) -> bool:
    line = summary_line(tmux.screen())
    return line is not None and "recorded" in line and counts_in(line) == expected_counts(advice)


def test_first_frame_shows_the_recorded_advice_the_report_lists(tmux: Tmux, demo_recording: Path) -> None:
    at_start = standing(demo_recording, 0.0)
    assert at_start and set(at_start.values()) == {"warn"}  # the demo's warnings stand from the first snapshot
    tmux.start(gpusight_command("--replay", str(demo_recording)), (80, 24), demo_recording.parent)
    tmux.keys("Space")  # paused on (or right after) the first frame: the demo's warnings stand throughout anyway
    wait_until(lambda: shows_recorded(tmux, at_start), f"the recorded {at_start} named as recorded")
    line = summary_line(tmux.screen())
    assert line is not None and "nothing looks wrong" not in line


def test_a_seek_shows_the_advice_recorded_at_that_moment(tmux: Tmux, changing_recording: Path) -> None:
    raised, cleared = standing(changing_recording, 200.0), standing(changing_recording, 60.0)
    assert "WARN" in expected_counts(raised) and "WARN" not in expected_counts(cleared)
    tmux.start(gpusight_command("--replay", str(changing_recording), "--at", "+200s"), (80, 24),
               changing_recording.parent)
    tmux.keys("Space")
    wait_until(lambda: shows_recorded(tmux, raised), f"the advice recorded at +200 s: {raised}")
    tmux.keys("G")
    wait_until(lambda: "Go to:" in tmux.screen(), "the go-to dialog")
    tmux.keys("+60s", "Enter")
    wait_until(lambda: shows_recorded(tmux, cleared), f"the advice recorded at +60 s: {cleared}")


def test_a_recording_without_advice_is_re_evaluated_and_says_so(tmux: Tmux, tmp_path: Path) -> None:
    result = run("--demo", "input-bound", "--no-advice", "--record", "bare.gtop", "--duration", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "no advice recorded" in run("--replay", "bare.gtop", "--once", cwd=tmp_path).stdout.splitlines()[0]
    tmux.start(gpusight_command("--replay", "bare.gtop"), (80, 24), tmp_path)
    wait_until(lambda: (summary_line(tmux.screen()) or "").find("re-evaluated advice: none yet") >= 0,
               "the digest to say the advice is re-evaluated and has nothing yet")
    assert "nothing looks wrong" not in tmux.screen()


def test_once_json_and_check_of_a_recording_agree_with_its_report(demo_recording: Path) -> None:
    folder = demo_recording.parent
    at_start = standing(demo_recording, 0.0)
    episodes, length = report_episodes(demo_recording)
    at_end = {str(e["id"]) for e in episodes if float(e["end"]) >= length}  # type: ignore[arg-type]

    snapshot = json.loads(run("--replay", str(demo_recording), "--json", cwd=folder).stdout)
    assert {a["id"]: a["severity"] for a in snapshot["advice"]} == at_start
    assert "advice as recorded" in snapshot["label"]

    table = run("--replay", str(demo_recording), "--once", cwd=folder).stdout
    assert "advice as recorded" in table.splitlines()[0]
    assert table.count("[warn]") == len(at_start)

    check = run("--check", "--replay", str(demo_recording), cwd=folder)
    assert check.returncode == 1, check.stdout  # warnings stood at the end of the recording
    assert "the advice recorded in run.gtop" in check.stdout.splitlines()[0]
    assert {line.split()[1].rstrip(":") for line in check.stdout.splitlines() if line.startswith("WARN")} == {
        advice_id.split(":")[1] for advice_id in at_end}

    first = run("--check", "--replay", str(demo_recording), "--duration", "2", cwd=folder).stdout.splitlines()[0]
    assert first.startswith("gpusight check: 2 s of the advice recorded in run.gtop"), first
    assert "rule windows" not in first, "the recorded advice is checked: the rules and their windows never ran"
