"""Soak run: the real ``gpusight`` TUI for a long time against the fake NVML while GPU processes churn.

Usage (from the repository root; needs a C compiler for the fake libnvidia-ml.so.1)::

    python benchmarks/soak.py                       # 10 minutes at --interval 0.1, 4 fake GPUs
    python benchmarks/soak.py --duration 30 --warmup 10 --checkpoint 5 --json soak.json

What it does
- builds the fake ``libnvidia-ml.so.1`` (``tests/fakenvml``) and starts ``python -m gpusight`` in a
  pseudo-terminal of ``--size`` columns x rows, with the fake found through ``LD_LIBRARY_PATH``;
  a thread drains the terminal output as a real terminal would;
- every ``--churn`` seconds replaces the oldest of ``--procs`` real ``sleep`` processes with a new
  one and rewrites the scenario so NVML reports the current set (with per-process utilization
  samples), every 10th churn re-creates the DataLoader workers of a fake trainer (real processes
  named ``pt_data_worker``), and every ``--lose-every`` seconds GPU 1 falls off the bus for 10 s;
- every ``--checkpoint`` seconds reads the gpusight process's open file descriptors, threads, RSS and
  CPU time (five quick reads, keeping the minimum, so a /proc file open in the middle of a poll is
  not counted as growth);
- at the end presses ``q`` and checks that gpusight exits.

It prints one line per checkpoint and a verdict, and exits with status 1 when, between the first
checkpoint after ``--warmup`` and the last one, descriptors or threads grew at all or RSS grew by
more than ``--rss-slack-mib``, or when gpusight died or did not quit. ``--json`` also writes every
checkpoint and the verdict as JSON (the CI test ``tests/test_reliability_soak.py`` runs a short
version and reads it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
"""Repository root."""

sys.path.insert(0, str(ROOT / "tests"))

from support.fake_nvml import FakeGpu, FakeScenario, build_fake_nvml, fake_nvml_env
from support.procs import fake_trainer
from support.terminal import PtyTerminal

MIB = 1 << 20
"""Bytes in a MiB."""

LOST_SECONDS = 10.0
"""How long GPU 1 stays lost each time it falls off the bus."""


@dataclass
class Checkpoint:
    """Resource use of the gpusight process at one moment."""

    elapsed_s: float
    """Seconds since gpusight started."""
    fds: int
    """Open file descriptors (minimum of five reads)."""
    threads: int
    """Threads (minimum of five reads)."""
    rss_mib: float
    """Resident memory in MiB (minimum of five reads)."""
    cpu_s: float
    """User plus system CPU seconds used so far."""
    churned: int
    """GPU processes replaced so far."""
    output_kib: float
    """Terminal output read so far, KiB."""


@dataclass
class Verdict:
    """Growth between the first checkpoint after the warm-up and the last one."""

    fd_growth: int
    """Descriptors gained."""
    thread_growth: int
    """Threads gained."""
    rss_growth_mib: float
    """Resident memory gained, MiB."""
    cpu_percent: float
    """Mean CPU use of gpusight over the measured span, percent of one core."""
    exit_status: int | None
    """gpusight's exit status after ``q`` (None if it had to be killed)."""
    ok: bool
    """True when nothing grew beyond the allowances and gpusight quit normally."""


class Churn:
    """The fake machine: GPUs in a scenario file and real processes that come and go on them."""

    def __init__(self, scenario_path: Path, gpus: int, procs: int) -> None:
        self.scenario_path = scenario_path
        """Scenario file the fake NVML re-reads whenever it changes."""
        self.gpus = gpus
        """Number of fake GPUs."""
        self.children: list[subprocess.Popen] = [self._spawn() for _ in range(procs)]
        """The churning GPU processes, oldest first."""
        self.trainer_pid: int | None = None
        """PID of the fake trainer, listed as a GPU process on GPU 0."""
        self.churned = 0
        """Processes replaced so far."""
        self.lost = False
        """True while GPU 1 is lost."""
        self._stamp = 1

    @staticmethod
    def _spawn() -> subprocess.Popen:
        return subprocess.Popen(["sleep", "100000"], stdin=subprocess.DEVNULL)

    def step(self) -> None:
        """Replace the oldest process with a new one and publish the new set."""
        old = self.children.pop(0)
        old.kill()
        old.wait()
        self.children.append(self._spawn())
        self.churned += 1
        self.publish()

    def publish(self) -> None:
        """Write the scenario for the current processes and lost state."""
        self._stamp += 250_000
        gpus = [FakeGpu(pcie_tx_kbps=1000, pcie_rx_kbps=2000, util_gpu=40 + i) for i in range(self.gpus)]
        pids = [child.pid for child in self.children]
        if self.trainer_pid is not None:
            pids.insert(0, self.trainer_pid)
        for n, pid in enumerate(pids):
            gpu = gpus[n % self.gpus]
            gpu.compute_processes.append((pid, (n + 1) << 28))
            gpu.process_samples.append((pid, 10 + n % 80, 5, self._stamp))
        if self.gpus > 1:
            gpus[1].lost = self.lost
        FakeScenario(gpus=gpus).write(self.scenario_path)

    def close(self) -> None:
        """Kill every churning process."""
        for child in self.children:
            child.kill()
            child.wait()


