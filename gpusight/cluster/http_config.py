"""``--cluster-config FILE``: how the cluster view reaches Prometheus, in the shape of Prometheus's ``http_config``.

The file is YAML holding the HTTP client settings of a Prometheus scrape config (``basic_auth``, ``authorization``,
the older ``bearer_token``/``bearer_token_file``, ``tls_config``), so a block copied from a working
``prometheus.yml`` works here. Paths are relative to the file's folder, as in Prometheus. Unknown keys are an
error naming the key. Every problem is a :class:`HttpConfigError` whose message is one line naming the file and
the key, never a secret. Password and token files are read again for every request, so a rotated token is
picked up without a restart.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpusight.tls_versions import TLS_VERSIONS

TOP_KEYS = ("basic_auth", "authorization", "bearer_token", "bearer_token_file", "tls_config")
"""The keys of Prometheus's http_config that gpusight reads (follow_redirects, oauth2, proxies are not read)."""

BASIC_AUTH_KEYS = ("username", "password", "password_file")
"""The keys of ``basic_auth``."""

AUTHORIZATION_KEYS = ("type", "credentials", "credentials_file")
"""The keys of ``authorization``."""

TLS_KEYS = ("ca_file", "cert_file", "key_file", "server_name", "insecure_skip_verify", "min_version")
"""The keys of ``tls_config``."""


class HttpConfigError(Exception):
    """The config file cannot be used; ``str(error)`` is one line naming the file and the key, without secrets."""


@dataclass(frozen=True)
class HttpConfig:
    """What the cluster client sends and checks: an Authorization header and a TLS context."""

    authorization: Callable[[], str] | None = None
    """Builds the ``Authorization`` header (reading its files again); raises :class:`HttpConfigError`."""
    tls: ssl.SSLContext | None = None
    """The TLS context for https URLs (None: the system's default CAs)."""
    server_name: str | None = None
    """The name the server's certificate must carry, when it is not the URL's host."""


