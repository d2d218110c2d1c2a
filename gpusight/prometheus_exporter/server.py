"""The exporter's HTTP server: ``/metrics`` written by ``prometheus_client``, a landing page, TLS and basic auth.

Unlike ``prometheus_client.start_http_server`` (socketserver's listen backlog of 5, no idle timeout), it
keeps a long listen backlog, serves each connection on a daemon thread with a read timeout, does the TLS
handshake on that thread (a slow client never holds up the accept loop) and drops broken clients quietly.
A few connection threads are kept a while after their connection ends and reused: starting a thread for every
scrape cost 0.2-0.3 ms CPU a scrape, about half as much again as the HTTP handling. The handshake, request line and
headers have one deadline together, so a client that trickles bytes (slowloris) cannot hold a thread for long.
"""

from __future__ import annotations

import gzip
import io
import queue
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from socketserver import TCPServer, ThreadingMixIn
from typing import Any, cast
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client.exposition import gzip_accepted
from prometheus_client.registry import Collector

from gpusight.prometheus_exporter.basic_auth import BcryptUsers, Verdict
from gpusight.prometheus_exporter.exposition import CONTENT_TYPE, Exposition

LISTEN_BACKLOG = 1024
"""Connections the kernel queues before ``accept``: 500 concurrent scrapes must all be answered."""

READ_TIMEOUT_S = 10.0
"""A connection that sends nothing (or stalls mid-request or mid-handshake) this long is closed."""

HEADER_DEADLINE_S = 10.0
"""The TLS handshake, request line and headers must all arrive within this long of the connection's thread taking
it (at once, on accept): a client trickling a byte a second is cut off, although each byte restarts the read timeout."""

DEFAULT_HOST = "127.0.0.1"
"""Where ``--serve PORT`` listens: this machine only, unless an address is given."""

LANDING_PAGE = (b"<!doctype html><html><head><title>gpusight exporter</title></head><body><h1>gpusight exporter</h1>"
                b"<p><a href=\"/metrics\">/metrics</a></p></body></html>\n")
"""What ``/`` answers."""

THREAD_IDLE_S = 300.0
"""How long a spare connection thread waits for the next connection before it ends (Prometheus scrapes every 15 s to
1 min)."""

SPARE_THREADS = 8
"""Idle connection threads kept for reuse; any more end as soon as their connection does, so a burst of connections
(or an attack) leaves no threads behind."""

GZIP_LEVEL = 1
"""Compression level of a gzip-encoded scrape: prometheus_client's own (9) costs ten times the CPU
(0.6 against 0.06 ms for the 64 KB of 8 GPUs and 64 processes) for a body only a fifth smaller."""

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
"""A WSGI application."""


class ServeError(Exception):
    """The exporter cannot start: a bad address, a port in use, unusable TLS or credential files (one line)."""


