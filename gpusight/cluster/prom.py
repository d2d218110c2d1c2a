"""A small client of Prometheus's HTTP API (``/api/v1/query``, ``/api/v1/query_range``) on http.client.

It keeps one connection alive across its requests (opening another when the server closed it), asks for gzip,
and sends the credentials and TLS settings of an :class:`~gpusight.cluster.http_config.HttpConfig`.

Every failure becomes a :class:`PrometheusError` whose message is one clear line: a bad URL, an
unreachable server, an HTTP error, an answer that is not Prometheus's JSON, a query slower than the
timeout, or an error Prometheus reports for the query. Nothing raises anything else, and no request
waits longer than its timeout, counted for the whole answer, not per socket read.
"""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
import threading
import time
import urllib.parse
import zlib
from dataclasses import dataclass, field
from typing import Any

from gpusight.cluster.answer import AnswerReader, AnswerTooLarge, MalformedAnswer, NodeCut
from gpusight.cluster.answer import Series as Series  # its home before answers were read a series at a time
from gpusight.cluster.http_config import HttpConfig, HttpConfigError
from gpusight.cluster.settings import DEFAULT_TIMEOUT_SECONDS, MAX_SERIES_BYTES, MAX_WHOLE_ANSWER_BYTES

READ_CHUNK = 256 * 1024
"""Bytes read at a time, so the deadline is checked while a large answer trickles in."""


STALE_CONNECTION = (http.client.RemoteDisconnected, ConnectionResetError, ConnectionAbortedError, BrokenPipeError,
                    ssl.SSLEOFError)
"""What a request on a kept-alive connection the server has closed meanwhile raises: it is sent again, once."""


class PrometheusError(Exception):
    """A request failed; ``str(error)`` is one line saying what happened, fit to show as it is."""

    def __init__(self, message: str, *, fatal: bool) -> None:
        super().__init__(message)
        self.fatal = fatal
        """True when further requests in the same poll would fail the same way (unreachable, slow, not Prometheus)."""


@dataclass(slots=True)
class RequestStats:
    """What a client has spent: requests, bytes and the server's own evaluation time."""

    requests: int = 0
    """Requests sent."""
    bytes: int = 0
    """Bytes of answer bodies as they came over the wire (gzipped where the server compressed them)."""
    seconds: float = 0.0
    """Wall time spent in requests."""
    server_seconds: float = 0.0
    """Prometheus's own query time (``stats.timings.evalTotalSeconds``), when asked for with ``server_stats``."""
    per_query: list[tuple[str, float, int]] = field(default_factory=list)
    """(query, seconds, bytes) for each request since the last reset."""


