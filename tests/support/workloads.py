"""Real processes shaped like the workloads of a shared GPU server, for job-grouping and advice tests.

Each builder starts real Python processes laid out as the real thing is (a launcher named
``torchrun`` with ranks carrying the distributed environment, a console script named ``vllm``
listening on a loopback port, a Jupyter-like server with an ``ipykernel_launcher`` kernel, one
user's sweep from shells, a ``multiprocessing`` spawn job), yields the pids a test puts on fake
GPUs, and kills the whole tree afterwards. Every process stops by itself when its parent goes.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from support.procs import kill_tree, read_comm, wait_until

SECRET_ENV = {"HF_TOKEN": "hf_secret_never_shown", "AWS_SECRET_ACCESS_KEY": "aws_secret_never_shown"}
"""Secrets put into every rank's environment: they must never appear in gpusight's output."""

FOLLOW_PARENT = """
import os, sys, time
parent = os.getppid()
while parent != 1 and os.getppid() == parent:
    time.sleep(0.05)
"""
"""A process that does nothing until its parent is gone (already gone when it starts as an orphan)."""

_SET_NAME = """
import ctypes
def set_name(name):
    ctypes.CDLL(None, use_errno=True).prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME
"""

_LAUNCHER = _SET_NAME + """
import json, os, subprocess, sys, time
args = sys.argv[1:]
nproc = int(args[args.index("--nproc-per-node") + 1])
script = args[args.index("--nproc-per-node") + 2]
state, port, run_id, extra = json.loads(os.environ.pop("WORKLOADS_LAUNCH"))
children = []
for rank in range(nproc):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
               WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc), TORCHELASTIC_RUN_ID=run_id)
    env.update(extra)
    children.append(subprocess.Popen([sys.executable, "-u", script, "--rank-hint", str(rank)], env=env).pid)
tmp = state + ".tmp"
with open(tmp, "w") as handle:
    json.dump(children, handle)
os.replace(tmp, state)
sys.stdin.read()
"""
"""A torchrun-like launcher: starts N ranks of a script with the distributed environment, then waits."""

_SERVER = """
import os, socket, sys, time
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
state = os.environ.pop("WORKLOADS_STATE")
with open(state + ".tmp", "w") as handle:
    handle.write(str([os.getpid(), server.getsockname()[1]]))
os.replace(state + ".tmp", state)
sys.stdin.read()
"""
"""A server listening on a loopback port (its pid and port written to the state file) until its stdin closes."""

_JUPYTER = _SET_NAME + """
import json, os, subprocess, sys
set_name("jupyter-lab")
state, kernel_path = json.loads(os.environ.pop("WORKLOADS_LAUNCH"))
env = dict(os.environ, JPY_PARENT_PID=str(os.getpid()), PYTHONPATH=kernel_path)
kernel = subprocess.Popen([sys.executable, "-m", "ipykernel_launcher", "-f", "kernel-1234.json"], env=env)
with open(state + ".tmp", "w") as handle:
    handle.write(str(kernel.pid))
os.replace(state + ".tmp", state)
sys.stdin.read()
"""
"""A Jupyter-server-like parent (named ``jupyter-lab``) that starts one kernel."""

_SPAWN = """
import json, multiprocessing, os, sys, time

def rank(index):
    parent = os.getppid()
    while parent != 1 and os.getppid() == parent:
        time.sleep(0.05)

if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    children = [context.Process(target=rank, args=(i,)) for i in range(int(sys.argv[1]))]
    for child in children:
        child.start()
    state = sys.argv[2]
    with open(state + ".tmp", "w") as handle:
        json.dump([c.pid for c in children], handle)
    os.replace(state + ".tmp", state)
    sys.stdin.read()
    for child in children:
        child.kill()
"""
"""``python train.py N STATE``: a parent with N ``multiprocessing`` spawn children (as ``torch.multiprocessing.spawn``)."""


def _state(tmp_path: Path, what: str) -> Path:
    return tmp_path / f"{what}-{time.monotonic_ns()}.json"


def _read_state(path: Path, what: str) -> object:
    def ready() -> object:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    return wait_until(ready, what)


def _script(tmp_path: Path, relative: str, source: str) -> Path:
    path = tmp_path / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


@contextmanager
def _running(argv: list[str], env: Mapping[str, str] | None = None) -> Iterator[subprocess.Popen]:
    """Run ``argv`` with a stdin pipe; closing it ends the process (its children follow), else its tree is killed."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, env=None if env is None else dict(env))
    try:
        yield proc
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            proc.wait()


@dataclass
class Launched:
    """A launcher and the ranks it started, in rank order."""

    launcher: int
    """The launcher's pid."""
    ranks: list[int]
    """Pid of rank 0, 1, ..."""
    master_port: int
    """The ``MASTER_PORT`` every rank carries."""
    run_id: str
    """The ``TORCHELASTIC_RUN_ID`` every rank carries."""
    argv: list[str] = field(default_factory=list)
    """The launcher's command line."""


