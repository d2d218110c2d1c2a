"""A progress bar on stderr while a whole recording is read: ``--convert`` (every target), ``--report`` and the index
scan of ``--replay FILE --at WHEN``.

The commands run as a user runs them, on recordings big enough to take seconds: once with stderr on a real
pseudo-terminal, where a bar shows the file's name, a percentage that grows, a rate and the time left, and
is gone again before the usual summary; once with stderr a plain file, which gets the usual summary and not
one escape sequence. Both runs must write the same output. The readers' side (how far a read has got,
told through ``ReadProgress``) and the bar itself are checked in-process too.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpusight.cli import progress as cli_progress
from gpusight.demo.source import DemoSource
from gpusight.recordings.opening import open_recorder, open_seekable, read_recording
from gpusight.snapshot.serialize import snapshot_to_json
from support.recordings import DAY_START, write_demo_recording
from support.terminal import SHOW_CURSOR, PtyTerminal, gpusight_argv

SIZE = (120, 30)
"""Columns and rows of the terminal."""

BUSY_SNAPSHOTS = 2000
"""Snapshots of the busy demo server (8 GPUs) in the recordings converted and reported: seconds of work on 2 cores."""

HOST_SNAPSHOTS = 200_000
"""Snapshots of a one-GPU host (2.3 days at 1 Hz) in the gzip JSON-lines recording that ``--at`` indexes: a scan of
seconds on 2 cores."""

DISTINCT = 600
"""Distinct demo snapshots the recordings are made of (repeated with later timestamps)."""

RUN_TIMEOUT = 120.0
"""Seconds one command may take before it counts as hung."""

_CONTROL = re.compile(rb"\x1b\[([0-9;?]*)([A-Za-z])|\r|\n")
_PERCENT = re.compile(r" (\d{1,3})% ")
_RATE = re.compile(r" \d+(\.\d+)? [kMG]?B/s ")
_ETA = re.compile(r" ETA \d+:\d\d:\d\d$")


@dataclass(frozen=True)
class Recordings:
    """The big recordings the commands read."""

    busy_compact: Path
    """The busy demo server in the compact format."""
    busy_jsonl: Path
    """The same snapshots as JSON lines."""
    host_jsonl: Path
    """A long gzip JSON-lines recording of a one-GPU host, for the index scan."""


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> Recordings:
    """Written once for the module: ``DISTINCT`` demo seconds repeated with a day's timestamps, by the real writers."""
    folder = tmp_path_factory.mktemp("big")
    now = [DAY_START]
    busy_source = DemoSource("mixed", seed=1, clock=lambda: now[0])
    host_source = DemoSource("healthy", seed=1, clock=lambda: now[0])
    busy, host = [], []
    for _ in range(DISTINCT):
        busy.append(busy_source.poll())
        snapshot = host_source.poll()
        host.append(dataclasses.replace(snapshot, devices=snapshot.devices[:1], processes=()))
        now[0] += 1.0
    busy_compact, busy_jsonl = folder / "day.gtop", folder / "day.jsonl"
    for path in (busy_compact, busy_jsonl):
        writer = open_recorder(path)
        for number in range(BUSY_SNAPSHOTS):
            writer.write(dataclasses.replace(busy[number % DISTINCT], timestamp=DAY_START + number))
        writer.close()
    host_jsonl = folder / "host.jsonl.gz"
    _write_host_lines(host_jsonl, [snapshot_to_json(snapshot) for snapshot in host])
    return Recordings(busy_compact, busy_jsonl, host_jsonl)


def _write_host_lines(path: Path, distinct: list[str]) -> None:
    """``HOST_SNAPSHOTS`` lines of ``distinct`` in turn, each with its own second (as gpusight writes them, timestamp
    first), compressed as one gzip stream (as ``gzip run.jsonl`` leaves it)."""
    head = '{"timestamp":'
    assert all(line.startswith(head) for line in distinct)
    tails = [line[line.index(","):] for line in distinct]
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as file:
        for start in range(0, HOST_SNAPSHOTS, DISTINCT):
            count = min(DISTINCT, HOST_SNAPSHOTS - start)
            file.write("".join(f"{head}{DAY_START + start + n}{tails[n]}\n" for n in range(count)))


@dataclass
class Run:
    """What a finished command wrote."""

    status: int
    """Exit status."""
    stderr: bytes
    """Everything on stderr (on the terminal: with the bar's drawing)."""
    stdout_head: bytes
    """The first 64 kB of stdout."""
    stdout_lines: int
    """Lines on stdout."""


class _PipeReader:
    """Reads a pipe to its end on a thread of its own, keeping its start and counting its lines."""

    def __init__(self, pipe: io.BufferedReader) -> None:
        self.head = b""
        self.lines = 0
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: io.BufferedReader) -> None:
        while data := pipe.read(1 << 20):
            self.lines += data.count(b"\n")
            if len(self.head) < 65536:
                self.head += data[: 65536 - len(self.head)]

    def join(self) -> None:
        self._thread.join(RUN_TIMEOUT)


