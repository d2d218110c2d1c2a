"""Run a real ``gpusight --serve`` child process and scrape it (for the exporter and cluster tests).

``serving([...])`` starts ``python -m gpusight --serve 127.0.0.1:0 ...`` (port 0: the kernel picks a free one),
reads the address it announces on stderr, and stops it with SIGTERM afterwards.
"""

from __future__ import annotations

import os
import re
import select
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

ANNOUNCE = re.compile(r"serving (https?://\S+)/metrics")
"""The line ``gpusight --serve`` writes to stderr once it listens."""


@dataclass
class RunningExporter:
    """A ``gpusight --serve`` child and where it serves."""

    proc: subprocess.Popen[bytes]
    """The child process."""
    url: str
    """``http://127.0.0.1:PORT`` (no trailing slash)."""

    def get(self, path: str = "/metrics", headers: Mapping[str, str] | None = None,
            context: ssl.SSLContext | None = None, timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
        """GET ``path``: (status, headers, body); HTTP errors are returned, not raised."""
        request = urllib.request.Request(self.url + path, headers=dict(headers or {}))
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def scrape(self, context: ssl.SSLContext | None = None, headers: Mapping[str, str] | None = None) -> str:
        """The text of ``/metrics``; fails the test on any status but 200."""
        status, _, body = self.get("/metrics", headers, context)
        assert status == 200, body[:500]
        return body.decode("utf-8")

    def wait_for(self, needle: str, timeout: float = 30.0) -> str:
        """Scrape until the text contains ``needle``; returns that scrape."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.scrape()
            if needle in text:
                return text
            assert time.monotonic() < deadline, f"{needle!r} not served within {timeout} s:\n{text[:2000]}"
            time.sleep(0.2)


def gpusight_serve_argv(*extra: str, listen: str = "127.0.0.1:0") -> list[str]:
    """``python -m gpusight --serve LISTEN EXTRA...``."""
    return [sys.executable, "-m", "gpusight", "--serve", listen, *extra]


def read_announcement(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> str:
    """Read the child's stderr until it says where it serves; fails with what it wrote if it exits or is slow."""
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"gpusight --serve did not announce itself in {timeout} s: {seen!r}")
        ready, _, _ = select.select([proc.stderr], [], [], min(remaining, 0.5))
        if not ready:
            continue
        chunk = os.read(proc.stderr.fileno(), 65536)
        seen += chunk
        found = ANNOUNCE.search(seen.decode("utf-8", "replace"))
        if found:
            return found.group(1)
        if not chunk:
            raise AssertionError(f"gpusight --serve exited ({proc.wait()}): {seen.decode('utf-8', 'replace')}")


def terminate(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """End ``proc`` with SIGTERM (nothing if it has exited), killing it after ``timeout`` seconds; reaps it."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def serving(extra: Sequence[str] = (), env: Mapping[str, str] | None = None,
            listen: str = "127.0.0.1:0") -> Iterator[RunningExporter]:
    """A running ``gpusight --serve``, stopped with SIGTERM (then killed) afterwards."""
    proc = subprocess.Popen(gpusight_serve_argv(*extra, listen=listen), env=None if env is None else dict(env),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield RunningExporter(proc, read_announcement(proc))
    finally:
        terminate(proc)
        if proc.stderr is not None:
            proc.stderr.close()


DCGM_LINT = ("label names should be written in 'snake_case' not 'camelCase'",
             "DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'")
"""What promtool's lint (exit 3) says of dcgm-exporter's own spellings, which gpusight keeps for its dashboards: the
camelCase label ``modelName`` on every device series, and a counter's name holding "COUNTER"."""


def promtool_problems(exposition: str) -> list[str]:
    """What ``promtool check metrics`` finds in ``exposition`` beyond dcgm-exporter's own spellings (``DCGM_LINT``)
    on ``DCGM_FI_`` series; skips the test where promtool is not installed."""
    import shutil

    import pytest

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package; see README's test command)")
    result = subprocess.run([promtool, "check", "metrics"], input=exposition, capture_output=True, text=True,
                            check=False)
    problems = (result.stdout + result.stderr).splitlines()
    if result.returncode not in (0, 3):
        return problems
    return [p for p in problems if not (p.startswith("DCGM_FI_") and p.endswith(DCGM_LINT))]