@dataclass(frozen=True, slots=True)
class ListenAddress:
    """Where to listen."""

    host: str
    """Host name or IP address (IPv6 without brackets)."""
    port: int
    """TCP port; 0 picks a free one."""

    @property
    def hostport(self) -> str:
        """``host:port`` with an IPv6 address in brackets."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_listen(text: str) -> ListenAddress:
    """``PORT``, ``HOST:PORT``, ``IPV4:PORT`` or ``[IPV6]:PORT`` as a ListenAddress (``PORT`` alone: 127.0.0.1)."""
    host, port = DEFAULT_HOST, text.strip()
    if port.startswith("["):
        host, sep, port = port[1:].partition("]:")
        if not sep or not host:
            raise ServeError(f"--serve {text!r}: write an IPv6 address as [ADDR]:PORT, e.g. [::1]:9400")
    elif ":" in port:
        host, _, port = port.rpartition(":")
        if ":" in host or not host:
            raise ServeError(f"--serve {text!r}: expected [ADDR:]PORT, e.g. 9400, 0.0.0.0:9400 or [::1]:9400")
    if not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise ServeError(f"--serve {text!r}: the port must be a number from 0 to 65535")
    return ListenAddress(host, int(port))


def exporter_app(collector: Collector, users: BcryptUsers | None = None,
                 headers: tuple[tuple[str, str], ...] = ()) -> WsgiApp:
    """``/metrics`` (``collector``'s families in the Prometheus text format, gzip at ``GZIP_LEVEL`` when accepted),
    ``/`` a landing page, 404 otherwise; 401 everywhere without valid credentials when ``users`` are given, and
    ``headers`` on every answer."""
    exposition = Exposition(collector)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        status, extra, body = _answer(environ)
        start_response(status, [*extra, *headers])
        return [body]

    def _answer(environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        verdict = Verdict.ALLOWED if users is None else users.check(environ.get("HTTP_AUTHORIZATION"))
        if verdict is Verdict.BUSY:
            return "503 Service Unavailable", [("Retry-After", "5"), ("Content-Type", "text/plain")], b"503 Busy\n"
        if verdict is Verdict.DENIED:
            return ("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="gpusight"'),
                                         ("Content-Type", "text/plain")], b"401 Unauthorized\n")
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            body, extra = exposition.render(), [("Content-Type", CONTENT_TYPE)]
            if gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", "")):
                body = gzip.compress(body, compresslevel=GZIP_LEVEL)
                extra.append(("Content-Encoding", "gzip"))
            return "200 OK", extra, body
        if path == "/":
            return "200 OK", [("Content-Type", "text/html; charset=utf-8")], LANDING_PAGE
        return "404 Not Found", [("Content-Type", "text/plain")], b"404 Not Found: metrics are at /metrics\n"

    return app


class _DeadlineReader(io.RawIOBase):
    """A socket's reads, each waiting at most ``READ_TIMEOUT_S``, and none past ``deadline`` while it is set."""

    def __init__(self, sock: socket.socket, deadline: float | None) -> None:
        super().__init__()
        self._sock = sock
        self.deadline = deadline
        """``time.monotonic()`` by which the reads must be done; None once the headers are in."""

    def readable(self) -> bool:
        """It reads."""
        return True

    def readinto(self, buffer: Any) -> int:
        """Receive into ``buffer``; TimeoutError when nothing comes in time or the deadline has passed."""
        wait = READ_TIMEOUT_S
        if self.deadline is not None:
            wait = min(wait, self.deadline - time.monotonic())
            if wait <= 0:
                raise TimeoutError("the request headers did not arrive in time")
        self._sock.settimeout(wait)
        return self._sock.recv_into(buffer)


class _QuietHandler(WSGIRequestHandler):
    """A request handler with a read timeout, one deadline for the handshake and headers, the TLS handshake on its
    own thread, and no access log."""

    timeout = READ_TIMEOUT_S

    def setup(self) -> None:
        deadline = time.monotonic() + HEADER_DEADLINE_S
        self.connection = self.request
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.settimeout(HEADER_DEADLINE_S)  # one deadline for the whole handshake (CPython's _ssl)
            self.connection.do_handshake()
        super().setup()
        self.rfile.close()
        self._reader = _DeadlineReader(self.connection, deadline)
        self.rfile = io.BufferedReader(self._reader)

    def parse_request(self) -> bool:
        """Parse the request line and headers, then lift the deadline (reads go on with the read timeout)."""
        parsed = super().parse_request()
        self._reader.deadline = None
        self.connection.settimeout(READ_TIMEOUT_S)  # the answer's writes get the whole timeout, not the deadline's rest
        return parsed

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged: a scrape a second would fill the journal."""


class _Workers:
    """Daemon threads that serve one connection at a time: an idle one takes the next connection, else a new one
    starts, so a connection never waits for another. At most ``SPARE_THREADS`` stay idle, each for ``THREAD_IDLE_S``;
a thread whose connection ends when that many are idle ends too."""

    def __init__(self, serve: Callable[[Any, Any], None]) -> None:
        self._serve = serve
        self._connections: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def submit(self, request: Any, client_address: Any) -> None:
        """Serve ``request`` on an idle thread or a new one; returns at once."""
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1  # that thread is taken: a connection queued now is its
        self._connections.put((request, client_address))
        if start:
            threading.Thread(target=self._run, name="gpusight-exporter-connection", daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                request, client_address = self._connections.get(timeout=THREAD_IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # else a submit took this thread just now: its connection is queued
                        self._idle -= 1
                        return
                continue
            self._serve(request, client_address)
            with self._lock:
                if self._idle >= SPARE_THREADS:
                    return
                self._idle += 1


class ExporterServer(ThreadingMixIn, WSGIServer):
    """A threaded WSGI server: long backlog, reused daemon threads, optional TLS."""

    block_on_close = False  # server_close does not wait for connection threads
    request_queue_size = LISTEN_BACKLOG
    allow_reuse_address = True

    def __init__(self, address: ListenAddress, app: WsgiApp, tls: ssl.SSLContext | None = None) -> None:
        """Bind and listen on ``address``; ServeError when the address is bad or taken."""
        try:
            infos = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except (socket.gaierror, UnicodeError) as exc:
            raise ServeError(f"cannot listen on {address.host!r}: {getattr(exc, 'strerror', None) or exc}") from None
        family, _, _, _, sockaddr = infos[0]
        self.address_family = family
        try:
            super().__init__(cast(tuple[str, int], sockaddr), _QuietHandler)
        except OSError as exc:
            raise ServeError(f"cannot listen on {address.hostport}: {exc.strerror or exc}") from None
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        self.tls = tls is not None
        """True when it serves HTTPS."""
        self._workers = _Workers(self.process_request_thread)
        self.set_app(app)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Hand the connection to a connection thread (``ThreadingMixIn.process_request_thread`` serves it)."""
        self._workers.submit(request, client_address)

    def server_bind(self) -> None:
        """Bind without the reverse DNS lookup ``HTTPServer`` makes for its server name."""
        TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])
        self.setup_environ()

    @property
    def url(self) -> str:
        """Where it serves, e.g. ``http://127.0.0.1:9400``."""
        address = ListenAddress(str(self.server_address[0]), int(self.server_address[1]))
        return f"{'https' if self.tls else 'http'}://{address.hostport}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that times out, resets or fails the TLS handshake is dropped without a traceback."""