def run_on_terminal(args: list[str], cwd: Path) -> Run:
    """``gpusight *args`` in ``cwd`` with stderr (and stdin) on a pseudo-terminal and stdout a pipe."""
    with PtyTerminal(gpusight_argv(*args), SIZE, cwd=cwd, stdout=subprocess.PIPE) as terminal:
        terminal.close_slave()
        assert terminal.proc.stdout is not None
        stdout = _PipeReader(terminal.proc.stdout)
        status = terminal.reap(RUN_TIMEOUT)
        stdout.join()
        return Run(status, bytes(terminal.output), stdout.head, stdout.lines)


def run_without_terminal(args: list[str], cwd: Path) -> Run:
    """``gpusight *args`` in ``cwd`` with stdout a pipe and stderr a file: no terminal anywhere."""
    with open(cwd / "stderr.txt", "w+b") as stderr:
        proc = subprocess.Popen(gpusight_argv(*args), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr)
        assert proc.stdout is not None
        stdout = _PipeReader(proc.stdout)
        status = proc.wait(RUN_TIMEOUT)
        stdout.join()
        stderr.seek(0)
        return Run(status, stderr.read(), stdout.head, stdout.lines)


def final_screen(output: bytes) -> list[str]:
    """The lines a terminal shows after ``output`` (trailing blank ones dropped), for the controls a progress bar
    uses: carriage return, newline, erase line, cursor up; colours and the cursor's visibility change no text.
    Any other control sequence fails the test."""
    lines, row, column, start = [""], 0, 0, 0
    for match in [*_CONTROL.finditer(output), None]:
        text = output[start: match.start() if match else len(output)].decode("utf-8", "replace")
        line = lines[row].ljust(column)
        lines[row] = line[:column] + text + line[column + len(text):]
        column += len(text)
        if match is None:
            break
        start = match.end()
        token = match.group(0)
        if token == b"\r":
            column = 0
        elif token == b"\n":
            row, column = row + 1, 0
            lines += [""] * (row + 1 - len(lines))
        elif token.endswith(b"m") or token in (b"\x1b[?25l", b"\x1b[?25h"):
            continue
        elif token == b"\x1b[2K":
            lines[row] = ""
        elif token.endswith(b"A"):
            row = max(0, row - int(match.group(1) or 1))
        else:
            raise AssertionError(f"unexpected control sequence {token!r}")
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def bar_frames(output: bytes) -> list[str]:
    """Every drawing of the bar in ``output`` as plain text (colours removed), in order."""
    plain = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", output).decode("utf-8", "replace")
    return [piece.strip() for piece in re.split(r"[\r\n]", plain) if _PERCENT.search(piece)]


def assert_a_growing_bar(output: bytes, description: str) -> None:
    """The bar was drawn several times for ``description``: percentages that only grow, a rate and a time left."""
    frames = bar_frames(output)
    assert frames, f"no progress bar on the terminal: {output[-2000:]!r}"
    assert all(frame.startswith(description + " ") for frame in frames), frames[:3]
    percentages = [int(_PERCENT.search(frame).group(1)) for frame in frames]
    assert percentages == sorted(percentages) and percentages[-1] <= 100, percentages
    assert len(set(percentages)) >= 3, percentages
    assert any(_RATE.search(frame) for frame in frames), frames[-3:]
    assert any(_ETA.search(frame) for frame in frames), frames[-3:]
    assert SHOW_CURSOR in output[output.rfind(b"%"):], "the cursor is not shown again after the bar"


def assert_no_bar(stderr: bytes) -> None:
    """Nothing of a bar: not one escape sequence, no carriage return, no percentage."""
    assert b"\x1b" not in stderr and b"\r" not in stderr and not _PERCENT.search(stderr.decode()), stderr[:500]


@dataclass(frozen=True)
class Command:
    """A command that reads a whole recording."""

    args: tuple[str, ...]
    """Its arguments; ``{busy_compact}`` and the like name a field of :class:`Recordings`."""
    description: str
    """What its bar says it does."""
    stderr: str | None
    """A pattern of the one line it writes to stderr when done (the usual summary); None when it writes none."""

    def argv(self, recordings: Recordings) -> list[str]:
        """Its arguments, with the recordings' paths filled in."""
        paths = {name: str(path) for name, path in vars(recordings).items()}
        return [arg.format(**paths) for arg in self.args]

    def usual_stderr(self) -> str:
        """A pattern of all it writes to stderr when nothing is drawn."""
        return "" if self.stderr is None else self.stderr + "\n"


