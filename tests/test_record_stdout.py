"""``gpusight --record -``: snapshots as JSON lines on stdout, flushed one by one, for ``ssh host gpusight --record - | ...``."""

import json
import signal
import subprocess
import sys

from gpusight.snapshot.serialize import snapshot_from_dict
from support.terminal import ENTER_ALT_SCREEN, PtyTerminal, gpusight_argv

STREAM = ("--demo", "input-bound", "--record", "-", "--interval", "0.1")
"""A demo streamed to stdout ten times a second."""


def _stream(**popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gpusight", *STREAM], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def test_each_snapshot_arrives_as_one_json_line_while_it_runs():
    proc = _stream()
    try:
        lines = [proc.stdout.readline() for _ in range(3)]  # each arrives while the process runs: flushed per line
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    lines += rest.splitlines(keepends=True)
    assert len(lines) >= 3 and all(line.endswith(b"\n") for line in lines)
    snapshots = [snapshot_from_dict(json.loads(line), complete=True) for line in lines]
    assert [s.source for s in snapshots] == ["demo"] * len(lines)
    assert [s.timestamp for s in snapshots] == sorted(s.timestamp for s in snapshots)
    messages = err.decode().splitlines()
    assert messages[0] == "gpusight: recording to stdout every 0.1 s; stop with Ctrl-C or SIGTERM"
    assert messages[-1] == f"gpusight: recorded {len(lines)} snapshots to stdout"


def test_the_stream_ends_quietly_when_its_reader_goes_away():
    proc = _stream()
    try:
        first = proc.stdout.readline()
        proc.stdout.close()  # like `| head -n 1` exiting
        status = proc.wait(timeout=15)
        err = proc.stderr.read().decode()
    finally:
        proc.kill()
    assert status == 141
    assert snapshot_from_dict(json.loads(first), complete=True).source == "demo"
    assert err.splitlines() == ["gpusight: recording to stdout every 0.1 s; stop with Ctrl-C or SIGTERM"]


def test_on_a_terminal_it_streams_json_lines_instead_of_the_screen_until_ctrl_c():
    terminal = PtyTerminal(gpusight_argv(*STREAM), (120, 30), controlling=True)
    try:
        terminal.wait_for(lambda: terminal.text().count("\n{") >= 3, "three JSON lines on the terminal")
        terminal.send(b"\x03")
        status = terminal.reap()
    finally:
        terminal.cleanup()
    assert status == 0, terminal.text()[-2000:]
    assert ENTER_ALT_SCREEN not in terminal.output
    lines = terminal.text().replace("\r\n", "\n").splitlines()
    assert lines[0] == "gpusight: recording to stdout every 0.1 s; stop with Ctrl-C or SIGTERM"
    snapshots = [json.loads(line) for line in lines if line.startswith("{")]
    assert len(snapshots) >= 3
    assert all(snapshot_from_dict(s, complete=True).source == "demo" for s in snapshots[:-1])
