"""``gpusight --convert IN OUT``: real ``gpusight`` processes converting real recordings."""

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpusight.demo.source import DemoSource
from gpusight.recordings.formats import COMPACT_MAGIC, GZIP_MAGIC, RecordingProblem
from gpusight.recordings.opening import open_recorder, read_recording
from gpusight.snapshot.model import Snapshot
from gpusight.snapshot.serialize import snapshot_to_dict

GPUSIGHT = [sys.executable, "-m", "gpusight"]


def gpusight(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """Run the CLI with ``args``; output as text."""
    return subprocess.run([*GPUSIGHT, *args], capture_output=True, text=True, timeout=120, **kwargs)


def demo_snapshots(count: int, scenario: str = "mixed") -> list[Snapshot]:
    """``count`` snapshots of a demo scenario, one simulated second apart."""
    now = [1_800_000_000.0]
    source = DemoSource(scenario, clock=lambda: now[0])
    snapshots = []
    for _ in range(count):
        snapshots.append(source.poll())
        now[0] += 1.0
    return snapshots


def record(path: Path, snapshots: list[Snapshot]) -> Path:
    """Write ``snapshots`` to ``path`` with the real recorder (its name picks the format)."""
    recorder = open_recorder(path)
    for snapshot in snapshots:
        recorder.write(snapshot)
    recorder.close()
    return path


def read_back(path: Path) -> tuple[list[dict], list[RecordingProblem]]:
    """The snapshots (as dicts) and problems read back from ``path``."""
    items = list(read_recording(path))
    return ([snapshot_to_dict(i) for i in items if isinstance(i, Snapshot)],
            [i for i in items if isinstance(i, RecordingProblem)])


@pytest.fixture(scope="module")
def snapshots() -> list[Snapshot]:
    """Forty snapshots of the busy demo server (8 GPUs)."""
    return demo_snapshots(40)


FORMAT_OF = {"a.jsonl": "jsonl", "a.jsonl.gz": "jsonl.gz", "a.gtr": "compact"}
"""The format each intermediate file name asks for."""


@pytest.mark.parametrize(("first", "second"), [("a.jsonl", "b.jsonl.gz"), ("a.jsonl.gz", "b.jsonl"), ("a.gtr", "b.jsonl"),
                                               ("a.gtr", "b.jsonl.gz")])
def test_a_round_trip_keeps_every_snapshot(tmp_path, snapshots, first, second):
    source = record(tmp_path / "in.jsonl", snapshots)
    there = gpusight("--convert", str(source), str(tmp_path / first))
    assert there.returncode == 0, there.stderr
    back = gpusight("--convert", str(tmp_path / first), str(tmp_path / second))
    assert back.returncode == 0, back.stderr
    assert read_back(tmp_path / second) == ([snapshot_to_dict(s) for s in snapshots], [])
    magic = {"jsonl": b"{", "jsonl.gz": GZIP_MAGIC, "compact": COMPACT_MAGIC}[FORMAT_OF[first]]
    assert (tmp_path / first).read_bytes().startswith(magic)
    summary = back.stderr.strip().splitlines()
    assert len(summary) == 1
    assert summary[0].startswith(f"gpusight: converted 40 snapshots from {tmp_path / first} (")
    assert re.search(r" [0-9.]+ [kM]B\); 0 damaged parts skipped$", summary[0])
    assert f"from {tmp_path / first} ({FORMAT_OF[first]}, " in summary[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"in.jsonl", first, second})  # no temporary left


def test_damaged_parts_are_skipped_and_reported(tmp_path, snapshots):
    lines = [json.dumps(snapshot_to_dict(s), separators=(",", ":")) for s in snapshots[:10]]
    damaged = lines[:2] + ["{not json"] + lines[2:5] + ['{"schema": 3}'] * 7 + lines[5:]
    source = tmp_path / "damaged.jsonl"
    source.write_text("\n".join(damaged) + "\n" + lines[0][:50])  # and a cut-off last line
    out = gpusight("--convert", str(source), str(tmp_path / "clean.jsonl"))
    assert out.returncode == 0, out.stderr
    err = out.stderr.strip().splitlines()
    assert err[0] == f"gpusight: {source}: line 3: not valid JSON (truncated or corrupt) (skipped)"
    assert all(line.startswith(f"gpusight: {source}: line ") for line in err[1:5])
    assert err[5] == f"gpusight: {source}: ... and 4 more damaged parts"
    assert "converted 10 snapshots" in err[6] and "9 damaged parts skipped" in err[6]
    assert read_back(tmp_path / "clean.jsonl") == ([snapshot_to_dict(s) for s in snapshots[:10]], [])


