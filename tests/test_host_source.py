"""HostSource and its process-tree walk, tested against real processes."""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpusight.backends.host.dataloader_workers import attribute_workers
from gpusight.backends.host.proctree import ProcessTree, children_files_available
from gpusight.backends.host.source import PROCESS_REFRESH_SECONDS, HostSource
from gpusight.snapshot.model import ProcessRole, ProcessSample
from support.procs import (
    WORKER_NAME,
    cpu_hog,
    cpu_seconds,
    fake_trainer,
    proc_state,
    read_comm,
    run_python_as,
    shared_cpu,
    sleeper,
    start_ticks,
    uptime_ticks,
    wait_until,
)

OTHER_NAMESPACE = ("in another PID namespace (a host PID): run gpusight on the host, or with --pid=host / hostPID: true, "
                   "to see it")
"""The note on a GPU process NVML reports that this PID namespace does not hold (written out, not imported)."""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")

NOBODY = 65534


@pytest.fixture
def source():
    """A HostSource closed after the test."""
    host = HostSource()
    yield host
    host.close()


def gpu(pid: int, device: int = 0, **nvml) -> ProcessSample:
    """A GPU process as NVML would report it: only NVML fields set."""
    return ProcessSample(pid=pid, device_index=device, **nvml)


def rows_for(reading, pid: int) -> list[ProcessSample]:
    """Rows of ``reading`` with ``pid``."""
    return [row for row in reading.processes if row.pid == pid]


def workers_of(reading, trainer: int) -> list[ProcessSample]:
    """Worker rows attributed to ``trainer``."""
    return [
        row
        for row in reading.processes
        if row.role == ProcessRole.DATALOADER_WORKER and row.trainer_pid == trainer
    ]


def test_host_fields_are_plausible(source):
    reading = wait_until(
        lambda: (r := source.poll([])).host.cpu_percent_per_core and r, "a CPU clock tick"
    )
    host = reading.host
    assert reading.errors == ()
    assert host.hostname == socket.gethostname().split(".")[0]
    assert len(host.cpu_percent_per_core) == psutil.cpu_count()
    assert all(isinstance(v, float) and 0.0 <= v <= 100.0 for v in host.cpu_percent_per_core)
    assert isinstance(host.iowait_percent, float) and 0.0 <= host.iowait_percent <= 100.0
    assert host.load_average is not None and len(host.load_average) == 3
    assert all(isinstance(v, float) and v >= 0 for v in host.load_average)
    memory = psutil.virtual_memory()
    assert host.memory_total_bytes == memory.total
    assert 0 < host.memory_used_bytes <= host.memory_total_bytes
    swap = psutil.swap_memory()
    assert host.swap_total_bytes == swap.total
    assert 0 <= host.swap_used_bytes <= max(host.swap_total_bytes, 0)


def test_busy_core_shows_up_in_per_core_percent(source, tmp_path):
    with fake_trainer(tmp_path, workers=("busy",)) as trainer:
        busy = trainer.workers[0]
        start = cpu_seconds(busy)
        source.poll([])
        wait_until(lambda: cpu_seconds(busy) - start >= 0.3, "the busy worker to burn CPU")
        cores = source.poll([]).host.cpu_percent_per_core
    assert max(cores) > 20.0


def test_gpu_process_is_enriched_from_a_real_process(source):
    with sleeper("two words", "--flag=1") as proc:
        wait_until(lambda: psutil.Process(proc.pid).cmdline()[-1:] == ["--flag=1"], "exec")
        nvml = {"gpu_memory_bytes": 123 << 20, "sm_percent": 42.0, "gpu_process_type": "compute"}
        first = source.poll([gpu(proc.pid, **nvml)])
        second = source.poll([gpu(proc.pid, **nvml)])
        expected = psutil.Process(proc.pid)
        name, create_time = expected.name(), expected.create_time()
    assert first.errors == () and second.errors == ()
    (row,) = second.processes
    assert (row.pid, row.role, row.device_index) == (proc.pid, ProcessRole.GPU, 0)
    assert (row.gpu_memory_bytes, row.sm_percent, row.gpu_process_type) == (
        123 << 20,
        42.0,
        "compute",
    )
    assert row.cmdline == shlex.join(proc.args)
    assert "'two words'" in row.cmdline
    assert row.user == pwd.getpwuid(os.getuid()).pw_name
    assert row.ppid == os.getpid()
    assert row.name == name
    assert row.rss_bytes > 0
    assert row.create_time == pytest.approx(create_time)
    assert row.elapsed_seconds >= 0
    assert row.status in (psutil.STATUS_SLEEPING, psutil.STATUS_RUNNING)
    assert row.num_workers == 0
    assert row.note is None
    assert first.processes[0].cpu_percent is None  # first sight: no interval yet
    assert isinstance(row.cpu_percent, float) and row.cpu_percent >= 0.0
    assert first.processes[0].cpu_wait_percent is None
    assert isinstance(row.cpu_wait_percent, float) and row.cpu_wait_percent >= 0.0