def load_http_config(path: str) -> HttpConfig:
    """Read and check ``path``; raises :class:`HttpConfigError` with one line on any problem."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HttpConfigError(f"--cluster-config {path}: cannot read it ({_why(exc)})") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise HttpConfigError(f"--cluster-config {path}: not YAML{where}") from None
    return _Reader(path).config({} if document is None else document)


def _why(exc: BaseException) -> str:
    """A short reason for an error reading a file."""
    if isinstance(exc, ssl.SSLError):
        return str(exc.reason).replace("_", " ").lower() if exc.reason else "not a usable PEM file"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return type(exc).__name__


class _Reader:
    """Checks one file's document, naming ``path`` and the key in every error."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.folder = Path(path).parent

    def fail(self, message: str) -> HttpConfigError:
        return HttpConfigError(f"--cluster-config {self.path}: {message}")

    def mapping(self, value: object, where: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"{where or 'the file'} must be a mapping of keys")
        for key in value:
            if key not in allowed:
                raise self.fail(f"unknown key {(where + '.' if where else '') + str(key)!r} "
                                f"(gpusight reads {', '.join(allowed)})")
        return value

    def string(self, block: dict[str, Any], key: str, where: str) -> str | None:
        value = block.get(key)
        if value is not None and not isinstance(value, str):
            raise self.fail(f"{where}.{key} must be a string")
        return value

    def file(self, block: dict[str, Any], key: str, where: str) -> Path | None:
        name = self.string(block, key, where)
        if name is None:
            return None
        path = Path(name).expanduser()
        return path if path.is_absolute() else self.folder / path

    def secret(self, path: Path, where: str) -> str:
        try:
            return path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise self.fail(f"cannot read {where} {path} ({_why(exc)})") from None

    def config(self, document: object) -> HttpConfig:
        top = self.mapping(document, "", TOP_KEYS)
        header = self.authorization(top)
        if header is not None:
            header()  # read the files now, so a missing one is a start-up error
        tls, server_name = self.tls(top.get("tls_config"))
        return HttpConfig(authorization=header, tls=tls, server_name=server_name)

    def authorization(self, top: dict[str, Any]) -> Callable[[], str] | None:
        given = [key for key in ("basic_auth", "authorization", "bearer_token", "bearer_token_file") if key in top]
        if len(given) > 1:
            raise self.fail(f"give one of {' and '.join(given)}, not both")
        if "basic_auth" in top:
            return self.basic_auth(self.mapping(top["basic_auth"], "basic_auth", BASIC_AUTH_KEYS))
        if "authorization" in top:
            block = self.mapping(top["authorization"], "authorization", AUTHORIZATION_KEYS)
            kind = self.string(block, "type", "authorization") or "Bearer"
            if kind.lower() == "basic":
                raise self.fail("authorization.type Basic is not allowed: use basic_auth")
            return self.token(kind, block, "credentials", "credentials_file", "authorization")
        if top.keys() & {"bearer_token", "bearer_token_file"}:
            return self.token("Bearer", top, "bearer_token", "bearer_token_file", "")
        return None

    def basic_auth(self, block: dict[str, Any]) -> Callable[[], str]:
        username = self.string(block, "username", "basic_auth")
        if not username:
            raise self.fail("basic_auth needs a username")
        password = self.string(block, "password", "basic_auth")
        password_file = self.file(block, "password_file", "basic_auth")
        if password is not None and password_file is not None:
            raise self.fail("give basic_auth.password or basic_auth.password_file, not both")

        def header() -> str:
            secret = self.secret(password_file, "basic_auth.password_file") if password_file else password or ""
            return "Basic " + base64.b64encode(f"{username}:{secret}".encode()).decode("ascii")

        return header

    def token(self, kind: str, block: dict[str, Any], inline: str, file: str, where: str) -> Callable[[], str]:
        prefix = f"{where}." if where else ""
        value = self.string(block, inline, where or "the file")
        path = self.file(block, file, where or "the file")
        if value is not None and path is not None:
            raise self.fail(f"give {prefix}{inline} or {prefix}{file}, not both")
        if value is None and path is None:
            raise self.fail(f"{where or 'the token'} needs {prefix}{inline} or {prefix}{file}")
        return lambda: f"{kind} {self.secret(path, prefix + file) if path else value}"

    def tls(self, value: object) -> tuple[ssl.SSLContext | None, str | None]:
        if value is None:
            return None, None
        block = self.mapping(value, "tls_config", TLS_KEYS)
        ca_file = self.file(block, "ca_file", "tls_config")
        cert_file = self.file(block, "cert_file", "tls_config")
        key_file = self.file(block, "key_file", "tls_config")
        if (cert_file is None) != (key_file is None):
            raise self.fail("tls_config needs both cert_file and key_file, or neither")
        skip = block.get("insecure_skip_verify", False)
        if not isinstance(skip, bool):
            raise self.fail("tls_config.insecure_skip_verify must be true or false")
        context = self.context(ca_file)
        if cert_file is not None and key_file is not None:
            try:
                context.load_cert_chain(cert_file, key_file)
            except (OSError, ssl.SSLError) as exc:
                raise self.fail(f"tls_config: cannot load cert_file {cert_file} with key_file {key_file} "
                                f"({_why(exc)})") from None
        version = self.string(block, "min_version", "tls_config")
        if version is not None:
            if version not in TLS_VERSIONS:
                raise self.fail(f"tls_config.min_version must be one of {', '.join(TLS_VERSIONS)}")
            context.minimum_version = TLS_VERSIONS[version]
        if skip:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context, self.string(block, "server_name", "tls_config")

    def context(self, ca_file: Path | None) -> ssl.SSLContext:
        try:
            return ssl.create_default_context(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise self.fail(f"tls_config: cannot load ca_file {ca_file} ({_why(exc)})") from None