def test_a_damaged_compact_block_is_skipped_and_later_blocks_still_convert(tmp_path):
    snapshots = demo_snapshots(700, "input-bound")  # a block holds 300 s: three blocks
    source = record(tmp_path / "in.gtr", snapshots)
    data = bytearray(source.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(64)  # a damaged stretch in the middle of the file
    source.write_bytes(bytes(data))
    out = gpusight("--convert", str(source), str(tmp_path / "out.jsonl"))
    assert out.returncode == 0, out.stderr
    err = out.stderr.strip().splitlines()
    assert err[0].startswith(f"gpusight: {source}: block ") and err[0].endswith(" (skipped)")
    kept, problems = read_back(tmp_path / "out.jsonl")
    assert problems == []
    originals = [snapshot_to_dict(s) for s in snapshots]
    assert 0 < len(kept) < len(originals)
    assert kept[0] == originals[0] and kept[-1] == originals[-1]  # blocks before and after the damage
    assert all(snapshot in originals for snapshot in kept)
    assert f"converted {len(kept)} snapshots from {source} (compact, " in err[-1]


def test_an_existing_out_is_replaced_only_with_force(tmp_path, snapshots):
    source = record(tmp_path / "in.jsonl", snapshots[:3])
    target = tmp_path / "out.jsonl"
    target.write_text("keep me\n")
    refused = gpusight("--convert", str(source), str(target))
    assert refused.returncode == 1
    assert refused.stderr == f"gpusight: {target} exists; add --force to replace it\n"
    assert target.read_text() == "keep me\n"
    forced = gpusight("--convert", str(source), str(target), "--force")
    assert forced.returncode == 0, forced.stderr
    assert read_back(target) == ([snapshot_to_dict(s) for s in snapshots[:3]], [])


def test_the_input_is_never_overwritten(tmp_path, snapshots):
    source = record(tmp_path / "in.jsonl", snapshots[:3])
    before = source.read_bytes()
    (tmp_path / "link.jsonl").symlink_to(source)
    for target in (source, tmp_path / "link.jsonl"):
        out = gpusight("--convert", str(source), str(target), "--force")
        assert out.returncode == 1
        assert out.stderr == f"gpusight: {target} is the recording being converted; choose another OUT\n"
    assert source.read_bytes() == before


def test_out_dash_writes_json_lines_to_stdout(tmp_path, snapshots):
    source = record(tmp_path / "in.jsonl.gz", snapshots[:5])
    out = gpusight("--convert", str(source), "-")
    assert out.returncode == 0, out.stderr
    assert [json.loads(line) for line in out.stdout.splitlines()] == [snapshot_to_dict(s) for s in snapshots[:5]]
    assert "to stdout (jsonl, " in out.stderr


def test_a_reader_that_goes_away_ends_the_conversion_quietly(tmp_path, snapshots):
    source = record(tmp_path / "in.jsonl", snapshots)  # about 2 MB of JSON: far more than a pipe holds
    proc = subprocess.Popen([*GPUSIGHT, "--convert", str(source), "-"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert json.loads(first) == snapshot_to_dict(snapshots[0])
    assert err == ""


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read recording {path}: No such file or directory"),
    (b"", "{path} holds no snapshots"),
    (b"hello\nworld\n", "{path} holds no snapshots (2 unreadable parts: line 1: not valid JSON (truncated or corrupt))"),
    (gzip.compress(b"not a snapshot\n"), "{path} holds no snapshots (1 unreadable part: line 1: not valid JSON "
                                         "(truncated or corrupt))"),
])
def test_bad_input_is_one_line_and_status_1(tmp_path, content, message):
    path = tmp_path / "in.jsonl"
    if content is not None:
        path.write_bytes(content)
    out = gpusight("--convert", str(path), str(tmp_path / "out.jsonl"))
    assert out.returncode == 1
    assert out.stderr == f"gpusight: {message.format(path=path)}\n"
    assert not (tmp_path / "out.jsonl").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if content is None else ["in.jsonl"])


@pytest.mark.parametrize("target", ["/dev/null", "directory"])
def test_out_must_be_a_regular_file_even_with_force(tmp_path, snapshots, target):
    source = record(tmp_path / "in.jsonl", snapshots[:2])
    if target == "directory":
        target = str(tmp_path / "sub")
        Path(target).mkdir()
    out = gpusight("--convert", str(source), target, "--force")
    assert out.returncode == 1
    assert out.stderr == f"gpusight: {target} is not a regular file (write to stdout with -)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["in.jsonl"] + (["sub"] if "sub" in target else []))


def test_a_directory_as_input_is_refused(tmp_path):
    out = gpusight("--convert", str(tmp_path), str(tmp_path / "out.jsonl"))
    assert out.returncode == 1
    assert out.stderr.startswith("gpusight: cannot read recording ") and "directory" in out.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--convert", "in.jsonl"], "--convert needs IN and OUT (or --to tensorboard DIR)"),
    (["--convert", "a", "b", "c"], "--convert needs IN and OUT (or --to tensorboard DIR)"),
    (["--convert", "a", "b", "--to", "tensorboard", "d"], "--convert IN --to tensorboard DIR takes no OUT"),
    (["--convert", "a", "--to", "csv", "d"], "--to: unknown format 'csv' (known: tensorboard)"),
    (["--to", "tensorboard", "d"], "--to needs --convert"),
    (["--force"], "--force needs --convert or --report"),
    (["--convert", "a", "b", "--demo"], "--convert cannot be combined with --demo"),
    (["--convert", "a", "b", "--record", "c.jsonl"], "--convert cannot be combined with --record"),
    (["--convert", "", "b"], "--convert: file names must not be empty"),
    (["--record", "-", "--json"], "--record - streams JSON lines to stdout; it cannot be combined with --json"),
    (["--record", "-", "--duration", "3"], "--record - streams JSON lines to stdout; it cannot be combined with --duration"),
])
def test_usage_errors_exit_2(args, message):
    out = gpusight(*args)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == f"gpusight: error: {message}"