def test_a_process_sharing_its_one_cpu_with_a_hog_runs_half_the_time_and_waits_the_other_half(source):
    cpu = shared_cpu()
    with cpu_hog(cpu), cpu_hog(cpu) as proc:
        source.poll([gpu(proc.pid)])
        start = cpu_seconds(proc.pid)
        wait_until(lambda: cpu_seconds(proc.pid) - start >= 0.5, "the pinned process to run half a second")
        (row,) = source.poll([gpu(proc.pid)]).processes
    assert row.cpu_percent is not None and row.cpu_wait_percent is not None, row
    assert row.cpu_percent >= 25.0 and row.cpu_wait_percent >= 25.0, row
    assert row.cpu_percent + row.cpu_wait_percent >= 80.0, row


def test_busy_worker_high_and_sleeping_worker_low(source, tmp_path):
    with fake_trainer(tmp_path, workers=("busy", "sleep")) as trainer:
        busy, idle = trainer.state["workers"]
        source.poll([gpu(trainer.pid)])
        start = cpu_seconds(busy)
        wait_until(lambda: cpu_seconds(busy) - start >= 0.3, "the busy worker to burn CPU")
        reading = source.poll([gpu(trainer.pid)])
    cpu = {row.pid: row.cpu_percent for row in workers_of(reading, trainer.pid)}
    assert cpu[busy] > 10.0
    assert cpu[idle] < 5.0


def test_workers_follow_their_trainer_in_pid_order(source, tmp_path):
    with fake_trainer(tmp_path, workers=("sleep", "sleep", "sleep")) as trainer, sleeper() as other:
        reading = source.poll(
            [gpu(other.pid, device=0), gpu(trainer.pid, device=1), gpu(trainer.pid, device=0)]
        )
    expected_gpu_order = sorted([(0, other.pid), (0, trainer.pid), (1, trainer.pid)])
    gpu_rows = [row for row in reading.processes if row.role == ProcessRole.GPU]
    assert [(row.device_index, row.pid) for row in gpu_rows] == expected_gpu_order
    first_trainer_row = reading.processes.index(rows_for(reading, trainer.pid)[0])
    following = reading.processes[first_trainer_row + 1 : first_trainer_row + 4]
    assert [row.pid for row in following] == trainer.workers
    for row in following:
        assert row.role == ProcessRole.DATALOADER_WORKER
        assert row.trainer_pid == trainer.pid
        assert row.device_index == 0
        assert row.ppid == trainer.pid
        assert row.name == WORKER_NAME
        assert row.user == pwd.getpwuid(os.getuid()).pw_name
        assert row.rss_bytes > 0
    assert len(reading.processes) == 3 + 3  # workers listed once, after the first trainer row
    assert [row.num_workers for row in rows_for(reading, trainer.pid)] == [3, 3]
    assert rows_for(reading, other.pid)[0].num_workers == 0


def test_process_exiting_between_polls_is_noted(source):
    with sleeper() as proc:
        pid = proc.pid
        assert source.poll([gpu(pid)]).processes[0].note is None
    reading = source.poll([gpu(pid, gpu_memory_bytes=1024)])
    (row,) = reading.processes
    assert reading.errors == ()
    assert (row.pid, row.gpu_memory_bytes, row.note) == (pid, 1024, "exited")
    assert row.user is None and row.cmdline is None and row.cpu_percent is None
    assert row.cpu_wait_percent is None  # its /proc/PID/schedstat is gone: unknown, never 0


