"""Hostile or careless command lines: a closed pipe, absurd numbers, empty paths. Real `gpusight` processes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

GPUSIGHT = [sys.executable, "-m", "gpusight"]


def run_into_closed_pipe(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run gpusight with stdout a pipe whose reader is already gone, as `gpusight ... | true` often is."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [*GPUSIGHT, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60, cwd=cwd
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("mode", ["--json", "--once"])
def test_a_closed_pipe_ends_quietly_like_a_c_tool(mode: str) -> None:
    out = run_into_closed_pipe("--demo", "healthy", mode)
    assert out.stderr == ""
    assert out.returncode == 141  # 128 + SIGPIPE, what the shell reports for `cat big | true`


def test_a_closed_pipe_still_writes_the_export(tmp_path: Path) -> None:
    out = run_into_closed_pipe("--demo", "healthy", "--once", "--export", str(tmp_path / "exp"))
    assert "Traceback" not in out.stderr
    assert out.returncode == 141
    suffixes = sorted(path.suffix for path in (tmp_path / "exp").iterdir())
    assert suffixes == [".html", ".json", ".md", ".svg"]


def test_a_reader_that_stops_early_gets_what_it_read(tmp_path: Path) -> None:
    shell = f"{sys.executable} -m gpusight --demo healthy --json | head -c 1; echo; echo status=${{PIPESTATUS[0]}}"
    out = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("{\n")
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr
    assert out.stdout.strip().splitlines()[-1] in ("status=0", "status=141")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--duration", "nan"], "finite"),
        (["--duration", "inf"], "finite"),
        (["--duration", "1e308"], "at most 2592000 seconds"),
        (["--duration", "-1"], "must not be negative"),
        (["--duration", "soon"], "not a number of seconds"),
        (["--interval", "nan"], "finite"),
        (["--interval", "1e308"], "at least 0.1 and at most 3600"),
        (["--interval", "0.05"], "at least 0.1 and at most 3600"),
        (["--export", ""], "--export: must not be empty"),
        (["--export-dir", " "], "--export-dir: must not be empty"),
        (["--record", ""], "--record: must not be empty"),
        (["--config", ""], "--config: must not be empty"),
    ],
)
def test_absurd_numbers_and_empty_paths_are_refused(args: list[str], message: str, tmp_path: Path) -> None:
    out = subprocess.run(
        [*GPUSIGHT, "--demo", "--once", *args], capture_output=True, text=True, timeout=30, cwd=tmp_path
    )
    assert out.returncode == 2
    assert message in out.stderr
    assert len(out.stderr.strip().splitlines()[-1]) < 200
    assert list(tmp_path.iterdir()) == []  # nothing exported into the current directory


def test_empty_replay_path_is_refused() -> None:
    out = subprocess.run([*GPUSIGHT, "--replay", "", "--once"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert "--replay: must not be empty" in out.stderr
