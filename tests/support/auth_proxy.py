"""An HTTP server standing for an authenticating proxy: it hands each GET's path and Authorization header to a
callable, which decides the status and the body (forwarding to a real Prometheus where it lets the request in)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class AuthProxy:
    """An HTTP server calling ``forward(path, Authorization header)`` for every GET."""

    def __init__(self, forward: Callable[[str, str | None], tuple[int, bytes]]) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                status, body = forward(self.path, self.headers.get("Authorization"))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