def test_zombie_is_listed_with_what_is_known(source):
    proc = psutil.Popen([sys.executable, "-c", "pass"])
    try:
        wait_until(lambda: proc_state(proc.pid) == "Z", "the child to become a zombie")
        reading = source.poll([gpu(proc.pid)])
    finally:
        proc.wait()
    (row,) = reading.processes
    assert reading.errors == ()
    assert row.status == psutil.STATUS_ZOMBIE
    assert row.note == "zombie"
    assert row.ppid == os.getpid()


def test_pid_beyond_pid_max_is_not_in_this_namespace(source):
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    reading = source.poll([gpu(pid_max + 1, gpu_memory_bytes=4096)])
    (row,) = reading.processes
    assert reading.errors == ()
    assert row.note == OTHER_NAMESPACE
    assert row.gpu_memory_bytes == 4096
    assert row.user is None and row.cmdline is None and row.num_workers is None


def _force_next_pid(pid: int) -> bool:
    """Ask the kernel to hand out ``pid`` next; False when not allowed."""
    try:
        Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))
    except OSError:
        return False
    return True


class ManualClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_reused_pid_is_seen_as_a_new_process_at_the_next_refresh():
    clock = ManualClock()
    source = HostSource(clock=clock)
    with sleeper("first") as first:
        pid = first.pid
        source.poll([gpu(pid)])
        before = source.poll([gpu(pid)]).processes[0]
        # create_time has clock-tick resolution: let a few ticks pass before the PID is reused.
        started = start_ticks(pid)
        wait_until(lambda: uptime_ticks() > started + 5, "a few clock ticks")
    assert before.cpu_percent is not None
    second = None
    for _ in range(20):
        if not _force_next_pid(pid):
            pytest.skip("cannot choose the next PID (needs root)")
        candidate = psutil.Popen([sys.executable, "-c", "import time; time.sleep(600)", "second"])
        if candidate.pid == pid:
            second = candidate
            break
        candidate.kill()
        candidate.wait()
    if second is None:
        pytest.skip("another process took the PID first every time")
    try:
        wait_until(lambda: psutil.Process(pid).cmdline()[-1:] == ["second"], "exec")
        clock.now += PROCESS_REFRESH_SECONDS
        after = source.poll([gpu(pid)]).processes[0]
    finally:
        second.kill()
        second.wait()
        source.close()
    assert after.pid == before.pid
    assert after.create_time != before.create_time
    assert after.cmdline.endswith("second")
    assert after.cpu_percent is None  # a fresh process: no CPU interval carried over
    assert after.note is None


def test_recreated_workers_are_picked_up_on_the_next_poll(source, tmp_path):
    with fake_trainer(tmp_path) as trainer:
        old = [row.pid for row in workers_of(source.poll([gpu(trainer.pid)]), trainer.pid)]
        assert old == trainer.workers
        trainer.respawn()
        reading = source.poll([gpu(trainer.pid)])
    new = [row.pid for row in workers_of(reading, trainer.pid)]
    assert new == trainer.workers
    assert not set(new) & set(old)
    assert rows_for(reading, trainer.pid)[0].num_workers == 2


def test_forkserver_workers_belong_to_the_trainer(source, tmp_path):
    with fake_trainer(tmp_path, layout="forkserver", extras=("tracker",)) as trainer:
        forkserver = trainer.state["forkserver"]
        assert "multiprocessing.forkserver" in " ".join(psutil.Process(forkserver).cmdline())
        reading = source.poll([gpu(trainer.pid, device=2)])
    workers = workers_of(reading, trainer.pid)
    assert [row.pid for row in workers] == trainer.workers
    assert all(row.ppid == forkserver for row in workers)
    assert all(row.device_index == 2 for row in workers)
    listed = {row.pid for row in reading.processes}
    assert forkserver not in listed
    assert not listed & set(trainer.state["others"])
    assert len(reading.processes) == 1 + 2