def _cut_off(sock: socket.socket) -> None:
    """Shut ``sock`` down, so a read blocked on it returns at once."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


def _display_url(parts: urllib.parse.SplitResult) -> str:
    """The URL without credentials, fit to print."""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


class _TlsConnection(http.client.HTTPSConnection):
    """An HTTPS connection whose certificate is checked against ``server_name`` (``tls_config.server_name``)."""

    def __init__(self, host: str, port: int | None, timeout: float, tls: ssl.SSLContext, server_name: str) -> None:
        super().__init__(host, port, timeout=timeout, context=tls)
        self._tls = tls
        self._server_name = server_name

    def connect(self) -> None:
        """Connect and shake hands, naming ``server_name``."""
        http.client.HTTPConnection.connect(self)
        self.sock = self._tls.wrap_socket(self.sock, server_hostname=self._server_name)


class PrometheusClient:
    """Queries one Prometheus server; ``url`` is its base URL, ``http://USER:PASS@HOST:PORT/PREFIX`` allowed.

    ``http_config`` holds the credentials and TLS settings of ``--cluster-config`` (they win over credentials in the URL).
    One thread at a time.
    """

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT_SECONDS, server_stats: bool = False,
                 http_config: HttpConfig | None = None) -> None:
        self.timeout = timeout
        """Seconds one request may take in all."""
        self.server_stats = server_stats
        """Ask Prometheus for its own timings (``stats=all``) and add them to ``stats.server_seconds``."""
        self.stats = RequestStats()
        """What the requests so far cost."""
        self._http = http_config or HttpConfig()
        self._authorization = self._http.authorization
        self._connection: http.client.HTTPConnection | None = None
        self._https = False
        self._host = ""
        self._port: int | None = None
        self._prefix = ""
        self.url = url
        """The URL as given until checked; after :meth:`check_url` succeeds, the base URL without credentials."""
        self._url_error: str | None = None
        self._parse(url)

    def _parse(self, url: str) -> None:
        try:
            parts = urllib.parse.urlsplit(url.strip())
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError as exc:
            self._url_error = f"bad URL {url!r}: {exc}"
            return
        if parts.scheme not in ("http", "https") or not parts.hostname:
            self._url_error = f"bad URL {url!r}: expected http://HOST:PORT or https://HOST:PORT (Prometheus's address)"
            return
        if parts.query or parts.fragment:
            self._url_error = f"bad URL {url!r}: give Prometheus's base URL, without ?query or #fragment"
            return
        if parts.username is not None and self._authorization is None:
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            header = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            self._authorization = lambda: header
        self.url = _display_url(parts)
        self._https, self._host, self._port = parts.scheme == "https", parts.hostname, parts.port
        self._prefix = parts.path.rstrip("/")

    def check_url(self) -> None:
        """Raise :class:`PrometheusError` when the URL is not a usable http(s) base URL."""
        if self._url_error is not None:
            raise PrometheusError(self._url_error, fatal=True)

    def query(self, expr: str, at: float | None = None, cut: NodeCut | None = None) -> list[Series]:
        """Evaluate ``expr`` at ``at`` (default: the server's now) and return its series (those ``cut`` keeps)."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self._series("/api/v1/query", params, expr, cut or NodeCut())

    def query_range(self, expr: str, start: float, end: float, step: float,
                    cut: NodeCut | None = None) -> list[Series]:
        """Evaluate ``expr`` every ``step`` seconds from ``start`` to ``end`` and return its series (those ``cut``
        keeps)."""
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        return self._series("/api/v1/query_range", params, expr, cut or NodeCut())

    def reset_stats(self) -> RequestStats:
        """Return the stats so far and start counting again."""
        stats, self.stats = self.stats, RequestStats()
        return stats

    def close(self) -> None:
        """Close the kept-alive connection (the next request opens a new one)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _get(self, path: str, params: dict[str, str], expr: str, cut: NodeCut) -> dict[str, Any]:
        """GET ``path`` with ``params``, pass its series to ``cut`` and return the ``data`` of a successful answer."""
        self.check_url()
        if self.server_stats:
            params = {**params, "stats": "all"}
        target = f"{self._prefix}{path}?{urllib.parse.urlencode(params)}"
        started = time.monotonic()
        status, wire, reader = 0, 0, AnswerReader(cut)
        document: dict[str, Any] | None = None
        try:
            status, wire = self._exchange(target, started + self.timeout, reader)
            document = self._document(reader, status)
        except PrometheusError:
            raise
        except MalformedAnswer:
            raise PrometheusError(f"{self.url} does not answer like a Prometheus server (malformed result)",
                                  fatal=True) from None
        except AnswerTooLarge as exc:
            raise PrometheusError(f"Prometheus at {self.url} answered more than {MAX_WHOLE_ANSWER_BYTES >> 20} MiB "
                                  f"({exc}) in a shape read only whole: refused, for {expr[:80]}", fatal=False) from None
        except TimeoutError:
            raise self._slow() from None
        except (http.client.HTTPException, zlib.error) as exc:  # not HTTP at all: an SSH banner, a cut-off answer
            raise PrometheusError(f"{self.url} does not answer like a Prometheus server ({type(exc).__name__})",
                                  fatal=True) from None
        except (OSError, ValueError) as exc:  # refused or reset connections, TLS failures, unknown hosts
            raise self._unreachable(exc) from None
        finally:
            elapsed = time.monotonic() - started
            self.stats.requests += 1
            self.stats.bytes += wire
            self.stats.seconds += elapsed
            self.stats.per_query.append((expr, elapsed, wire))
        if status != 200:
            if document is not None and document.get("status") == "error":
                raise self._query_error(document, expr)
            raise self._http_error(status, path)
        if document is None or "status" not in document:
            raise PrometheusError(f"{self.url} does not answer like a Prometheus server (no API JSON at {path})",
                                  fatal=True)
        if document["status"] != "success":
            raise self._query_error(document, expr)
        data = document.get("data")
        if not isinstance(data, dict):
            raise PrometheusError(f"{self.url} does not answer like a Prometheus server (no data in {path})",
                                  fatal=True)
        timings = data.get("stats", {}).get("timings", {}) if self.server_stats else {}
        self.stats.server_seconds += float(timings.get("evalTotalTime", 0.0))
        return data

    def _exchange(self, target: str, deadline: float, reader: AnswerReader) -> tuple[int, int]:
        """GET ``target`` on the kept-alive connection (or a new one), its decoded body fed to ``reader``:
        (status, body bytes on the wire).

        A kept-alive connection the server has closed meanwhile is replaced once, silently.
        """
        reused = self._connection is not None
        try:
            try:
                response, sock = self._send(target, deadline)
            except STALE_CONNECTION:
                if not reused:
                    raise
                self.close()
                response, sock = self._send(target, deadline)
            wire = self._read_answer(response, sock, deadline, reader)
        except BaseException:  # a connection left mid-answer cannot carry the next request
            self.close()
            raise
        if response.will_close:
            self.close()
        return response.status, wire

    def _send(self, target: str, deadline: float) -> tuple[http.client.HTTPResponse, socket.socket]:
        """Send the request and read the answer's status line and headers: (the answer, its socket)."""
        headers = {"Accept": "application/json", "Accept-Encoding": "gzip"}
        if self._authorization is not None:
            try:
                headers["Authorization"] = self._authorization()
            except HttpConfigError as exc:
                raise PrometheusError(str(exc), fatal=True) from None
        if self._connection is None:
            self._connection = self._open(self._left(deadline))
        connection = self._connection
        if connection.sock is not None:
            connection.sock.settimeout(self._left(deadline))
        connection.request("GET", target, headers=headers)
        sock: socket.socket = connection.sock
        sock.settimeout(self._left(deadline))
        return self._headers(connection, sock, deadline), sock

    def _headers(self, connection: http.client.HTTPConnection, sock: socket.socket,
                 deadline: float) -> http.client.HTTPResponse:
        """The answer's status line and headers, read by ``deadline`` however they trickle in: every byte restarts
        the socket's timeout, so a timer cuts the socket off when the deadline passes (the 'slow' error)."""
        timer = threading.Timer(self._left(deadline), _cut_off, (sock,))
        timer.daemon = True
        timer.start()
        try:
            return connection.getresponse()
        except (OSError, http.client.HTTPException):
            if time.monotonic() >= deadline:
                raise self._slow() from None
            raise
        finally:
            timer.cancel()

    def _open(self, timeout: float) -> http.client.HTTPConnection:
        """A new connection to the server (not yet connected: the first request connects)."""
        if self._https:
            tls = self._http.tls or ssl.create_default_context()
            return _TlsConnection(self._host, self._port, timeout, tls, self._http.server_name or self._host)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _read_answer(self, response: http.client.HTTPResponse, sock: socket.socket, deadline: float,
                     reader: AnswerReader) -> int:
        """Feed the body of ``response`` from ``sock`` to ``reader``, gunzipped as it arrives, at most
        ``READ_CHUNK`` bytes at a time (a gzip bomb never expands at once); bytes on the wire.

        Raises the 'slow' error once ``deadline`` passes, however the answer trickles in. Of an error answer only
        its first ``MAX_SERIES_BYTES`` are read: Prometheus's error documents are short.
        """
        gzipped = response.getheader("Content-Encoding", "").strip().lower() == "gzip"
        decoder = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS) if gzipped else None
        wire = 0
        while response.status == 200 or reader.bytes < MAX_SERIES_BYTES:
            sock.settimeout(self._left(deadline))
            chunk = response.read1(READ_CHUNK)
            if not chunk:
                break
            wire += len(chunk)
            if decoder is None:
                reader.feed(chunk)
                continue
            while chunk:
                reader.feed(decoder.decompress(chunk, READ_CHUNK))
                chunk = decoder.unconsumed_tail
                self._left(deadline)
        else:
            response.close()
            self.close()  # the rest of the error answer is never read: the connection cannot carry another request
            return wire
        response.close()
        if decoder is not None:
            reader.feed(decoder.flush())
            if not decoder.eof:
                raise zlib.error("cut-off gzip stream")
        return wire

    def _left(self, deadline: float) -> float:
        """Seconds left before ``deadline``; the 'slow' error once it has passed."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._slow()
        return left

    @staticmethod
    def _document(reader: AnswerReader, status: int) -> dict[str, Any] | None:
        """The answer's document (its series went to the reader's cut); of an error answer, None if not JSON."""
        if status == 200:
            return reader.finish()
        try:
            return reader.finish()
        except (MalformedAnswer, AnswerTooLarge):
            return None

    def _slow(self) -> PrometheusError:
        return PrometheusError(f"Prometheus at {self.url} is too slow: a query took > {self.timeout:g} s", fatal=True)

    def _unreachable(self, reason: object) -> PrometheusError:
        if isinstance(reason, TimeoutError):
            return self._slow()
        if isinstance(reason, socket.gaierror):
            why = f"cannot resolve its host name ({reason.strerror or reason})"
        elif isinstance(reason, ConnectionRefusedError):
            why = "connection refused (is Prometheus running there?)"
        elif isinstance(reason, ssl.SSLError):
            why = f"TLS failed ({reason.reason or reason})"
        elif isinstance(reason, OSError) and reason.strerror:
            why = reason.strerror
        else:
            why = str(reason) or type(reason).__name__
        return PrometheusError(f"cannot reach Prometheus at {self.url}: {why}", fatal=True)

    def _http_error(self, code: int, path: str) -> PrometheusError:
        if code in (401, 403):
            hint = ("the credentials given were not accepted" if self._authorization is not None
                    else "give credentials with --cluster-config FILE (see docs/cluster.md)")
            return PrometheusError(f"Prometheus at {self.url} refused access (HTTP {code}): {hint}", fatal=True)
        if code == 404:
            return PrometheusError(f"{self.url} is not a Prometheus server (HTTP 404 for {path})", fatal=True)
        return PrometheusError(f"Prometheus at {self.url} answered HTTP {code} for {path}", fatal=code >= 500)

    def _query_error(self, document: dict[str, Any], expr: str) -> PrometheusError:
        kind = document.get("errorType", "error")
        message = " ".join(str(document.get("error", "no reason given")).split())
        if kind == "timeout":
            return self._slow()
        return PrometheusError(f"Prometheus refused a query ({kind}: {message}): {expr[:80]}", fatal=False)

    def _series(self, path: str, params: dict[str, str], expr: str, cut: NodeCut) -> list[Series]:
        """The series of a vector or matrix answer that ``cut`` keeps."""
        data = self._get(path, params, expr, cut)
        kind, result = data.get("resultType"), data.get("result")
        if kind not in ("vector", "matrix") or not isinstance(result, list):
            raise PrometheusError(f"{self.url} gave an answer of type {kind!r}, not a vector or matrix", fatal=False)
        return cut.series()
