"""``--serve-web-config FILE``: the Prometheus exporter-toolkit's ``web-config.yml`` (TLS, headers, bcrypt users).

The format node_exporter and every exporter built on github.com/prometheus/exporter-toolkit read with
``--web.config.file`` (its docs/web-configuration.md): ``tls_server_config``, ``http_server_config`` and
``basic_auth_users``. Relative file names are taken from the config file's folder. A key gpusight does not know, a
setting Python's ``ssl`` cannot honour, or a password that is not a bcrypt hash is refused with one line naming it.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpusight.prometheus_exporter.server import ServeError
from gpusight.tls_versions import TLS_VERSIONS

CLIENT_AUTH = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
               "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
"""``client_auth_type`` values Python's ``ssl`` can honour: it cannot ask for a certificate without verifying it,
so Go's ``RequestClientCert`` and ``RequireAnyClientCert`` (which the toolkit itself calls insecure) are refused."""

HEADER_VALUES: dict[str, tuple[str, ...] | None] = {
    "Content-Security-Policy": None, "X-Frame-Options": ("deny", "sameorigin"), "X-Content-Type-Options": ("nosniff",),
    "X-XSS-Protection": None, "Strict-Transport-Security": None}
"""The response headers ``http_server_config.headers`` may set, and the values allowed where the toolkit limits them."""

BCRYPT_HASH = re.compile(r"\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}")
"""A bcrypt hash as ``htpasswd -B`` ($2y$) or Python's bcrypt ($2b$) writes it."""

_KEYS = {
    "": {"tls_server_config", "http_server_config", "basic_auth_users"},
    "tls_server_config": {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version",
                          "cipher_suites", "prefer_server_cipher_suites", "curve_preferences", "cert", "key",
                          "client_ca", "client_allowed_sans"},
    "http_server_config": {"http2", "headers"},
}
_UNSUPPORTED = {"cipher_suites": "Go's cipher suite names (gpusight uses OpenSSL's TLS 1.2 defaults; leave it out)",
                "curve_preferences": "Go's curve names (leave it out)",
                "cert": "inline certificates (use cert_file)", "key": "inline keys (use key_file)",
                "client_ca": "an inline client CA (use client_ca_file)",
                "client_allowed_sans": "client_allowed_sans (use a client CA that signs only allowed clients)"}


@dataclass(frozen=True)
class WebConfig:
    """What the exporter's HTTP server is asked for: TLS, extra response headers and bcrypt users."""

    tls: ssl.SSLContext | None = None
    """The server's TLS context; None serves plain HTTP."""
    headers: tuple[tuple[str, str], ...] = ()
    """Headers added to every response."""
    users: dict[bytes, bytes] | None = None
    """User name -> bcrypt hash; None when no basic auth is asked for."""


def tls_context(cert: Path, key: Path, minimum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2,
                maximum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3) -> ssl.SSLContext:
    """A server TLS context with ``cert`` and ``key`` between ``minimum`` and ``maximum``; ServeError when they
    cannot be loaded."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version, context.maximum_version = minimum, maximum
    try:
        context.load_cert_chain(certfile=cert, keyfile=key)
    except OSError as exc:  # ssl.SSLError included
        raise ServeError(f"cannot load the TLS certificate {cert} with key {key}: {_reason(exc)}") from None
    return context


def load_web_config(path: Path) -> WebConfig:
    """Read ``path`` in the exporter-toolkit's web-config.yml format; ServeError (one line) when it is unusable."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ServeError(f"cannot read the web config {path}: {_reason(exc)}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ServeError(f"the web config {path} is not valid YAML{where}") from None
    top = _mapping(path, "", {} if document is None else document)
    tls_section = _mapping(path, "tls_server_config", top.get("tls_server_config") or {})
    http_section = _mapping(path, "http_server_config", top.get("http_server_config") or {})
    return WebConfig(tls=_tls(path, tls_section) if tls_section else None,
                     headers=_headers(path, _mapping(path, "headers", http_section.get("headers") or {})),
                     users=_users(path, top.get("basic_auth_users")))


