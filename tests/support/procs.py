"""Helpers that start real processes for the host-source tests, wait for them, and clean up.

The fake trainer is a real Python process whose children name themselves ``pt_data_worker``
the way torch does it (``prctl(PR_SET_NAME)`` on the main thread, which is what
``torch._C._set_thread_name`` ends up doing on Linux). It can lay its workers out as fork/spawn
do (children of the trainer) or as forkserver does (children of an intermediate process whose
command line names ``multiprocessing.forkserver``), can add a resource-tracker-like child that is
not a worker, and re-creates its workers on request, as a DataLoader does every epoch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import psutil

WORKER_NAME = "pt_data_worker"
"""The name torch gives DataLoader workers (kept here so tests do not trust the code under test)."""

_T = TypeVar("_T")

_TRAINER_SOURCE = r"""
import ctypes, json, os, signal, subprocess, sys, time

FORKSERVER_MARK = "multiprocessing.forkserver"

def set_name(name):
    ctypes.CDLL(None, use_errno=True).prctl(15, name, 0, 0, 0)  # PR_SET_NAME

def watch_parent(parent, busy):
    count = 0
    while True:
        if busy:
            count += 1
            if count % 200000 == 0 and os.getppid() != parent:
                os._exit(0)
        else:
            if os.getppid() != parent:
                os._exit(0)
            time.sleep(0.05)

def fork_workers(kinds, name):
    pids = []
    for kind in kinds:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            parent = os.getppid()
            set_name(name)
            os.write(write_end, b"x")
            os.close(write_end)
            watch_parent(parent, kind == "busy")
        os.close(write_end)
        os.read(read_end, 1)  # the child has renamed itself
        os.close(read_end)
        pids.append(pid)
    return pids

def stop(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

def forkserver_main(config):
    # Stands in for 'python -c "from multiprocessing.forkserver import main; ..."'.
    pids = fork_workers(config["workers"], config["name"].encode("utf-8", "surrogateescape"))
    print(json.dumps(pids), flush=True)
    sys.stdin.read()  # until the trainer closes the pipe or dies
    stop(pids)

def trainer_main(config):
    name = config["name"].encode("utf-8", "surrogateescape")
    others = []
    for extra in config["extras"]:
        if extra == "tracker":
            tracker = subprocess.Popen(
                [sys.executable, "-c",
                 "import os, sys, time  # multiprocessing.resource_tracker\n"
                 "parent = os.getppid()\n"
                 "while os.getppid() == parent: time.sleep(0.05)\n"],
            )
            others.append(tracker)
    generation = 0
    while True:
        forkserver = None
        if config["layout"] == "forkserver":
            forkserver = subprocess.Popen(
                [sys.executable, __file__, FORKSERVER_MARK, json.dumps(config)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )
            workers = json.loads(forkserver.stdout.readline())
        else:
            workers = fork_workers(config["workers"], name)
        state = {
            "trainer": os.getpid(),
            "workers": workers,
            "forkserver": forkserver.pid if forkserver else None,
            "others": [p.pid for p in others],
            "generation": generation,
        }
        tmp = config["state"] + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(state, handle)
        os.replace(tmp, config["state"])
        command = sys.stdin.readline().strip()
        if forkserver is not None:
            forkserver.stdin.close()
            forkserver.wait()
        else:
            stop(workers)
        if command != "respawn":
            break
        generation += 1
    for proc in others:
        proc.kill()
        proc.wait()

if __name__ == "__main__":
    if sys.argv[1] == FORKSERVER_MARK:
        forkserver_main(json.loads(sys.argv[2]))
    else:
        trainer_main(json.loads(sys.argv[1]))
"""


def wait_until(predicate: Callable[[], _T], what: str, timeout: float = 15.0) -> _T:
    """Poll ``predicate`` until it returns something truthy and return that; fail after ``timeout``.

    This is a deadline for a process to come up, not a timing assertion.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def read_comm(pid: int) -> str | None:
    """``/proc/PID/comm`` of ``pid``, or None when it cannot be read."""
    try:
        return Path(f"/proc/{pid}/comm").read_bytes().rstrip(b"\n").decode("utf-8", "replace")
    except OSError:
        return None


def proc_state(pid: int) -> str | None:
    """The one-letter state from ``/proc/PID/stat`` (``R``, ``S``, ``Z`` ...), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2 :].split()[0].decode()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds used so far by ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_bytes()
    rest = fields[fields.rindex(b")") + 2 :].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def start_ticks(pid: int) -> int:
    """When ``pid`` started, in clock ticks since boot (the resolution of ``create_time``)."""
    fields = Path(f"/proc/{pid}/stat").read_bytes()
    return int(fields[fields.rindex(b")") + 2 :].split()[19])


def uptime_ticks() -> int:
    """Clock ticks since boot."""
    return int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK"))


def kill_tree(pid: int) -> None:
    """Kill ``pid`` and every process below it, and reap the ones that are our children."""
    try:
        root = psutil.Process(pid)
        victims = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return
    for victim in victims:
        try:
            victim.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(victims, timeout=5)


@contextmanager
def sleeper(*extra_args: str | bytes) -> Iterator[subprocess.Popen]:
    """Start a Python process that sleeps until killed, with ``extra_args`` on its command line."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", *extra_args])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def shared_cpu() -> int:
    """One CPU this test may run on: the one the CPU-hog tests pin their processes to."""
    return min(os.sched_getaffinity(0))


