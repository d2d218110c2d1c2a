"""HTTP basic auth against bcrypt hashes (``basic_auth_users`` of a web config), as the exporter-toolkit checks it.

A bcrypt check costs about 80 ms of CPU at cost 10 and Prometheus scrapes every 15 s, so a successful check is
remembered under a SHA-256 of the user, the hash and the password (never the password itself). A failed one is not,
so a wrong password cannot fill the cache; at most ``BCRYPT_SLOTS`` checks run at a time, so a flood of wrong
passwords keeps at most that many CPUs busy, and a request that waits ``BCRYPT_WAIT_S`` for a slot gets 503.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
from enum import Enum

import bcrypt

BCRYPT_SLOTS = 1
"""bcrypt checks running at once; the rest wait (a scraper needs one check, then is remembered)."""

BCRYPT_WAIT_S = 5.0
"""How long a request waits for a bcrypt slot before it is answered 503."""

CACHE_SIZE = 256
"""Successful checks remembered; the cache is emptied when full (a few scrapers use a few entries)."""

_UNKNOWN_USER_HASH = b"$2b$10$mNJa20.8iF7qkiXMHtwfbOb.7gV4R7dPMfG1cJtOAFP15loMM1SCq"
"""Checked for a user that does not exist, so the answer's timing does not say which users do."""


class Verdict(Enum):
    """What a request's credentials come to."""

    ALLOWED = "allowed"
    DENIED = "denied"
    BUSY = "busy"
    """No bcrypt slot freed up in time: answered 503, not 401, since the password was never checked."""


class BcryptUsers:
    """Users and their bcrypt hashes; ``check`` judges an ``Authorization`` header."""

    def __init__(self, users: dict[bytes, bytes]) -> None:
        self._users = users
        self._slots = threading.BoundedSemaphore(BCRYPT_SLOTS)
        self._lock = threading.Lock()
        self._allowed: set[bytes] = set()

    def check(self, header: str | None) -> Verdict:
        """The verdict on an ``Authorization: Basic`` header (DENIED when it is missing or malformed)."""
        if not header or not header.startswith("Basic "):
            return Verdict.DENIED
        try:
            user, sep, password = base64.b64decode(header[6:].strip(), validate=True).partition(b":")
        except (binascii.Error, ValueError):
            return Verdict.DENIED
        if not sep:
            return Verdict.DENIED
        hashed = self._users.get(user)
        key = hashlib.sha256(b"\0".join((user, hashed or b"", password))).digest()
        with self._lock:
            if hashed is not None and key in self._allowed:
                return Verdict.ALLOWED
        if not self._slots.acquire(timeout=BCRYPT_WAIT_S):
            return Verdict.BUSY
        try:
            match = bcrypt.checkpw(password, hashed or _UNKNOWN_USER_HASH)
        finally:
            self._slots.release()
        if not match or hashed is None:
            return Verdict.DENIED
        with self._lock:
            if len(self._allowed) >= CACHE_SIZE:
                self._allowed.clear()
            self._allowed.add(key)
        return Verdict.ALLOWED
