"""Exports create their files exclusively: nothing at a final name is ever replaced or followed.

Real threads, real processes and real files: a dangling symlink at the would-be name, many exports
in the same second into one directory, a read-only directory, and a file system without hard links
(simulated for one child process by an ``LD_PRELOAD`` library whose ``link()`` fails like FAT's).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from test_export import make_history

from gpusight.snapshot.serialize import snapshot_from_dict
from gpusight.snapshot_export.export_set import ExportError, export_snapshot

SUFFIXES = (".svg", ".json", ".md", ".html")


def stems_around_now(seconds: range) -> list[str]:
    """The export stems of the seconds ``seconds`` away from now."""
    now = time.time()
    return [time.strftime("gpusight-%Y%m%d-%H%M%S", time.localtime(now + s)) for s in seconds]


def export_labelled(directory: Path, label: str) -> tuple[Path, ...]:
    """Export a snapshot whose label and screenshot both say ``label``; return the paths written."""
    history, snap = make_history()
    return export_snapshot(directory, replace(snap, label=label), history, f"<svg>{label}</svg>").paths


def assert_each_export_is_intact(directory: Path, exports: dict[str, tuple[Path, ...]]) -> None:
    """Every export's files exist under distinct names with its own content, and nothing else is there."""
    every_path = [path for paths in exports.values() for path in paths]
    assert len(set(every_path)) == len(every_path) == len(exports) * len(SUFFIXES)
    for label, paths in exports.items():
        svg, document, report, page = paths
        assert len({p.stem for p in paths}) == 1
        assert svg.read_text() == f"<svg>{label}</svg>"
        assert snapshot_from_dict(json.loads(document.read_text()), complete=True).label == label
        assert label in report.read_text()
        assert f"]({page.name})" in report.read_text() and label in page.read_text()
    assert sorted(directory.iterdir()) == sorted(every_path)  # no temporary file is left either


def test_a_dangling_symlink_at_the_name_is_left_alone_and_not_followed(tmp_path):
    target_dir, outside = tmp_path / "exports", tmp_path / "outside"
    target_dir.mkdir()
    links = []
    for stem in stems_around_now(range(-1, 10)):  # the export takes its stem from one of these seconds
        link = target_dir / (stem + ".json")
        link.symlink_to(outside / (stem + ".json"))
        links.append(link)
    paths = export_labelled(target_dir, "beside the links")
    assert not outside.exists(), "a symlink was followed"
    for link in links:
        assert link.is_symlink() and os.readlink(link) == str(outside / link.name)
    assert all(p.stem.endswith("-1") for p in paths)  # the taken stem was skipped as a whole
    assert {p.name for p in paths}.isdisjoint(link.name for link in links)


def test_a_file_at_one_of_the_names_is_never_overwritten(tmp_path):
    kept = [tmp_path / (stem + ".md") for stem in stems_around_now(range(-1, 10))]
    for path in kept:
        path.write_text("somebody else's notes")
    paths = export_labelled(tmp_path, "next to notes")
    assert all(path.read_text() == "somebody else's notes" for path in kept)
    assert all(p.stem.endswith("-1") for p in paths)


def test_many_threads_exporting_in_the_same_second_get_distinct_complete_files(tmp_path):
    threads, per_thread = 12, 3
    start = threading.Barrier(threads)
    exports: dict[str, tuple[Path, ...]] = {}
    failures: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                label = f"thread {worker} export {i}"
                exports[label] = export_labelled(tmp_path, label)
        except (OSError, ExportError, threading.BrokenBarrierError) as exc:  # reported by the test below
            failures.append(exc)

    pool = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(120)
    assert not failures, failures
    assert len(exports) == threads * per_thread
    assert_each_export_is_intact(tmp_path, exports)


