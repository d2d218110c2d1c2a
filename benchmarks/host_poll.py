"""CPU cost of one ``HostSource.poll`` with many GPU processes, measured with real processes.

Starts N sleeping child processes, passes them to ``HostSource.poll`` as GPU processes (8 per
device) and prints the mean process CPU time per poll over many polls, after a few warm-up polls.

    python benchmarks/host_poll.py [--processes 64] [--polls 200]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from gpusight.backends.host.source import HostSource
from gpusight.snapshot.model import ProcessSample


def measure(processes: int, polls: int, warmup: int = 5) -> float:
    """Mean CPU seconds (user + system of this process) per poll with ``processes`` sleeping children."""
    children = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"]) for _ in range(processes)
    ]
    try:
        time.sleep(0.5)  # let every child exec and settle
        samples = [ProcessSample(pid=child.pid, device_index=i % 8) for i, child in enumerate(children)]
        source = HostSource()
        for _ in range(warmup):
            source.poll(samples)
        start = time.process_time()
        for _ in range(polls):
            source.poll(samples)
        spent = time.process_time() - start
        source.close()
        return spent / polls
    finally:
        for child in children:
            child.kill()
        for child in children:
            child.wait()


def main() -> None:
    """Parse arguments, measure and print the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=64, help="sleeping GPU processes to poll")
    parser.add_argument("--polls", type=int, default=200, help="measured polls")
    args = parser.parse_args()
    per_poll = measure(args.processes, args.polls)
    print(f"{args.processes} processes, {args.polls} polls: {per_poll * 1000:.2f} ms CPU per poll")


if __name__ == "__main__":
    main()
