"""``gpusight --serve --serve-web-config FILE``, for real: the exporter-toolkit's web-config.yml with TLS, client
certificates, headers and bcrypt users (hashed by Python's bcrypt and by ``htpasswd -B``), a real Prometheus scraping
through TLS and basic auth, and every bad config refused in one line."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from base64 import b64encode
from pathlib import Path

import bcrypt
import pytest

from gpusight import metric_names as names
from support.exporter import serving
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env
from support.pki import Pki, make_pki
from support.prometheus import PrometheusServer, Target, require_prometheus

PASSWORD = "correct horse battery staple"
"""Prometheus's password in these tests."""


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A test CA, a server certificate for 127.0.0.1 and client certificates."""
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def env(tmp_path: Path, fake_nvml_lib: Path) -> dict[str, str]:
    """The fake NVML with one GPU."""
    return fake_nvml_env(fake_nvml_lib, FakeScenario(gpus=[FakeGpu()]).write(tmp_path / "scenario.txt"))


def _bcrypt(password: str) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10)).decode()


def _auth(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + b64encode(f"{user}:{password}".encode()).decode()}


def _web_config(folder: Path, text: str) -> Path:
    path = folder / "web-config.yml"
    path.write_text(text)
    return path


def _tls_section(pki: Pki, extra: str = "") -> str:
    """A tls_server_config with the server's files named relative to the config's folder (they are copied there)."""
    return (f"tls_server_config:\n  cert_file: {pki.server_cert.name}\n  key_file: {pki.server_key.name}\n"
            f"  min_version: TLS12\n{extra}")


def _copy_server_files(pki: Pki, folder: Path) -> None:
    for path in (pki.server_cert, pki.server_key, pki.ca):
        shutil.copy(path, folder / path.name)


def _trust(pki: Pki, client: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca))
    if client is not None:
        context.load_cert_chain(*map(str, client))
    return context


def test_bcrypt_users_over_verified_tls_with_headers(env, tmp_path: Path, pki: Pki) -> None:
    _copy_server_files(pki, tmp_path)
    htpasswd_style = _bcrypt("other").replace("$2b$", "$2y$", 1)  # the prefix htpasswd -B writes
    config = _web_config(tmp_path, _tls_section(pki) + "http_server_config:\n  http2: true\n  headers:\n"
                         "    X-Frame-Options: deny\n    X-Content-Type-Options: nosniff\n"
                         f"basic_auth_users:\n  prometheus: {_bcrypt(PASSWORD)}\n  grafana: '{htpasswd_style}'\n")
    config.chmod(0o644)  # hashes, not passwords: readable by others, as the exporter-toolkit allows
    trust = _trust(pki)
    with serving(["--serve-web-config", str(config)], env) as running:
        assert running.url.startswith("https://127.0.0.1:")
        status, headers, _ = running.get(context=trust)
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
        assert headers["X-Frame-Options"] == "deny" and headers["X-Content-Type-Options"] == "nosniff"
        assert running.get(headers=_auth("prometheus", "wrong"), context=trust)[0] == 401
        assert running.get(headers=_auth("nobody", PASSWORD), context=trust)[0] == 401
        assert running.get(headers=_auth("grafana", PASSWORD), context=trust)[0] == 401
        for _ in range(2):  # checked by bcrypt, then remembered
            text = running.scrape(context=trust, headers=_auth("prometheus", PASSWORD))
            assert names.BUILD_INFO.name in text
        assert running.get("/", headers=_auth("grafana", "other"), context=trust)[0] == 200
        assert running.get(headers=_auth("prometheus", PASSWORD + "x"), context=trust)[0] == 401
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):  # trusting the system CAs only
            urllib.request.urlopen(running.url + "/metrics", timeout=10, context=ssl.create_default_context())


def test_a_flood_of_wrong_passwords_waits_its_turn_while_a_remembered_scraper_is_served(env, tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=12)).decode()  # about 0.3 s a check
    config = _web_config(tmp_path, f"basic_auth_users:\n  prometheus: {hashed}\n")
    with serving(["--serve-web-config", str(config)], env) as running:
        running.scrape(headers=_auth("prometheus", PASSWORD))  # checked once, then remembered
        statuses: list[int] = []

        def guess(number: int) -> None:
            statuses.append(running.get(headers=_auth("prometheus", f"guess-{number}"), timeout=60)[0])

        flood = [threading.Thread(target=guess, args=(n,)) for n in range(40)]
        for thread in flood:
            thread.start()
        try:
            time.sleep(1)
            for _ in range(3):  # while the flood waits for its bcrypt turns
                assert names.BUILD_INFO.name in running.scrape(headers=_auth("prometheus", PASSWORD))
        finally:
            for thread in flood:
                thread.join()
    assert set(statuses) == {401, 503}, sorted(statuses)  # checked one at a time: the latecomers are turned away


def test_a_hash_made_by_htpasswd(env, tmp_path: Path) -> None:
    htpasswd = shutil.which("htpasswd")
    if htpasswd is None:
        pytest.skip("htpasswd (apache2-utils) is not installed")
    line = subprocess.run([htpasswd, "-nbBC", "10", "prometheus", PASSWORD], capture_output=True, text=True,
                          check=True).stdout.strip()
    user, hashed = line.split(":", 1)
    assert hashed.startswith("$2y$")
    config = _web_config(tmp_path, f"basic_auth_users:\n  {user}: '{hashed}'\n")
    with serving(["--serve-web-config", str(config)], env) as running:
        assert running.get()[0] == 401
        assert running.get(headers=_auth("prometheus", "wrong"))[0] == 401
        assert names.BUILD_INFO.name in running.scrape(headers=_auth("prometheus", PASSWORD))


@pytest.mark.parametrize("auth_type", ["RequireAndVerifyClientCert", "VerifyClientCertIfGiven"])
def test_client_certificates(env, tmp_path: Path, pki: Pki, auth_type: str) -> None:
    _copy_server_files(pki, tmp_path)
    config = _web_config(tmp_path, _tls_section(pki, f"  client_auth_type: {auth_type}\n"
                                                     f"  client_ca_file: {pki.ca.name}\n"))
    with serving(["--serve-web-config", str(config)], env) as running:
        text = running.scrape(context=_trust(pki, (pki.client_cert, pki.client_key)))
        assert names.BUILD_INFO.name in text
        for client in ((pki.rogue_cert, pki.rogue_key), None):
            if client is None and auth_type == "VerifyClientCertIfGiven":
                assert names.BUILD_INFO.name in running.scrape(context=_trust(pki))
                continue
            with pytest.raises(OSError):  # the handshake fails (TLS 1.3: on the first read)
                running.get(context=_trust(pki, client))
        running.scrape(context=_trust(pki, (pki.client_cert, pki.client_key)))  # still serving


def test_prometheus_scrapes_through_tls_and_basic_auth(env, tmp_path: Path, pki: Pki) -> None:
    require_prometheus()
    _copy_server_files(pki, tmp_path)
    config = _web_config(tmp_path, _tls_section(pki) + f"basic_auth_users:\n  prometheus: {_bcrypt(PASSWORD)}\n")
    password_file = tmp_path / "prometheus-password"
    password_file.write_text(PASSWORD + "\n")
    with serving(["--serve-web-config", str(config), "--hostname", "tls-node"], env) as running:
        address = running.url[len("https://"):]
        settings: dict[str, object] = {"scheme": "https", "tls_config": {"ca_file": str(pki.ca)},
                                       "basic_auth": {"username": "prometheus", "password_file": str(password_file)}}
        with PrometheusServer([Target(address)], scrape_settings=settings) as prometheus:
            deadline = time.monotonic() + 30
            while True:
                up = _query(prometheus, "up")
                served = _query(prometheus, f'{names.GPU_UTIL.name}{{Hostname="tls-node"}}')
                if (up and up[0]["value"][1] == "1" and served) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert [sample["value"][1] for sample in up] == ["1"], prometheus.log()[-2000:]
            assert served, "no gpusight series arrived through TLS and basic auth"


def _query(prometheus: PrometheusServer, expr: str) -> list[dict[str, object]]:
    url = f"{prometheus.url}/api/v1/query?query={urllib.parse.quote(expr)}"
    with urllib.request.urlopen(url, timeout=5) as answer:
        result: list[dict[str, object]] = json.loads(answer.read())["data"]["result"]
        return result


def test_prometheus_with_a_wrong_password_sees_the_target_down(env, tmp_path: Path, pki: Pki) -> None:
    require_prometheus()
    _copy_server_files(pki, tmp_path)
    config = _web_config(tmp_path, _tls_section(pki) + f"basic_auth_users:\n  prometheus: {_bcrypt(PASSWORD)}\n")
    with serving(["--serve-web-config", str(config)], env) as running:
        address = running.url[len("https://"):]
        settings: dict[str, object] = {"scheme": "https", "tls_config": {"ca_file": str(pki.ca)},
                                       "basic_auth": {"username": "prometheus", "password": "guess"}}
        with PrometheusServer([Target(address)], scrape_settings=settings) as prometheus:
            assert prometheus.target_health() == {address: "down"}


def _fails(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpusight", *argv], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def test_bad_web_configs_are_one_line_and_exit_2(env, tmp_path: Path, pki: Pki) -> None:
    _copy_server_files(pki, tmp_path)
    tls = _tls_section(pki)
    cases = [
        (None, "cannot read the web config"),
        ("tls_server_config: [unclosed\n", "is not valid YAML"),
        ("- a list\n", "the top level must be a mapping"),
        ("basic_auth_user:\n  prometheus: x\n", "unknown key 'basic_auth_user'"),
        (tls + "  cert_fle: x\n", "unknown key 'cert_fle' in tls_server_config"),
        ("basic_auth_users:\n  prometheus: s3cret\n", "the password of user 'prometheus' is not a bcrypt hash"),
        ("tls_server_config:\n  cert_file: server.pem\n  key_file: missing.key\n", "cannot load the TLS certificate"),
        ("tls_server_config:\n  cert_file: server.pem\n", "tls_server_config needs cert_file and key_file"),
        (tls + "  client_auth_type: RequireAnyClientCert\n  client_ca_file: ca.pem\n",
         "client_auth_type 'RequireAnyClientCert' is not supported"),
        (tls + "  client_auth_type: RequireAndVerifyClientCert\n", "client_ca_file goes with a client_auth_type"),
        (tls + "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n", "cipher_suites is not supported"),
        (tls.replace("TLS12", "TLS14"), "min_version 'TLS14' is not one of"),
        ("http_server_config:\n  headers:\n    Set-Cookie: a=b\n", "headers cannot set 'Set-Cookie'"),
        ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", "X-Frame-Options must be one of"),
    ]
    for text, expected in cases:
        config = tmp_path / "missing.yml" if text is None else _web_config(tmp_path, text)
        result = _fails(["--serve", "0", "--serve-web-config", str(config)], env)
        assert result.returncode == 2, (text, result.stderr)
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpusight: ") and expected in lines[0], (text, lines)


@pytest.mark.parametrize(("argv", "expected"), [
    (["--serve", "0", "--serve-web-config", "w.yml", "--serve-tls-cert", "c", "--serve-tls-key", "k"],
     "--serve-web-config cannot be combined with --serve-tls-cert"),
    (["--serve", "0", "--serve-basic-auth", "users"], "replaced by --serve-web-config"),
    (["--serve-web-config", "w.yml"], "--serve-web-config needs --serve"),
])
def test_usage_errors(env, argv: list[str], expected: str) -> None:
    result = _fails(argv, env)
    assert result.returncode == 2 and expected in result.stderr and "Traceback" not in result.stderr