_EXPORT_AT = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from test_export_exclusive import export_labelled
directory, name, start, count = Path(sys.argv[2]), sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
time.sleep(max(0.0, start - time.time()))
written = {f"{name} export {i}": [str(p) for p in export_labelled(directory, f"{name} export {i}")] for i in range(count)}
print(json.dumps(written))
"""


def run_exporters(directory: Path, processes: int, per_process: int, env: dict[str, str] | None = None
                  ) -> dict[str, tuple[Path, ...]]:
    """Start ``processes`` children that each export ``per_process`` times, all from the same moment."""
    start = time.time() + 3.0  # time for every interpreter to start and import
    children = [
        subprocess.Popen([sys.executable, "-c", _EXPORT_AT, str(Path(__file__).parent), str(directory),
                          f"process {n}", str(start), str(per_process)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for n in range(processes)
    ]
    exports: dict[str, tuple[Path, ...]] = {}
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        exports.update({label: tuple(map(Path, paths)) for label, paths in json.loads(out).items()})
    return exports


def test_many_processes_exporting_at_the_same_moment_get_distinct_complete_files(tmp_path):
    exports = run_exporters(tmp_path, processes=6, per_process=4)
    assert len(exports) == 24
    assert_each_export_is_intact(tmp_path, exports)


@pytest.fixture
def unwritable_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory this process cannot create files in: mode 0555, or for root a read-only tmpfs."""
    directory = tmp_path / "locked"
    directory.mkdir()
    if os.geteuid() != 0:
        directory.chmod(0o555)
        yield directory
        directory.chmod(0o755)
        return
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(directory)],
                          check=False, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"root ignores file modes, and a read-only tmpfs cannot be mounted here: {done.stderr.strip()}")
    yield directory
    subprocess.run(["umount", str(directory)], check=True)


def test_an_unwritable_directory_gives_a_one_line_export_error(unwritable_dir):
    history, snap = make_history()
    with pytest.raises(ExportError) as caught:
        export_snapshot(unwritable_dir, snap, history, "<svg/>")
    message = str(caught.value)
    assert message.startswith(f"cannot export to {unwritable_dir}/gpusight-") and message.endswith(
        ("Read-only file system", "Permission denied"))
    assert "\n" not in message
    assert list(unwritable_dir.iterdir()) == []


_NO_HARD_LINKS_C = r"""
#include <errno.h>
/* link() and linkat() fail the way they do on FAT: the file system cannot make hard links. */
int link(const char *from, const char *to) { (void)from; (void)to; errno = EPERM; return -1; }
int linkat(int from_dir, const char *from, int to_dir, const char *to, int flags) {
    (void)from_dir; (void)from; (void)to_dir; (void)to; (void)flags; errno = EPERM; return -1;
}
"""


@pytest.fixture(scope="module")
def no_hard_links_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment for a child process in which ``link()`` fails with EPERM, as on FAT."""
    compiler = os.environ.get("CC") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler to build the LD_PRELOAD library")
    build = tmp_path_factory.mktemp("nolink")
    (build / "nolink.c").write_text(_NO_HARD_LINKS_C)
    library = build / "libnolink.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(build / "nolink.c")], check=True)
    env = dict(os.environ, LD_PRELOAD=str(library))
    probe = subprocess.run([sys.executable, "-c", "import os, sys; os.link(sys.argv[1], sys.argv[1] + '.2')",
                            str(build / "nolink.c")], env=env, capture_output=True, text=True, check=False)
    assert "Operation not permitted" in probe.stderr, "the LD_PRELOAD library did not take effect"
    return env


def test_without_hard_links_names_are_claimed_exclusively(tmp_path, no_hard_links_env):
    kept = [tmp_path / (stem + ".json") for stem in stems_around_now(range(-1, 10))]
    for path in kept:
        path.write_text("keep me")
    exports = run_exporters(tmp_path, processes=3, per_process=3, env=no_hard_links_env)
    assert all(path.read_text() == "keep me" for path in kept)
    for path in kept:
        path.unlink()
    assert_each_export_is_intact(tmp_path, exports)