def _mapping(path: Path, section: str, value: object) -> dict[str, Any]:
    """``value`` as a mapping with only known keys (for the sections ``_KEYS`` lists)."""
    where = section or "the top level"
    if not isinstance(value, dict):
        raise ServeError(f"the web config {path}: {where} must be a mapping")
    allowed = _KEYS.get(section)
    for key in value:
        if allowed is not None and key not in allowed:
            inside = f" in {section}" if section else ""
            raise ServeError(f"the web config {path}: unknown key {key!r}{inside}")
        if key in _UNSUPPORTED and value[key] not in (None, [], ""):
            raise ServeError(f"the web config {path}: {section}.{key} is not supported: gpusight does not take "
                             f"{_UNSUPPORTED[key]}")
    return value


def _tls(path: Path, section: dict[str, Any]) -> ssl.SSLContext:
    """The TLS context ``tls_server_config`` describes."""
    if not section.get("cert_file") or not section.get("key_file"):
        raise ServeError(f"the web config {path}: tls_server_config needs cert_file and key_file")
    versions = [_version(path, section, name, default) for name, default in (("min_version", "TLS12"),
                                                                            ("max_version", "TLS13"))]
    context = tls_context(_file(path, section["cert_file"]), _file(path, section["key_file"]), *versions)
    auth = section.get("client_auth_type") or "NoClientCert"
    if auth not in CLIENT_AUTH:
        raise ServeError(f"the web config {path}: client_auth_type {auth!r} is not supported; gpusight takes "
                         + ", ".join(CLIENT_AUTH) + " (Python's ssl verifies every client certificate it asks for)")
    ca_file = section.get("client_ca_file")
    if (auth == "NoClientCert") != (not ca_file):
        raise ServeError(f"the web config {path}: client_ca_file goes with a client_auth_type that verifies "
                         "client certificates (VerifyClientCertIfGiven or RequireAndVerifyClientCert)")
    if ca_file:
        try:
            context.load_verify_locations(cafile=_file(path, ca_file))
        except OSError as exc:
            raise ServeError(f"cannot load the client CA {_file(path, ca_file)}: {_reason(exc)}") from None
        context.verify_mode = CLIENT_AUTH[auth]
    if section.get("prefer_server_cipher_suites", True) is not False:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    return context


def _version(path: Path, section: dict[str, Any], name: str, default: str) -> ssl.TLSVersion:
    value = section.get(name) or default
    if value not in TLS_VERSIONS:
        raise ServeError(f"the web config {path}: {name} {value!r} is not one of {', '.join(TLS_VERSIONS)}")
    return TLS_VERSIONS[value]


def _headers(path: Path, section: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """``http_server_config.headers`` as (name, value) pairs; a blank value leaves the header unset."""
    pairs = []
    for name, value in section.items():
        if name not in HEADER_VALUES:
            raise ServeError(f"the web config {path}: http_server_config.headers cannot set {name!r}; it sets "
                             + ", ".join(HEADER_VALUES))
        text = "" if value is None else str(value)
        allowed = HEADER_VALUES[name]
        if text and allowed is not None and text.lower() not in allowed:
            raise ServeError(f"the web config {path}: {name} must be one of {', '.join(allowed)}, not {text!r}")
        if any(ord(c) < 32 or ord(c) == 127 for c in text):
            raise ServeError(f"the web config {path}: the {name} header holds a control character")
        if text:
            pairs.append((name, text))
    return tuple(pairs)


def _users(path: Path, section: object) -> dict[bytes, bytes] | None:
    """``basic_auth_users`` as user -> bcrypt hash; a value that is not a bcrypt hash is refused."""
    if not section:
        return None
    if not isinstance(section, dict):
        raise ServeError(f"the web config {path}: basic_auth_users must map user names to bcrypt hashes")
    users = {}
    for user, hashed in section.items():
        if not isinstance(hashed, str) or not BCRYPT_HASH.fullmatch(hashed):
            raise ServeError(f"the web config {path}: the password of user {str(user)!r} is not a bcrypt hash "
                             "(make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n')")
        users[str(user).encode()] = hashed.encode()
    return users


def _file(path: Path, name: object) -> Path:
    """``name`` taken relative to the config file's folder."""
    return path.parent / str(name)


def _reason(exc: OSError | UnicodeDecodeError) -> str:
    return str(getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc)