def measure(pid: int, started: float, churn: Churn, terminal: PtyTerminal) -> Checkpoint:
    """Read the gpusight process's resources (minimum of five reads 50 ms apart)."""
    process = psutil.Process(pid)
    fds, threads, rss = [], [], []
    for _ in range(5):
        with process.oneshot():
            fds.append(process.num_fds())
            threads.append(process.num_threads())
            rss.append(process.memory_info().rss)
        time.sleep(0.05)
    times = process.cpu_times()
    return Checkpoint(
        elapsed_s=round(time.monotonic() - started, 1),
        fds=min(fds),
        threads=min(threads),
        rss_mib=round(min(rss) / MIB, 2),
        cpu_s=round(times.user + times.system, 2),
        churned=churn.churned,
        output_kib=round(terminal.received / 1024, 1),
    )


def judge(points: list[Checkpoint], warmup: float, rss_slack_mib: float, exit_status: int | None) -> Verdict:
    """Compare the first checkpoint at or after ``warmup`` with the last one."""
    after = [p for p in points if p.elapsed_s >= warmup] or points[-1:]
    first, last = after[0], points[-1]
    span = max(1e-9, last.elapsed_s - first.elapsed_s)
    verdict = Verdict(
        fd_growth=last.fds - first.fds,
        thread_growth=last.threads - first.threads,
        rss_growth_mib=round(last.rss_mib - first.rss_mib, 2),
        cpu_percent=round(100 * (last.cpu_s - first.cpu_s) / span, 1),
        exit_status=exit_status,
        ok=False,
    )
    verdict.ok = (
        verdict.fd_growth <= 0
        and verdict.thread_growth <= 0
        and verdict.rss_growth_mib <= rss_slack_mib
        and exit_status == 0
    )
    return verdict


def run(args: argparse.Namespace) -> tuple[list[Checkpoint], Verdict]:
    """Run the soak described by ``args``; returns the checkpoints and the verdict."""
    library = build_fake_nvml()
    work = Path(tempfile.mkdtemp(prefix="gpusight-soak-"))
    churn = Churn(work / "scenario.txt", args.gpus, args.procs)
    points: list[Checkpoint] = []
    with fake_trainer(work, workers=("sleep", "sleep")) as trainer:
        churn.trainer_pid = trainer.pid
        churn.publish()
        env = fake_nvml_env(library, churn.scenario_path)
        env["TERM"] = "xterm-256color"
        command = [sys.executable, "-m", "gpusight", "--interval", str(args.interval), "--readonly"]
        terminal = PtyTerminal(command, args.size, env=env, cwd=tempfile.gettempdir(), keep_output=False)
        started = time.monotonic()
        next_churn = next_check = started
        next_loss = started + args.lose_every
        recover_at = None
        status: int | None = None
        try:
            while time.monotonic() - started < args.duration:
                if terminal.proc.poll() is not None:
                    raise RuntimeError(f"gpusight exited early with status {terminal.proc.returncode}")
                now = time.monotonic()
                if now >= next_churn:
                    churn.step()
                    if churn.churned % 10 == 0:
                        trainer.respawn()
                    next_churn += args.churn
                if args.lose_every > 0 and now >= next_loss and recover_at is None:
                    churn.lost, recover_at = True, now + LOST_SECONDS
                    churn.publish()
                if recover_at is not None and now >= recover_at:
                    churn.lost, recover_at = False, None
                    next_loss = now + args.lose_every
                    churn.publish()
                if now >= next_check:
                    point = measure(terminal.proc.pid, started, churn, terminal)
                    points.append(point)
                    print(f"{point.elapsed_s:7.1f}s fds {point.fds:3d} threads {point.threads:3d} "
                          f"rss {point.rss_mib:7.2f} MiB cpu {point.cpu_s:7.2f}s churned {point.churned:4d} "
                          f"output {point.output_kib:9.1f} KiB", flush=True)
                    next_check += args.checkpoint
                time.sleep(0.05)
            points.append(measure(terminal.proc.pid, started, churn, terminal))
        finally:
            status = terminal.quit(grace=10.0)
            terminal.cleanup()
            churn.close()
    return points, judge(points, args.warmup, args.rss_slack_mib, status)


def parse_size(text: str) -> tuple[int, int]:
    """``"160x45"`` -> ``(160, 45)``."""
    columns, rows = text.lower().split("x")
    return int(columns), int(rows)


def main(argv: list[str] | None = None) -> int:
    """Run the soak from the command line; status 0 when nothing grew."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds to run gpusight (default 600)")
    parser.add_argument("--interval", type=float, default=0.1, help="gpusight --interval (default 0.1)")
    parser.add_argument("--gpus", type=int, default=4, help="fake GPUs (default 4)")
    parser.add_argument("--procs", type=int, default=12, help="churning GPU processes alive at once (default 12)")
    parser.add_argument("--churn", type=float, default=0.5, help="seconds between process replacements (default 0.5)")
    parser.add_argument("--lose-every", type=float, default=60.0,
                        help="seconds between GPU 1 falling off the bus for 10 s; 0 = never (default 60)")
    parser.add_argument("--checkpoint", type=float, default=30.0, help="seconds between measurements (default 30)")
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds before the baseline (default 60)")
    parser.add_argument("--rss-slack-mib", type=float, default=4.0,
                        help="RSS growth allowed after the warm-up, MiB (default 4)")
    parser.add_argument("--size", type=parse_size, default=(160, 45), help="terminal COLSxROWS (default 160x45)")
    parser.add_argument("--json", type=Path, help="also write the checkpoints and verdict here")
    args = parser.parse_args(argv)
    points, verdict = run(args)
    print(json.dumps(asdict(verdict)))
    if args.json is not None:
        args.json.write_text(json.dumps({"checkpoints": [asdict(p) for p in points], "verdict": asdict(verdict),
                                         "settings": {k: v for k, v in vars(args).items() if k != "json"}}, indent=1))
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
