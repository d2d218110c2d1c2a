"""A counting TCP proxy: what a client really sends and receives, on the wire.

:class:`CountingProxy` listens on 127.0.0.1 and relays every connection to ``upstream`` byte for byte, counting
the connections it accepted and the bytes each way, and keeping what clients sent (their requests, headers
included), so a test or benchmark can see compression and connection reuse as the network does.
"""

from __future__ import annotations

import socket
import threading


class CountingProxy:
    """Relays 127.0.0.1:``port`` to ``upstream`` (``(host, port)``), counting connections and bytes."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        """Where connections are relayed to."""
        self.connections = 0
        """Connections accepted so far."""
        self.sent = 0
        """Bytes clients sent (requests)."""
        self.received = 0
        """Bytes clients received (answers, headers included)."""
        self.requests = bytearray()
        """Everything clients sent, in order."""
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        """The port it listens on."""
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    def reset(self) -> None:
        """Start counting again (connections already open keep relaying)."""
        with self._lock:
            self.connections, self.sent, self.received = 0, 0, 0
            self.requests.clear()

    def close(self) -> None:
        """Stop accepting connections."""
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            threading.Thread(target=self._relay, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._relay, args=(server, client, False), daemon=True).start()

    def _relay(self, source: socket.socket, target: socket.socket, upstream: bool) -> None:
        try:
            while chunk := source.recv(65536):
                with self._lock:
                    if upstream:
                        self.sent += len(chunk)
                        self.requests += chunk
                    else:
                        self.received += len(chunk)
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