def _summary(source: str, target: str) -> str:
    """The pattern of ``--convert``'s summary for ``source`` (format) and ``target`` (name and format)."""
    size = r"[\d.]+ [kMG]?B"
    return (rf"gpusight: converted {BUSY_SNAPSHOTS} snapshots from \S+ \({source}, {size}\) to {target}, {size}\); "
            r"0 damaged parts skipped")


COMMANDS = {
    "compact to JSON lines": Command(("--convert", "{busy_compact}", "out.jsonl"), "converting day.gtop",
                                     _summary("compact", r"out\.jsonl \(jsonl")),
    "JSON lines to compact": Command(("--convert", "{busy_jsonl}", "out.gtop"), "converting day.jsonl",
                                     _summary("jsonl", r"out\.gtop \(compact")),
    "compact to stdout": Command(("--convert", "{busy_compact}", "-"), "converting day.gtop",
                                 _summary("compact", r"stdout \(jsonl")),
    "compact to TensorBoard": Command(("--convert", "{busy_compact}", "--to", "tensorboard", "tb"), "converting day.gtop",
                                      _summary("compact", r"tb/events\.out\.tfevents\.\S+ \(tensorboard")),
    "report": Command(("--report", "{busy_compact}", "-o", "day.html"), "reading day.gtop", None),
    "index scan for --at": Command(("--replay", "{host_jsonl}", "--at", "+10s", "--json"), "indexing host.jsonl.gz", None),
}
"""Each command that reads a whole recording: every conversion target, the report, and the index scan of ``--at``."""


def assert_usual_output(name: str, run: Run, cwd: Path) -> None:
    """What the command ``name`` writes besides its bar, whether or not stderr is a terminal."""
    if name == "compact to stdout":
        assert run.stdout_lines == BUSY_SNAPSHOTS and run.stdout_head.startswith(b'{"timestamp":')
    elif name == "report":
        assert run.stdout_head == b"day.html\n" and (cwd / "day.html").stat().st_size > 0
    elif name == "index scan for --at":
        assert json.loads(run.stdout_head)["timestamp"] == DAY_START + 10
    elif name == "compact to TensorBoard":
        assert len(list((cwd / "tb").iterdir())) == 1
    else:
        assert (cwd / COMMANDS[name].args[-1]).stat().st_size > 0


@pytest.mark.parametrize("name", COMMANDS)
def test_on_a_terminal_a_long_read_shows_a_growing_bar_then_only_the_usual_lines(recordings, tmp_path, name):
    command = COMMANDS[name]
    run = run_on_terminal(command.argv(recordings), tmp_path)
    assert run.status == 0, run.stderr[-2000:]
    assert_a_growing_bar(run.stderr, command.description)
    screen = final_screen(run.stderr)  # the bar is gone: only the usual summary stays
    assert re.fullmatch(command.usual_stderr(), "".join(line + "\n" for line in screen)), screen
    assert_usual_output(name, run, tmp_path)


@pytest.mark.parametrize("name", ["compact to JSON lines", "report", "index scan for --at"])
def test_without_a_terminal_the_same_read_writes_no_bar_and_no_escape(recordings, tmp_path, name):
    command = COMMANDS[name]
    run = run_without_terminal(command.argv(recordings), tmp_path)
    assert run.status == 0, run.stderr
    assert_no_bar(run.stderr)
    assert re.fullmatch(command.usual_stderr(), run.stderr.decode()), run.stderr
    assert_usual_output(name, run, tmp_path)


def test_ctrl_c_during_a_conversion_leaves_a_clean_terminal(recordings, tmp_path):
    args = ["--convert", str(recordings.busy_compact), "out.jsonl"]
    with PtyTerminal(gpusight_argv(*args), SIZE, cwd=tmp_path, stdout=subprocess.DEVNULL) as terminal:
        terminal.close_slave()
        terminal.wait_for(lambda: len(bar_frames(bytes(terminal.output))) >= 2, "the bar", timeout=RUN_TIMEOUT)
        os.killpg(terminal.proc.pid, signal.SIGINT)
        status = terminal.reap()
        output = bytes(terminal.output)
    assert status == 130
    assert final_screen(output) == []
    assert SHOW_CURSOR in output[output.rfind(b"%"):]
    assert list(tmp_path.iterdir()) == []  # neither OUT nor its partial file


class _Spy:
    """A ReadProgress that keeps what it is told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int | None]] = []

    def begin(self, total: int) -> None:
        self.calls.append(("begin", total))

    def reached(self, position: int) -> None:
        self.calls.append(("reached", position))

    def end(self) -> None:
        self.calls.append(("end", None))

    def positions(self) -> list[int]:
        return [value for kind, value in self.calls if kind == "reached" and value is not None]


@pytest.fixture(scope="module")
def small_recordings(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Five minutes of a demo, once in each format (the plain JSON lines are megabytes)."""
    folder = tmp_path_factory.mktemp("small")
    return [write_demo_recording(folder / name, 300) for name in ("run.gtop", "run.jsonl", "run.jsonl.gz")]


