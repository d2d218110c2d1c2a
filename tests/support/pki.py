"""A throwaway certificate authority made with the openssl CLI: a CA, a server certificate for 127.0.0.1 and client
certificates, for TLS tests against real servers."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    """The files of a test CA (PEM)."""

    ca: Path
    """The CA certificate that signed the server and ``client`` certificates."""
    server_cert: Path
    """For ``127.0.0.1`` and ``prometheus.test`` (subjectAltName IP:127.0.0.1, DNS:prometheus.test)."""
    server_key: Path
    """Its private key."""
    client_cert: Path
    """A client certificate signed by ``ca``."""
    client_key: Path
    """Its private key."""
    rogue_cert: Path
    """A self-signed client certificate ``ca`` did not sign."""
    rogue_key: Path
    """Its private key."""


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], capture_output=True, check=True, timeout=60)


def _signed(folder: Path, name: str, subject: str, ca: Path, ca_key: Path, extension: str) -> tuple[Path, Path]:
    key, request, cert, ext = (folder / f"{name}.{suffix}" for suffix in ("key", "csr", "pem", "ext"))
    ext.write_text(extension + "\n")
    _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", str(key), "-out", str(request))
    _openssl("x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
             "-days", "2", "-extfile", str(ext), "-out", str(cert))
    return cert, key


def make_pki(folder: Path) -> Pki:
    """Make a CA and its certificates in ``folder``; skips the calling test when openssl is missing."""
    import pytest

    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=gpusight test CA",
             "-keyout", str(ca_key), "-out", str(ca))
    server = _signed(folder, "server", "/CN=127.0.0.1", ca, ca_key, "subjectAltName=IP:127.0.0.1,DNS:prometheus.test")
    client = _signed(folder, "client", "/CN=prometheus", ca, ca_key, "extendedKeyUsage=clientAuth")
    rogue_cert, rogue_key = folder / "rogue.pem", folder / "rogue.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=prometheus",
             "-keyout", str(rogue_key), "-out", str(rogue_cert))
    return Pki(ca, *server, *client, rogue_cert, rogue_key)