@contextmanager
def torchrun_job(tmp_path: Path, nproc: int = 8, name: str = "torchrun", port: int = 29500,
                 extra_env: Mapping[str, str] = SECRET_ENV, rank_source: str = FOLLOW_PARENT) -> Iterator[Launched]:
    """``python <tmp>/bin/<name> --nproc-per-node N train.py``: a launcher whose N ranks carry MASTER_ADDR/PORT,
    RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, TORCHELASTIC_RUN_ID (and ``extra_env``, secrets by default, which
    may replace them: ``MASTER_ADDR`` is 127.0.0.1 unless it says otherwise).

    Each rank runs ``rank_source`` as ``train.py`` (by default it idles until the launcher is gone; a
    rank script of its own should end once its parent is gone too)."""
    launcher = _script(tmp_path, f"bin/{name}", _LAUNCHER)
    train = _script(tmp_path, "train.py", rank_source)
    state = _state(tmp_path, "launch")
    run_id = uuid.uuid4().hex[:12]
    env = dict(os.environ, WORKLOADS_LAUNCH=json.dumps([str(state), port, run_id, dict(extra_env)]))
    argv = [sys.executable, str(launcher), "--nproc-per-node", str(nproc), str(train)]
    with _running(argv, env) as proc:
        ranks = _read_state(state, f"{name} to start {nproc} ranks")
        assert isinstance(ranks, list)
        yield Launched(proc.pid, ranks, port, run_id, argv)


@contextmanager
def server(tmp_path: Path, argv_tail: list[str], script: str = "bin/vllm") -> Iterator[tuple[int, int]]:
    """``python <tmp>/<script> <argv_tail>`` started from a shell, listening on a loopback port; yields (pid, port).

    ``server(tmp, ["serve", "some/model"])`` is a vLLM-like server; ``script="app.py"`` an unnamed one.
    """
    path = _script(tmp_path, script, _SERVER)
    state = _state(tmp_path, "server")
    command = shlex.join([sys.executable, str(path), *argv_tail]) + "; true"
    with _running(["bash", "-c", command], dict(os.environ, WORKLOADS_STATE=str(state))):
        found = _read_state(state, "the server to listen")
        assert isinstance(found, list)
        yield found[0], found[1]


@contextmanager
def notebook_kernel(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """A ``jupyter-lab``-named server that started ``python -m ipykernel_launcher -f ...``; yields (server, kernel)."""
    modules = tmp_path / "kernel-modules"
    _script(modules, "ipykernel_launcher.py", FOLLOW_PARENT)
    path = _script(tmp_path, "bin/jupyter-lab", _JUPYTER)
    state = _state(tmp_path, "jupyter")
    env = dict(os.environ, WORKLOADS_LAUNCH=json.dumps([str(state), str(modules)]))
    with _running([sys.executable, str(path), "--no-browser"], env) as proc:
        kernel = _read_state(state, "the kernel to start")
        assert isinstance(kernel, int)
        wait_until(lambda: read_comm(proc.pid) == "jupyter-lab", "the server to name itself")
        yield proc.pid, kernel


@contextmanager
def spawn_job(tmp_path: Path, children: int = 2) -> Iterator[tuple[int, list[int]]]:
    """``python train.py N``, whose N ``multiprocessing`` spawn children are the ranks; yields (parent, children)."""
    path = _script(tmp_path, "spawn/train.py", _SPAWN)
    state = _state(tmp_path, "spawn")
    with _running([sys.executable, str(path), str(children), str(state)]) as proc:
        pids = _read_state(state, "spawn children")
        assert isinstance(pids, list)
        yield proc.pid, pids


@dataclass
class Sweep:
    """One user's sweep: runs from separate shells and runs started with ``&`` by one shell loop."""

    terminals: list[int]
    """Runs each started from its own ``bash -c`` (as from two terminals)."""
    loop: list[int]
    """Runs started with ``&`` by one bash loop."""


@contextmanager
def sweep(tmp_path: Path) -> Iterator[Sweep]:
    """Two ``python run.py --lr X`` runs from two ``bash -c`` parents, two more from one bash ``for ... &`` loop."""
    run = _script(tmp_path, "sweep/run.py", FOLLOW_PARENT)
    python = sys.executable
    shells = [
        ["bash", "-c", f"{python} {run} --lr 1e-3; true"],
        ["bash", "-c", f"{python} {run} --lr 3e-4; true"],
        ["bash", "-c", f"for lr in 1e-4 3e-5; do {python} {run} --lr $lr & done; wait"],
    ]
    procs = [subprocess.Popen(argv) for argv in shells]
    try:
        def children(shell: subprocess.Popen, count: int) -> list[int] | None:
            found = [c.pid for c in psutil.Process(shell.pid).children() if "run.py" in " ".join(c.cmdline())]
            return sorted(found) if len(found) == count else None

        terminals = [wait_until(lambda p=p: children(p, 1), "a sweep run")[0] for p in procs[:2]]
        loop = wait_until(lambda: children(procs[2], 2), "the sweep loop's runs")
        yield Sweep(terminals, loop)
    finally:
        for proc in procs:  # the runs follow their shell
            proc.kill()
            proc.wait()
