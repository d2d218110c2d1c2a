"""A slowloris client for exporter tests and benchmarks: connections that send a header byte a second, and the
thread count of the process they attack."""

from __future__ import annotations

import select
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path

REQUEST = b"GET /metrics HTTP/1.1\r\nHost: gpu-node\r\nX-Slow: " + b"a" * 1000
"""What a trickling client sends, a byte at a time: its headers never end."""

HANDSHAKE = b"\x16\x03\x01\x40\x00" + b"\x01" * 1000
"""A TLS handshake record that announces 16 KiB and then trickles: the server's handshake never completes."""

_NOT_NOW = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
"""What a non-blocking socket raises when it has nothing to give, or no room, yet: not a closed connection."""


def thread_count(pid: int) -> int:
    """The process's thread count, from ``/proc/PID/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads: line")


def trickle(sockets: list[socket.socket], limit_s: float, tick: Callable[[float], None],
            payload: bytes = REQUEST) -> tuple[int, list[float]]:
    """Send each socket a byte of ``payload`` a second until the server closes it or ``limit_s`` passes, calling ``tick``
    with the seconds elapsed after each round: (how many are still open, seconds after which each was closed)."""
    sent = {sock: 0 for sock in sockets}
    closed_after: list[float] = []
    start = time.monotonic()
    for sock in sockets:
        sock.setblocking(False)  # a read that finds only a TLS 1.3 session ticket must not wait
    while sent and time.monotonic() - start < limit_s:
        for sock in list(sent):
            try:
                sock.send(payload[sent[sock]:sent[sock] + 1])
                sent[sock] += 1
            except _NOT_NOW:
                pass
            except OSError:  # reset or broken pipe: the server closed it
                del sent[sock]
                closed_after.append(time.monotonic() - start)
        readable, _, _ = select.select(list(sent), [], [], 1.0)
        for sock in readable:
            try:
                data = sock.recv(4096)
            except _NOT_NOW:
                continue
            except OSError:
                data = b""
            if not data:
                del sent[sock]
                closed_after.append(time.monotonic() - start)
        tick(time.monotonic() - start)
    return len(sent), closed_after
