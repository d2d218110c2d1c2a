"""Telling what a GPU process does (training, inference serving, a notebook) from evidence about it.

Command lines are chosen by whoever started the process, so they are matched by the programs they
run, never by a word found anywhere: the base name of ``argv[0]``, or for a Python interpreter the
script it runs (its base name, ``.py`` removed) or its ``-m`` module, plus the first argument that
is not an option (a subcommand such as ``serve``). ``python train.py --note vllm`` runs
``train.py``; it is not vLLM. :data:`SIGNS` is the one table of the programs recognised.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpusight.snapshot.model import WorkloadKind

_INTERPRETER = re.compile(r"(python|pypy)[0-9.]*[dmu]?")
"""Base names of Python interpreters, whose script or module is what actually runs."""

_OPTIONS_WITH_VALUE = frozenset({"-W", "-X", "-Q"})
"""Interpreter options followed by a separate value."""

TRAINING_ENV_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")
"""Environment variables that distributed training launchers set for each rank."""

NOTEBOOK_ENV_KEY = "JPY_PARENT_PID"
"""Environment variable Jupyter sets for the kernels it starts."""


@dataclass(frozen=True, slots=True)
class Command:
    """What a command line runs, as far as its program and first argument tell."""

    program: str
    """Base name of the program, or of the script a Python interpreter runs; ``""`` when none."""
    module: str | None = None
    """The module of ``python -m MODULE``; None otherwise."""
    subcommand: str | None = None
    """The first argument after the program or module that is not an option; None when there is none."""

    @property
    def shown(self) -> str:
        """How the command is named in evidence: ``train.py``, ``python -m ipykernel_launcher``."""
        return f"python -m {self.module}" if self.module is not None else self.program


@functools.lru_cache(maxsize=1024)
def command_of(cmdline: str | None, name: str | None) -> Command:
    """What a GPU process runs, from ``ProcessSample.cmdline`` and ``name``; remembered (shell-splitting is slow)."""
    return parse_command(split_cmdline(cmdline), name)


def split_cmdline(cmdline: str | None) -> tuple[str, ...]:
    """The arguments of a command line as ``ProcessSample.cmdline`` holds it (shell-quoted); () for None."""
    if not cmdline:
        return ()
    try:
        return tuple(shlex.split(cmdline))
    except ValueError:  # unbalanced quotes: a command line that was not quoted by us
        return tuple(cmdline.split())


def parse_command(argv: Sequence[str], name: str | None = None) -> Command:
    """What ``argv`` runs; with no arguments (unreadable), the process ``name`` (``comm``) stands for the program."""
    if not argv:
        return Command(program=name or "")
    program = os.path.basename(argv[0])
    rest = list(argv[1:])
    module: str | None = None
    if _INTERPRETER.fullmatch(program):
        index = 0
        while index < len(rest):
            arg = rest[index]
            if arg == "-m" and index + 1 < len(rest):
                module, rest = rest[index + 1], rest[index + 2 :]
                break
            if arg == "-c":
                rest = []
                break
            if arg == "-" or not arg.startswith("-"):
                program = os.path.basename(arg)
                rest = rest[index + 1 :]
                break
            index += 2 if arg in _OPTIONS_WITH_VALUE else 1
        else:
            rest = []
    subcommand = next((arg for arg in rest if not arg.startswith("-")), None)
    return Command(program=program, module=module, subcommand=subcommand)


@dataclass(frozen=True, slots=True)
class Sign:
    """A program that tells a workload's kind, matched by program name or module (and subcommand)."""

    label: str
    """How the evidence names it, e.g. ``"vllm serve"``."""
    kind: WorkloadKind
    """The kind it tells."""
    programs: frozenset[str] = frozenset()
    """Program (or script) base names that match."""
    modules: tuple[str, ...] = ()
    """``-m`` modules that match, themselves or any module below them
    (``vllm.entrypoints`` matches ``vllm.entrypoints.openai.api_server``)."""
    subcommand: str | None = None
    """When set, a program name matches only with this subcommand (``serve`` for ``vllm``); modules need none."""
    launcher: bool = False
    """True for a launcher that starts the ranks of a distributed job (its GPU children are one job)."""
    titles: tuple[str, ...] = ()
    """Prefixes of the process titles the program gives its own processes (``setproctitle`` replaces the
    command line): vLLM names its engine and workers ``VLLM::EngineCore``, ``VLLM::Worker_TP0``."""

    def matches(self, command: Command) -> bool:
        """True when ``command`` runs this program, or carries one of its process titles."""
        if any(command.program.startswith(title) for title in self.titles):
            return True
        if command.module is not None:
            return any(command.module == m or command.module.startswith(m + ".") for m in self.modules)
        if command.program.removesuffix(".py") not in self.programs:
            return False
        return self.subcommand is None or command.subcommand == self.subcommand


def _sign(label: str, kind: WorkloadKind, programs: tuple[str, ...] = (), modules: tuple[str, ...] = (),
          subcommand: str | None = None, launcher: bool = False, titles: tuple[str, ...] = ()) -> Sign:
    return Sign(label, kind, frozenset(programs), modules, subcommand, launcher, titles)


_I, _N, _T = WorkloadKind.INFERENCE, WorkloadKind.NOTEBOOK, WorkloadKind.TRAINING