def test_worker_goes_to_the_nearest_gpu_ancestor(source, tmp_path):
    with fake_trainer(tmp_path, layout="forkserver") as trainer:
        forkserver = trainer.state["forkserver"]
        reading = source.poll([gpu(trainer.pid), gpu(forkserver, device=1)])
    assert workers_of(reading, trainer.pid) == []
    assert [row.pid for row in workers_of(reading, forkserver)] == trainer.workers
    assert rows_for(reading, trainer.pid)[0].num_workers == 0
    assert rows_for(reading, forkserver)[0].num_workers == 2


def test_non_worker_descendants_are_ignored(source, tmp_path):
    with fake_trainer(tmp_path, extras=("tracker",), name="pt_compile") as trainer:
        reading = source.poll([gpu(trainer.pid)])
        tracker = trainer.state["others"][0]
        assert psutil.Process(tracker).ppid() == trainer.pid
    assert [row.pid for row in reading.processes] == [trainer.pid]
    assert reading.processes[0].num_workers == 0


def test_hostile_names_and_arguments_do_not_crash(source, tmp_path):
    with (
        fake_trainer(tmp_path, workers=("sleep",)) as trainer,
        sleeper(b"\xff\xfebad", "line\nbreak \x1b[31m") as odd,
    ):
        reading = source.poll([gpu(trainer.pid), gpu(odd.pid)])
    (row,) = rows_for(reading, odd.pid)
    assert "\ufffd\ufffdbad" in row.cmdline
    assert "\x1b[31m" in row.cmdline  # stored raw; escaping is the UI's job
    json.dumps(row.cmdline, ensure_ascii=False).encode("utf-8")


def test_undecodable_process_name_does_not_crash(source, tmp_path):
    bad_name = b"bad\xffname".decode("utf-8", "surrogateescape")
    with fake_trainer(tmp_path, workers=("sleep",), name=bad_name) as trainer:
        worker = trainer.state["workers"][0]
        wait_until(lambda: read_comm(worker) == "bad\ufffdname", "the worker to rename")
        reading = source.poll([gpu(worker)])
    assert reading.processes[0].name == "bad\ufffdname"
    reading.processes[0].name.encode("utf-8")


@pytest.mark.skipif(not children_files_available(), reason="no /proc/PID/task/TID/children")
def test_fallback_scan_finds_the_same_tree(tmp_path):
    with fake_trainer(tmp_path, layout="forkserver", extras=("tracker",)) as trainer:
        walked = ProcessTree(use_children_files=True).descendants([trainer.pid])
        scanned = ProcessTree(use_children_files=False).descendants([trainer.pid])
    assert walked == scanned
    expected = {*trainer.workers, trainer.state["forkserver"], *trainer.state["others"]}
    assert set(walked) == expected
    assert attribute_workers({trainer.pid}, scanned) == {trainer.pid: trainer.workers}


def test_fallback_scan_is_reused_until_it_is_old(tmp_path):
    tree = ProcessTree(use_children_files=False, rescan_seconds=3600)
    with fake_trainer(tmp_path) as trainer:
        old = set(tree.descendants([trainer.pid]))
        trainer.respawn()
        assert set(tree.descendants([trainer.pid])) == old  # cached scan
        tree.rescan_seconds = 0
        assert set(tree.descendants([trainer.pid])) == set(trainer.workers)


_MONITOR = """
import json, sys, dataclasses
from gpusight.backends.host.source import PROCESS_REFRESH_SECONDS, HostSource
from gpusight.snapshot.model import ProcessSample
source = HostSource()
drop()
reading = source.poll([ProcessSample(pid=int(sys.argv[1]), device_index=0, gpu_memory_bytes=7)])
print(json.dumps([dataclasses.asdict(row) for row in reading.processes] + [list(reading.errors)]))
"""


