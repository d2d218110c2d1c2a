"""``gpusight --serve`` under a slowloris attack, for real: idle and trickling connections against the running binary.

A trickling client sends one header byte a second, which restarts a plain read timeout every time; the exporter must
cut it off at its whole-request deadline, keep answering scrapes meanwhile, and end the threads an attack started
once the clients are gone.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from pathlib import Path

from gpusight import metric_names as names
from gpusight.prometheus_exporter.server import HEADER_DEADLINE_S, SPARE_THREADS
from support.exporter import RunningExporter, serving
from support.pki import make_pki
from support.slowloris import HANDSHAKE, thread_count, trickle

IDLE = 100
"""Connections that send nothing."""

TRICKLING = 100
"""Connections that send a header byte a second, forever."""

SLACK_S = 5.0
"""Beyond the deadline, what a loaded test machine may take to close a connection."""

THREAD_SLACK = 3
"""Threads beyond the baseline and the spare pool allowed once the clients are gone (a scrape still finishing)."""


def _connect(running: RunningExporter, count: int) -> list[socket.socket]:
    host, port = running.url[len("http://"):].rsplit(":", 1)
    return [socket.create_connection((host, int(port)), timeout=10) for _ in range(count)]


def _threads_settle(pid: int, ceiling: int, within_s: float) -> int:
    """Wait until the thread count is at most ``ceiling``; returns the last count seen."""
    deadline = time.monotonic() + within_s
    count = thread_count(pid)
    while count > ceiling and time.monotonic() < deadline:
        time.sleep(0.25)
        count = thread_count(pid)
    return count


def test_trickling_connections_are_cut_at_the_deadline_while_scrapes_answer() -> None:
    with serving(["--demo"]) as running:
        running.wait_for(names.GPU_UTIL.name)
        baseline = thread_count(running.proc.pid)
        idle = _connect(running, IDLE)
        trickling = _connect(running, TRICKLING)
        scraped_during: list[bool] = []

        def scrape_once(elapsed: float) -> None:
            if not scraped_during and elapsed > 2:
                assert names.GPU_UTIL.name in running.scrape()  # the attack does not stop scrapes
                scraped_during.append(True)

        try:
            still_open, closed_after = trickle(trickling, HEADER_DEADLINE_S + SLACK_S, scrape_once)
            assert scraped_during
            assert still_open == 0, (f"{still_open} of {TRICKLING} trickling connections still open "
                                     f"{HEADER_DEADLINE_S + SLACK_S:g} s after they connected")
            assert max(closed_after) <= HEADER_DEADLINE_S + SLACK_S
        finally:
            for sock in idle + trickling:
                sock.close()
        settled = _threads_settle(running.proc.pid, baseline + SPARE_THREADS + THREAD_SLACK, 15.0)
        assert settled <= baseline + SPARE_THREADS + THREAD_SLACK, (baseline, settled)
        assert names.GPU_UTIL.name in running.scrape()


def test_trickling_over_tls_is_cut_at_the_same_deadline(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    trust = ssl.create_default_context(cafile=str(pki.ca))
    with serving(["--demo", "--serve-tls-cert", str(pki.server_cert), "--serve-tls-key", str(pki.server_key)]) as running:
        host, port = running.url[len("https://"):].rsplit(":", 1)
        headers = [trust.wrap_socket(socket.create_connection((host, int(port)), timeout=10), server_hostname=host)
                   for _ in range(5)]  # handshakes done at once; then the headers come a byte a second
        handshakes = [socket.create_connection((host, int(port)), timeout=10) for _ in range(5)]
        slow_handshakes: list[tuple[int, list[float]]] = []
        shaker = threading.Thread(target=lambda: slow_handshakes.append(
            trickle(handshakes, HEADER_DEADLINE_S + SLACK_S, lambda elapsed: None, HANDSHAKE)))
        shaker.start()
        try:
            still_open, closed_after = trickle(headers, HEADER_DEADLINE_S + SLACK_S, lambda elapsed: None)
            shaker.join()
            assert still_open == 0, f"{still_open} of 5 TLS connections trickling headers still open"
            assert max(closed_after) <= HEADER_DEADLINE_S + SLACK_S
            assert slow_handshakes[0][0] == 0, f"{slow_handshakes[0][0]} of 5 trickled handshakes still open"
            assert max(slow_handshakes[0][1]) <= HEADER_DEADLINE_S + SLACK_S
        finally:
            shaker.join()
            for sock in headers + handshakes:
                sock.close()
        assert names.BUILD_INFO.name in running.scrape(context=trust)


def test_threads_a_burst_of_connections_started_end_when_the_clients_go() -> None:
    with serving(["--demo"]) as running:
        running.wait_for(names.GPU_UTIL.name)
        baseline = thread_count(running.proc.pid)
        burst = _connect(running, IDLE + TRICKLING)
        try:
            deadline = time.monotonic() + 10
            while thread_count(running.proc.pid) < baseline + IDLE and time.monotonic() < deadline:
                time.sleep(0.1)
            assert thread_count(running.proc.pid) >= baseline + IDLE  # a thread serves each connection
            assert names.GPU_UTIL.name in running.scrape()
        finally:
            for sock in burst:
                sock.close()
        settled = _threads_settle(running.proc.pid, baseline + SPARE_THREADS + THREAD_SLACK, 10.0)
        assert settled <= baseline + SPARE_THREADS + THREAD_SLACK, (baseline, settled)