def test_readers_tell_how_far_they_have_got_from_begin_to_end(small_recordings):
    reads = {"read_recording": lambda path, spy: sum(1 for _ in read_recording(path, spy)),
             "open_seekable": lambda path, spy: open_seekable(path, spy).close()}
    for path in small_recordings:
        size = path.stat().st_size
        for what, read in reads.items():
            spy = _Spy()
            read(path, spy)
            where = f"{what}({path.name})"
            assert spy.calls[0] == ("begin", size) and spy.calls[-1] == ("end", None), (where, spy.calls[:3])
            assert [kind for kind, _ in spy.calls[1:-1]] == ["reached"] * (len(spy.calls) - 2), where
            positions = spy.positions()
            assert positions == sorted(positions) and positions[0] >= 0 and positions[-1] == size, (where, positions[-3:])
    plain = small_recordings[1]
    assert plain.stat().st_size > 2 << 20
    spy = _Spy()
    sum(1 for _ in read_recording(plain, spy))
    assert len(set(spy.positions())) >= 3  # a megabyte at a time, not all at the end


def test_a_read_left_halfway_still_ends_its_progress(small_recordings):
    for path in small_recordings:
        spy = _Spy()
        stream = read_recording(path, spy)
        next(stream)
        stream.close()
        assert spy.calls[0][0] == "begin" and spy.calls[-1] == ("end", None), path.name
        assert sum(kind == "end" for kind, _ in spy.calls) == 1


class _TerminalText(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_the_bar_shows_a_file_name_as_plain_text_and_stops_for_good_when_closed(monkeypatch):
    screen = _TerminalText()
    monkeypatch.setattr(sys, "stderr", screen)
    monkeypatch.setattr(cli_progress, "SHOW_AFTER_S", 0.0)
    description = cli_progress.reading_description("converting", "/data/[bold red]x\x1b[2J[not a tag].gtop")
    assert description == "converting [bold red]x[not a tag].gtop"
    with cli_progress.stderr_progress(description) as progress:
        assert progress is not None
        progress.begin(1000)
        progress.reached(500)
        progress.end()
        drawn = screen.getvalue()
        assert bar_frames(drawn.encode())[0].startswith("converting [bold red]x[not a tag].gtop ")
        assert " 50% " in bar_frames(drawn.encode())[0]
        progress.begin(1000)  # a second read of the same command gets a bar of its own
        progress.reached(700)
        assert " 70% " in bar_frames(screen.getvalue()[len(drawn):].encode())[0]
    after_close = screen.getvalue()
    progress.begin(1000)
    progress.reached(900)
    assert screen.getvalue() == after_close


def test_no_bar_and_no_rich_when_stderr_is_not_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with cli_progress.stderr_progress("reading run.gtop") as progress:
        assert progress is None
    probe = "import gpusight.cli, sys; print(any(name.split('.')[0] == 'rich' for name in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "False"  # importing the command line does not load Rich


# ---- sampling: --check and --once --duration ----

_SAMPLED = re.compile(r" (\d+)/(\d+) s$")


@pytest.mark.parametrize(("args", "first_line"), [
    (["--check", "--demo", "--duration", "3"], "gpusight check: 3 s of demo data (mixed), 8 GPUs"),
    (["--once", "--demo", "--duration", "3"], "gpusight "),
], ids=["check", "once"])
def test_sampling_shows_the_seconds_sampled_on_a_terminal_and_nothing_elsewhere(tmp_path, args, first_line):
    on_terminal = run_on_terminal([*args, "--interval", "0.25"], tmp_path)
    plain = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", on_terminal.stderr).decode("utf-8", "replace")
    frames = [piece.strip() for piece in re.split(r"[\r\n]", plain) if _SAMPLED.search(piece.strip())]
    assert frames, f"no progress line on the terminal: {on_terminal.stderr[-2000:]!r}"
    assert all(frame.startswith("sampling") for frame in frames), frames[:3]
    counts = [tuple(map(int, _SAMPLED.search(frame).groups())) for frame in frames]
    assert {total for _, total in counts} == {3}
    seconds = [done for done, _ in counts]
    assert seconds == sorted(seconds) and len(set(seconds)) >= 2, seconds
    assert final_screen(on_terminal.stderr) == []  # the line is gone before the result is printed
    elsewhere = run_without_terminal([*args, "--interval", "0.25"], tmp_path)
    assert elsewhere.stderr == b""
    for run in (on_terminal, elsewhere):
        assert run.status == elsewhere.status
        assert run.stdout_head.decode().startswith(first_line), run.stdout_head[:200]
        assert b"\x1b" not in run.stdout_head and b"\r" not in run.stdout_head