SIGNS: tuple[Sign, ...] = (
    _sign("vllm serve", _I, ("vllm",), subcommand="serve"),
    _sign("vLLM server", _I, modules=("vllm.entrypoints",), titles=("VLLM::",)),
    _sign("text-generation-inference", _I, ("text-generation-launcher", "text-generation-server"),
          modules=("text_generation_server",)),
    _sign("tritonserver", _I, ("tritonserver",)),
    _sign("SGLang server", _I, modules=("sglang.launch_server",), titles=("sglang::",)),
    _sign("trtllm-serve", _I, ("trtllm-serve",)),
    _sign("lmdeploy serve", _I, ("lmdeploy",), modules=("lmdeploy.serve",), subcommand="serve"),
    _sign("torchserve", _I, ("torchserve", "model_service_worker")),
    _sign("ray serve", _I, ("ray",), subcommand="serve"),
    _sign("serve run", _I, ("serve",), subcommand="run"),
    _sign("llama-server", _I, ("llama-server",)),
    _sign("ollama", _I, ("ollama",)),
    _sign("Jupyter kernel", _N, ("ipykernel_launcher",), modules=("ipykernel_launcher", "ipykernel")),
    _sign("Jupyter", _N, ("jupyter-lab", "jupyter-notebook", "jupyter-server", "jupyter-kernel")),
    _sign("torchrun", _T, ("torchrun",), modules=("torch.distributed.run", "torch.distributed.launch"), launcher=True),
    _sign("deepspeed", _T, ("deepspeed",), modules=("deepspeed.launcher",), launcher=True),
    _sign("accelerate launch", _T, ("accelerate",), modules=("accelerate.commands.launch",), subcommand="launch",
          launcher=True),
    _sign("mpirun", _T, ("mpirun", "mpiexec", "orterun", "orted", "prted"), launcher=True),
    _sign("horovodrun", _T, ("horovodrun",), launcher=True),
    _sign("srun", _T, ("srun",), launcher=True),
    _sign("lightning run", _T, ("lightning", "fabric"), subcommand="run", launcher=True),
)
"""Every program that tells a kind: inference servers, notebook kernels and servers, training launchers."""

SESSION_PROGRAMS = frozenset({
    "bash", "sh", "zsh", "fish", "dash", "ksh", "tcsh", "csh", "tmux", "tmux: server", "screen", "SCREEN", "sshd",
    "systemd", "init", "login", "su", "sudo", "runuser", "setsid", "containerd-shim", "containerd-shim-runc-v2",
    "docker-init", "tini", "dumb-init", "jupyter", "jupyter-lab", "jupyter-notebook", "jupyter-server",
    "code-server", "node", "xargs", "parallel", "timeout", "nohup", "env", "cron", "supervisord",
})
"""Shells, terminals and session managers: processes started from one of them are not one job because of it."""


@functools.lru_cache(maxsize=1024)
def find_sign(command: Command) -> Sign | None:
    """The first sign in :data:`SIGNS` that ``command`` matches, or None."""
    return next((sign for sign in SIGNS if sign.matches(command)), None)


def is_session(name: str | None, command: Command) -> bool:
    """True when a process named ``name`` running ``command`` is a shell, terminal or session manager."""
    return (name is not None and name in SESSION_PROGRAMS) or command.program.removesuffix(".py") in SESSION_PROGRAMS


@dataclass(frozen=True, slots=True)
class Verdict:
    """A kind with the evidence for it, and how strong that evidence is."""

    kind: WorkloadKind
    """What the process does."""
    reason: str
    """Short evidence, e.g. ``"vllm serve (command line)"``."""
    strength: int
    """3 a command line, 2 the environment, 1 behaviour, 0 nothing."""
    launcher: bool = False
    """True when the kind comes from a launcher parent (evidence that also grouped the job)."""


UNDECIDED = Verdict(WorkloadKind.UNKNOWN, "nothing tells its kind", 0)
"""The verdict without evidence."""


def classify(
    command: Command,
    parent: Command | None = None,
    env: Mapping[str, str] | None = None,
    *,
    has_workers: bool = False,
    has_status: bool = False,
    listen_port: int | None = None,
) -> Verdict:
    """The kind of one GPU process, strongest evidence first.

    Its own command line, then its parent's (a launcher, a Jupyter server), then the whitelisted
    environment (``RANK``/``WORLD_SIZE``..., ``JPY_PARENT_PID``), then behaviour: DataLoader workers
    or a ``gpusight.torch`` status record tell training; a TCP port listened on without workers
    (``listen_port``) tells inference.
    """
    own = find_sign(command)
    if own is not None:
        return Verdict(own.kind, f"{own.label} (command line)", 3)
    above = find_sign(parent) if parent is not None else None
    if above is not None:
        return Verdict(above.kind, f"parent is {above.label}", 3, launcher=above.launcher)
    if env:
        present = [key for key in TRAINING_ENV_KEYS if key in env]
        if present:
            return Verdict(WorkloadKind.TRAINING, "/".join(present) + " set", 2)
        if NOTEBOOK_ENV_KEY in env:
            return Verdict(WorkloadKind.NOTEBOOK, f"{NOTEBOOK_ENV_KEY} set", 2)
    if has_workers:
        return Verdict(WorkloadKind.TRAINING, "has DataLoader workers", 1)
    if has_status:
        return Verdict(WorkloadKind.TRAINING, "gpusight.torch status record", 1)
    if listen_port is not None:
        return Verdict(WorkloadKind.INFERENCE, f"listens on TCP port {listen_port}, no DataLoader workers", 1)
    return UNDECIDED
