"""A small client of Prometheus's HTTP API (``/api/v1/query``, ``/api/v1/query_range``) on urllib.

Every failure becomes a :class:`PrometheusError` whose message is one clear line: a bad URL, an
unreachable server, an HTTP error, an answer that is not Prometheus's JSON, a query slower than the
timeout, or an error Prometheus reports for the query. Nothing raises anything else, and no request
waits longer than its timeout, counted for the whole answer, not per socket read.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from gpusight.cluster.answer import AnswerReader, AnswerTooLarge, MalformedAnswer, NodeCut
from gpusight.cluster.answer import Series as Series  # its home before answers were read a series at a time
from gpusight.cluster.settings import DEFAULT_TIMEOUT_SECONDS, MAX_WHOLE_ANSWER_BYTES

READ_CHUNK = 256 * 1024
"""Bytes read at a time, so the deadline is checked while a large answer trickles in."""


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
    """Bytes of answer bodies read."""
    seconds: float = 0.0
    """Wall time spent in requests."""
    server_seconds: float = 0.0
    """Prometheus's own query time (``stats.timings.evalTotalSeconds``), when asked for with ``server_stats``."""
    per_query: list[tuple[str, float, int]] = field(default_factory=list)
    """(query, seconds, bytes) for each request since the last reset."""


def _display_url(parts: urllib.parse.SplitResult) -> str:
    """The URL without credentials, fit to print."""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


class PrometheusClient:
    """Queries one Prometheus server; ``url`` is its base URL, ``http://USER:PASS@HOST:PORT/PREFIX`` allowed."""

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT_SECONDS, server_stats: bool = False) -> None:
        self.timeout = timeout
        """Seconds one request may take in all."""
        self.server_stats = server_stats
        """Ask Prometheus for its own timings (``stats=all``) and add them to ``stats.server_seconds``."""
        self.stats = RequestStats()
        """What the requests so far cost."""
        self._auth: str | None = None
        self.url = url
        """The URL as given until checked; after :meth:`check_url` succeeds, the base URL without credentials."""
        self._base: str | None = None
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
        if parts.username is not None:
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            self._auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        self.url = _display_url(parts)
        netloc = parts.netloc.rsplit("@", 1)[-1]
        self._base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))

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

    def _get(self, path: str, params: dict[str, str], expr: str, cut: NodeCut) -> dict[str, Any]:
        """GET ``path`` with ``params``, pass its series to ``cut`` and return the ``data`` of a successful answer."""
        self.check_url()
        if self.server_stats:
            params = {**params, "stats": "all"}
        request = urllib.request.Request(f"{self._base}{path}?{urllib.parse.urlencode(params)}")
        request.add_header("Accept", "application/json")
        if self._auth is not None:
            request.add_header("Authorization", self._auth)
        started = time.monotonic()
        reader = AnswerReader(cut)
        document: dict[str, Any] | None = None
        try:
            self._fetch(request, started + self.timeout, reader)
            document = reader.finish()
        except urllib.error.HTTPError as exc:
            body = self._error_body(exc)
            document = self._json(body)
            if document is not None and document.get("status") == "error":
                raise self._query_error(document, expr) from None
            raise self._http_error(exc.code, path) from None
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
        except urllib.error.URLError as exc:
            raise self._unreachable(exc.reason) from None
        except http.client.HTTPException as exc:  # not HTTP at all: an SSH banner, a cut-off answer
            raise PrometheusError(f"{self.url} does not answer like a Prometheus server ({type(exc).__name__})",
                                  fatal=True) from None
        except (OSError, ValueError) as exc:  # reset connections, TLS failures
            raise self._unreachable(exc) from None
        finally:
            elapsed = time.monotonic() - started
            self.stats.requests += 1
            self.stats.bytes += reader.bytes
            self.stats.seconds += elapsed
            self.stats.per_query.append((expr, elapsed, reader.bytes))
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

    def _fetch(self, request: urllib.request.Request, deadline: float, reader: AnswerReader) -> None:
        """Feed the answer to ``request`` to ``reader`` as it arrives; raise the 'slow' error once ``deadline``
        passes."""
        context = ssl.create_default_context() if request.full_url.startswith("https:") else None
        remaining = deadline - time.monotonic()
        with urllib.request.urlopen(request, timeout=max(remaining, 0.001), context=context) as answer:
            while True:
                if time.monotonic() > deadline:
                    raise self._slow()
                chunk = answer.read(READ_CHUNK)
                if not chunk:
                    return
                reader.feed(chunk)

    @staticmethod
    def _error_body(exc: urllib.error.HTTPError) -> bytes:
        try:
            return exc.read(READ_CHUNK)
        except (OSError, ValueError):
            return b""

    @staticmethod
    def _json(body: bytes) -> dict[str, Any] | None:
        try:
            document = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return None
        return document if isinstance(document, dict) else None

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
            return PrometheusError(f"Prometheus at {self.url} refused access (HTTP {code}): "
                                   "give user:password@ in the URL", fatal=True)
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
