"""Peak memory of ``gpusight --cluster`` when Prometheus answers far more than expected.

A fake Prometheus (tests/support/fake_prometheus.py) serves a fleet of 6,250 nodes x 8 GPUs: 50,000 series per
device metric, with a Kubernetes dcgm-exporter's raw labels wherever a query does not aggregate them away (about
30 MB for ``DCGM_FI_DEV_GPU_UTIL``'s raw series alone), gzipped for a client that asks. The real binary runs as a
child process; psutil reads its resident memory every 20 ms (tests/support/peak_rss.py) and the peak is reported
for ``--once``, ``--json`` and the TUI (in a real pty, for three polls). ``--tree`` runs another checkout (a
``git worktree`` of main for the "before" figures); ``--results`` appends the table to the section
"Cluster view: a huge answer" of benchmarks/RESULTS-cluster.md.

    python benchmarks/cluster_huge.py --tree /tmp/main-tree --label before
    python benchmarks/cluster_huge.py --label after --results
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.fake_prometheus import DCGM_RAW_LABELS, FakePrometheus  # noqa: E402
from support.peak_rss import PeakRss  # noqa: E402
from support.terminal import PtyTerminal  # noqa: E402

SECTION = "## Cluster view: a huge answer"
"""The section of benchmarks/RESULTS-cluster.md the runs are appended to (it is the file's last)."""

POLLS = 3
"""Polls the TUI runs before it is stopped."""


def one_shot(tree: Path, url: str, flag: str) -> tuple[float, str, int]:
    """(peak MiB, last line of stderr, bytes of stdout) of ``--cluster URL --once`` or ``--json``."""
    proc = subprocess.Popen([sys.executable, "-m", "gpusight", "--cluster", url, flag, "--cluster-timeout", "120"],
                            cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tree))
    peak = PeakRss(proc.pid)
    out, err = proc.communicate(timeout=600)
    lines = [line for line in (out + err).decode(errors="replace").splitlines() if "of" in line and "nodes" in line]
    return peak.stop(), (lines[0] if lines else err.decode(errors="replace").strip()[-200:]), len(out)


def tui(tree: Path, fake: FakePrometheus) -> float:
    """Peak MiB of the TUI over ``POLLS`` polls."""
    argv = [sys.executable, "-m", "gpusight", "--cluster", fake.url, "--interval", "2", "--cluster-timeout", "120"]
    before = len(fake.queries)
    with PtyTerminal(argv, (160, 45), env=_env(tree), cwd=tree, keep_output=False) as term:
        peak = PeakRss(term.proc.pid)
        deadline = time.monotonic() + 600
        while len(fake.queries) - before < 6 * POLLS + 1 and time.monotonic() < deadline and term.proc.poll() is None:
            time.sleep(0.2)
        time.sleep(2)
        result = peak.stop()
        term.quit()
    return result


def _env(tree: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(tree))


def main() -> None:
    """Measure and print (or write) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose gpusight runs (default: this one)")
    parser.add_argument("--label", default="this tree", help="what the tree is, for the table")
    parser.add_argument("--hosts", type=int, default=6250)
    parser.add_argument("--results", action="store_true", help="append the table to benchmarks/RESULTS-cluster.md")
    args = parser.parse_args()
    rows = []
    with FakePrometheus(hosts=args.hosts, extra_labels=DCGM_RAW_LABELS, gzip=True) as fake:
        for flag in ("--once", "--json"):
            sent = fake.bytes_sent
            peak, line, size = one_shot(args.tree, fake.url, flag)
            rows.append(f"| {args.label} | `{flag}` | {peak:.0f} | {(fake.bytes_sent - sent) / 1e6:.1f} | {line} |")
            print(rows[-1], flush=True)
        sent = fake.bytes_sent
        peak = tui(args.tree, fake)
        rows.append(f"| {args.label} | TUI, {POLLS} polls | {peak:.0f} | {(fake.bytes_sent - sent) / 1e6:.1f} | |")
        print(rows[-1], flush=True)
    if args.results:
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        path = REPO / "benchmarks" / "RESULTS-cluster.md"
        header = "" if SECTION in path.read_text() else f"\n{SECTION}\n"
        text = header + (f"\nWritten by `python benchmarks/cluster_huge.py --label {args.label}` on {stamp} ({platform.machine()}, "
                f"{os.cpu_count()} logical CPUs, {args.hosts} nodes x 8 GPUs).\n\n"
                "| tree | mode | peak RSS MiB | MB on the wire | the line it printed |\n|---|---|---|---|---|\n"
                + "\n".join(rows) + "\n")
        with open(path, "a") as results:
            results.write(text)


if __name__ == "__main__":
    main()