@contextmanager
def cpu_hog(cpu: int) -> Iterator[subprocess.Popen]:
    """Start a Python process that burns CPU ``cpu``, pinned to it alone with ``os.sched_setaffinity``, until killed."""
    source = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nprint('pinned', flush=True)\nwhile True:\n    pass\n"
    proc = subprocess.Popen([sys.executable, "-c", source], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "pinned\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()


class FakeTrainer:
    """A running fake trainer: its pid, its workers' pids and control over re-creating them."""

    def __init__(self, proc: subprocess.Popen, state_path: Path, name: str) -> None:
        """Wrap a started trainer whose workers call themselves ``name`` and whose state is in ``state_path``."""
        self.proc = proc
        """The trainer process."""
        self.state_path = state_path
        """JSON file the trainer rewrites whenever its workers change."""
        self.state: dict = {}
        self.comm = name.encode("utf-8", "surrogateescape")[:15].decode("utf-8", "replace")
        """The workers' name as ``/proc/PID/comm`` shows it (cut to 15 bytes, decoded leniently)."""
        """The latest state read: trainer, workers, forkserver, others, generation."""

    @property
    def pid(self) -> int:
        """The trainer's pid."""
        return self.proc.pid

    @property
    def workers(self) -> list[int]:
        """Pids of the current workers, sorted."""
        return sorted(self.state["workers"])

    def wait_ready(self, generation: int = 0) -> dict:
        """Wait until workers of ``generation`` exist and carry the worker name; return the state."""

        def ready() -> dict | None:
            try:
                state = json.loads(self.state_path.read_text())
            except (OSError, ValueError):
                return None
            if state["generation"] != generation:
                return None
            if any(read_comm(pid) != self.comm for pid in state["workers"]):
                return None
            return state

        self.state = wait_until(ready, f"fake trainer generation {generation}")
        return self.state

    def respawn(self) -> dict:
        """Replace all workers with new ones (as a DataLoader does each epoch); return the state."""
        old = self.workers
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"respawn\n")
        self.proc.stdin.flush()
        state = self.wait_ready(self.state["generation"] + 1)
        wait_until(lambda: all(proc_state(pid) is None for pid in old), "old workers to go")
        return state


@contextmanager
def fake_trainer(
    tmp_path: Path,
    workers: Sequence[str] = ("sleep", "sleep"),
    layout: str = "direct",
    extras: Sequence[str] = (),
    name: str = WORKER_NAME,
) -> Iterator[FakeTrainer]:
    """Run a fake trainer and yield it once its workers are up; kill the whole tree afterwards.

    ``workers`` lists ``"busy"`` (burns CPU) or ``"sleep"`` per worker; ``layout`` is
    ``"direct"`` (fork/spawn) or ``"forkserver"``; ``extras`` may hold ``"tracker"`` for a
    resource-tracker-like child; ``name`` is the name the workers give themselves.
    """
    state_path = tmp_path / f"trainer-{time.monotonic_ns()}.json"
    config = {
        "workers": list(workers),
        "layout": layout,
        "extras": list(extras),
        "state": str(state_path),
        "name": name,
    }
    script = tmp_path / "fake_trainer.py"
    script.write_text(_TRAINER_SOURCE)
    proc = subprocess.Popen(
        [sys.executable, str(script), json.dumps(config)], stdin=subprocess.PIPE
    )
    trainer = FakeTrainer(proc, state_path, name)
    try:
        trainer.wait_ready()
        yield trainer
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # the trainer then stops and reaps its whole tree
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            proc.wait()


def run_python_as(
    uid: int, gid: int, script: str, args: Sequence[str], proc_options: str | None = None
) -> subprocess.CompletedProcess:
    """Run ``script`` in a new Python that switches to ``uid``/``gid`` once it has imported.

    The script's own code must do ``drop()`` (defined for it) after its imports: the
    interpreter may live in a directory the target user cannot read. With ``proc_options``
    (e.g. ``"hidepid=1"``) it runs in a private mount namespace with /proc remounted so; that
    needs root and ``unshare``.
    """
    prelude = f"import os\ndef drop():\n    os.setgroups([]); os.setgid({gid}); os.setuid({uid})\n"
    command = [sys.executable, "-c", prelude + script, *args]
    if proc_options is not None:
        command = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            f'mount -t proc -o {proc_options} proc /proc && exec "$@"',
            "sh",
            *command,
        ]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