def _poll_as_nobody(pid: int, proc_options: str | None = None) -> tuple[list[dict], list]:
    """Poll ``pid`` from a HostSource running as user nobody; return its rows and errors."""
    done = run_python_as(NOBODY, NOBODY, _MONITOR, [str(pid)], proc_options)
    if proc_options is not None and done.returncode != 0 and "mount" in done.stderr:
        pytest.skip(f"cannot remount /proc with {proc_options}: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    *rows, errors = json.loads(done.stdout)
    return rows, errors


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch users")


@root_only
def test_other_users_trainer_is_read_as_far_as_allowed(tmp_path):
    with fake_trainer(tmp_path) as trainer:
        rows, errors = _poll_as_nobody(trainer.pid)
    assert errors == []
    assert [row["pid"] for row in rows] == [trainer.pid, *trainer.workers]
    assert rows[0]["user"] == "root"
    assert rows[0]["num_workers"] == 2
    for row in rows:
        # Each field is either read or, when denied, None with the reason noted.
        assert row["note"] in (None, "access denied")
        if row["note"] is None:
            assert row["cmdline"] and row["rss_bytes"] > 0
    assert all(row["trainer_pid"] == trainer.pid for row in rows[1:])


@root_only
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare")
def test_hidden_process_is_listed_with_access_denied(tmp_path):
    with fake_trainer(tmp_path) as trainer:
        rows, errors = _poll_as_nobody(trainer.pid, proc_options="hidepid=1")
    assert errors == []
    (row,) = rows
    assert row["pid"] == trainer.pid and row["gpu_memory_bytes"] == 7
    assert row["note"] == "access denied"
    assert row["cmdline"] is None and row["rss_bytes"] is None
    assert row["user"] == "root"  # the owner of /proc/PID is still visible
    assert row["num_workers"] is None


def test_process_details_are_reread_once_a_refresh_period_not_every_poll():
    clock = ManualClock()
    source = HostSource(clock=clock)
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        source.poll([gpu(burner.pid)])  # primes the CPU reading
        time.sleep(0.2)
        first = rows_for(source.poll([gpu(burner.pid)]), burner.pid)[0]
        time.sleep(0.3)
        clock.now += PROCESS_REFRESH_SECONDS / 2
        cached = rows_for(source.poll([gpu(burner.pid, gpu_memory_bytes=5)]), burner.pid)[0]
        clock.now += PROCESS_REFRESH_SECONDS / 2
        fresh = rows_for(source.poll([gpu(burner.pid)]), burner.pid)[0]
    finally:
        burner.kill()
        burner.wait()
        source.close()
    assert first.cpu_percent is not None and first.cpu_percent > 10
    # Within the period the psutil details are the last ones read, NVML's figures are this poll's.
    assert (cached.cpu_percent, cached.elapsed_seconds) == (first.cpu_percent, first.elapsed_seconds)
    assert cached.gpu_memory_bytes == 5
    assert fresh.elapsed_seconds > first.elapsed_seconds + 0.25
    assert fresh.cpu_percent != first.cpu_percent


def test_a_row_whose_nvml_side_did_not_change_is_the_last_poll_row_again():
    """NVML's process rows change once a second; a row of sixty fields is not rebuilt for each unchanged process."""
    clock = ManualClock()
    source = HostSource(clock=clock)
    with sleeper("one") as one, sleeper("two") as two:
        source.poll([gpu(one.pid), gpu(two.pid)])  # primes the CPU readings
        same, moved = gpu(one.pid, gpu_memory_bytes=1), gpu(two.pid, gpu_memory_bytes=2)
        before = source.poll([same, moved])
        clock.now += PROCESS_REFRESH_SECONDS / 4
        after = source.poll([same, gpu(two.pid, gpu_memory_bytes=3)])
    source.close()
    assert rows_for(after, one.pid)[0] is rows_for(before, one.pid)[0]
    assert rows_for(after, two.pid)[0].gpu_memory_bytes == 3
    assert rows_for(after, two.pid)[0] == dataclasses.replace(rows_for(before, two.pid)[0], gpu_memory_bytes=3)


def test_a_new_gpu_process_is_read_at_once_within_the_refresh_period():
    clock = ManualClock()
    source = HostSource(clock=clock)
    with sleeper("one") as one, sleeper("two") as two:
        source.poll([gpu(one.pid)])
        both = source.poll([gpu(one.pid), gpu(two.pid)])
        primed = source.poll([gpu(one.pid), gpu(two.pid)])
    source.close()
    assert rows_for(both, two.pid)[0].cmdline.endswith("two")
    # Its first CPU reading needs a second look, which is taken at the next poll, not a period later.
    assert rows_for(both, two.pid)[0].cpu_percent is None
    assert rows_for(primed, two.pid)[0].cpu_percent is not None
