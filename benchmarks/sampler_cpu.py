"""CPU the sampler costs on the benchmark machine (8 fake GPUs, 64 real sleeping processes), without the UI.

Builds the machine of ``scenario.py``, then, in a child process that loads the fake NVML, runs
``Sampler.poll_once`` on the live source every ``--interval`` seconds for ``--seconds`` seconds, as
the sampler thread does (advice, history and chart grid included), after a few warm-up polls.
Prints one JSON line: CPU milliseconds per second of the whole child (the PCIe throughput thread
included) and of the polling thread alone, the polls taken and their mean CPU cost.

    python benchmarks/sampler_cpu.py [--interval 0.25] [--seconds 20] [--process-refresh 1.0]

``--process-refresh 0`` re-reads the processes' details at every poll, for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WARMUP_POLLS = 8
"""Polls before measuring: NVML start-up, first process reads, CPU baselines."""


def measure(interval: float, seconds: float, process_refresh: float) -> dict[str, float]:
    """Poll the live source through a sampler for ``seconds``; CPU figures of this process and this thread."""
    from gpusight.advice.engine import AdviceEngine
    from gpusight.backends.host.source import HostSource
    from gpusight.backends.live import LiveSource
    from gpusight.sampling.sampler import Sampler

    source = LiveSource(host=HostSource(process_refresh_seconds=process_refresh))
    sampler = Sampler(source, interval, advisor=AdviceEngine())
    try:
        for _ in range(WARMUP_POLLS):
            sampler.poll_once()
            time.sleep(interval)
        process_start, thread_start, wall_start = time.process_time(), time.thread_time(), time.monotonic()
        polls = 0
        deadline = wall_start
        while time.monotonic() - wall_start < seconds:
            sampler.poll_once()
            polls += 1
            deadline += interval
            time.sleep(max(0.0, deadline - time.monotonic()))
        wall = time.monotonic() - wall_start
        process_cpu, thread_cpu = time.process_time() - process_start, time.thread_time() - thread_start
        snapshot = sampler.history.latest
        assert snapshot is not None
        return {
            "interval_s": interval,
            "process_refresh_s": process_refresh,
            "wall_s": wall,
            "polls": polls,
            "gpus": len(snapshot.devices),
            "processes": len(snapshot.processes),
            "process_cpu_ms_per_s": 1000 * process_cpu / wall,
            "sampler_thread_cpu_ms_per_s": 1000 * thread_cpu / wall,
            "sampler_thread_cpu_ms_per_poll": 1000 * thread_cpu / polls,
        }
    finally:
        sampler.stop()


def main() -> None:
    """Build the machine and run the measurement in a child that loads the fake NVML."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=0.25, help="polling period in seconds")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured time")
    parser.add_argument("--process-refresh", type=float, default=None,
                        help="seconds between two reads of the processes' details (default: the sampler's own)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        from gpusight.backends.host.source import PROCESS_REFRESH_SECONDS

        refresh = PROCESS_REFRESH_SECONDS if args.process_refresh is None else args.process_refresh
        print(json.dumps(measure(args.interval, args.seconds, refresh)))
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from mover import bench_machine

    with tempfile.TemporaryDirectory() as workdir, bench_machine(Path(workdir)) as machine:
        command = [sys.executable, __file__, "--child", "--interval", str(args.interval), "--seconds", str(args.seconds)]
        if args.process_refresh is not None:
            command += ["--process-refresh", str(args.process_refresh)]
        result = subprocess.run(command, env=machine.env(dict(os.environ)), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"measurement failed: {result.stderr.strip()[-2000:]}")
    print(result.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
