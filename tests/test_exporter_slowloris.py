"""``gpusight --serve`` under a slowloris attack, for real: idle and trickling connections against the running binary.

A trickling client sends one header byte a second, which restarts a plain read timeout every time; the exporter must
cut it off at its whole-request deadline, keep answering scrapes meanwhile, and end the threads an attack started
once the clients are gone.
"""

from __future__ import annotations

import select
import socket
import time
from pathlib import Path

from gpusight import metric_names as names
from gpusight.prometheus_exporter.server import HEADER_DEADLINE_S, SPARE_THREADS
from support.exporter import RunningExporter, serving

IDLE = 100
"""Connections that send nothing."""

TRICKLING = 100
"""Connections that send a header byte a second, forever."""

SLACK_S = 5.0
"""Beyond the deadline, what a loaded test machine may take to close a connection."""

THREAD_SLACK = 3
"""Threads beyond the baseline and the spare pool allowed once the clients are gone (a scrape still finishing)."""

REQUEST = b"GET /metrics HTTP/1.1\r\nHost: gpu-node\r\nX-Slow: " + b"a" * 1000
"""What a trickling client sends, a byte at a time: its headers never end."""


def _threads(pid: int) -> int:
    """The process's thread count, from ``/proc/PID/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads: line")


def _connect(running: RunningExporter, count: int) -> list[socket.socket]:
    host, port = running.url[len("http://"):].rsplit(":", 1)
    return [socket.create_connection((host, int(port)), timeout=10) for _ in range(count)]


def _threads_settle(pid: int, ceiling: int, within_s: float) -> int:
    """Wait until the thread count is at most ``ceiling``; returns the last count seen."""
    deadline = time.monotonic() + within_s
    count = _threads(pid)
    while count > ceiling and time.monotonic() < deadline:
        time.sleep(0.25)
        count = _threads(pid)
    return count


def test_trickling_connections_are_cut_at_the_deadline_while_scrapes_answer() -> None:
    with serving(["--demo"]) as running:
        running.wait_for(names.GPU_UTIL.name)
        baseline = _threads(running.proc.pid)
        idle = _connect(running, IDLE)
        trickling = _connect(running, TRICKLING)
        start = time.monotonic()
        open_since = {sock: 0 for sock in trickling}  # bytes sent so far
        closed_after: list[float] = []
        scraped_during = False
        try:
            while open_since and time.monotonic() - start < HEADER_DEADLINE_S + SLACK_S:
                for sock in list(open_since):
                    try:
                        sock.send(REQUEST[open_since[sock]:open_since[sock] + 1])
                        open_since[sock] += 1
                    except OSError:  # reset or broken pipe: the server closed it
                        del open_since[sock]
                        closed_after.append(time.monotonic() - start)
                readable, _, _ = select.select(list(open_since), [], [], 1.0)
                for sock in readable:
                    try:
                        data = sock.recv(4096)
                    except OSError:
                        data = b""
                    if not data:
                        del open_since[sock]
                        closed_after.append(time.monotonic() - start)
                if not scraped_during and time.monotonic() - start > 2:
                    assert names.GPU_UTIL.name in running.scrape()  # the attack does not stop scrapes
                    scraped_during = True
            assert scraped_during
            assert not open_since, (f"{len(open_since)} of {TRICKLING} trickling connections still open "
                                    f"{HEADER_DEADLINE_S + SLACK_S:g} s after they connected")
            assert max(closed_after) <= HEADER_DEADLINE_S + SLACK_S
        finally:
            for sock in idle + trickling:
                sock.close()
        settled = _threads_settle(running.proc.pid, baseline + SPARE_THREADS + THREAD_SLACK, 15.0)
        assert settled <= baseline + SPARE_THREADS + THREAD_SLACK, (baseline, settled)
        assert names.GPU_UTIL.name in running.scrape()


def test_threads_a_burst_of_connections_started_end_when_the_clients_go() -> None:
    with serving(["--demo"]) as running:
        running.wait_for(names.GPU_UTIL.name)
        baseline = _threads(running.proc.pid)
        burst = _connect(running, IDLE + TRICKLING)
        try:
            deadline = time.monotonic() + 10
            while _threads(running.proc.pid) < baseline + IDLE and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _threads(running.proc.pid) >= baseline + IDLE  # a thread serves each connection
            assert names.GPU_UTIL.name in running.scrape()
        finally:
            for sock in burst:
                sock.close()
        settled = _threads_settle(running.proc.pid, baseline + SPARE_THREADS + THREAD_SLACK, 10.0)
        assert settled <= baseline + SPARE_THREADS + THREAD_SLACK, (baseline, settled)
