"""``gpusight --cluster URL --cluster-config FILE`` against a real Prometheus behind its own TLS and auth front.

Prometheus 2.42 serves its API through ``--web.config.file`` (the exporter-toolkit format): TLS with a certificate
from a test CA made here with the openssl command, basic auth users with bcrypt hashes, and in one server a client
certificate it requires. Prometheus cannot check bearer tokens, so a small real proxy in front of it does. Every
case runs the real binary; failures are one line, secrets never appear in any output.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import urllib.request
from pathlib import Path

import bcrypt
import pytest

from support.auth_proxy import AuthProxy
from support.exposition import ExpositionServer
from support.pki import make_pki
from support.prometheus import PrometheusServer, Target, require_prometheus

REPO = Path(__file__).resolve().parents[1]
DCGM_SAMPLE = REPO / "tests" / "data" / "cluster" / "dcgm-exporter-3.3.txt"
PASSWORD = "pa55-w0rd-XyZ"
TOKEN = "t0ken-QwErTy-123"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "gpusight", "--cluster", *args], capture_output=True, text=True,
                          env=env, timeout=60, check=False)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """A test CA (ca.pem), a server certificate for 127.0.0.1 and prometheus.test (server.pem), a client certificate
    (client.pem) and a self-signed one no server trusts (rogue.pem), with the password and token files."""
    folder = tmp_path_factory.mktemp("pki")
    make_pki(folder)
    (folder / "password").write_text(PASSWORD + "\n")
    (folder / "token").write_text(TOKEN + "\n")
    return folder


def checks(pki: Path, client_cert: bool) -> ssl.SSLContext:
    """The TLS context the fixture's readiness checks use."""
    context = ssl.create_default_context(cafile=pki / "ca.pem")
    if client_cert:
        context.load_cert_chain(pki / "client.pem", pki / "client.key")
    return context


def front(pki: Path, targets: list[Target], *, client_cert: bool) -> PrometheusServer:
    """A Prometheus serving TLS with basic auth (user gpusight), or TLS requiring a client certificate."""
    tls: dict[str, object] = {"cert_file": str(pki / "server.pem"), "key_file": str(pki / "server.key")}
    web: dict[str, object] = {"tls_server_config": tls}
    headers = {}
    if client_cert:
        tls.update(client_auth_type="RequireAndVerifyClientCert", client_ca_file=str(pki / "ca.pem"))
    else:
        web["basic_auth_users"] = {"gpusight": bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(10)).decode()}
        headers["Authorization"] = "Basic " + base64.b64encode(f"gpusight:{PASSWORD}".encode()).decode()
    return PrometheusServer(targets, web_config=web, check_tls=checks(pki, client_cert), check_headers=headers)


@pytest.fixture(scope="module")
def exporter():
    """dcgm-exporter's output of one node, as the fronted Prometheus servers' target."""
    require_prometheus()
    sample = DCGM_SAMPLE.read_bytes()
    server = ExpositionServer({"/metrics": lambda: sample})
    yield [Target(server.address, "/metrics", "10.0.0.1:9400")]
    server.close()


@pytest.fixture(scope="module")
def basic(pki, exporter):
    with front(pki, exporter, client_cert=False) as prometheus:
        yield prometheus


@pytest.fixture(scope="module")
def mutual(pki, exporter):
    with front(pki, exporter, client_cert=True) as prometheus:
        yield prometheus


def config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cluster.yml"
    path.write_text(text)
    return str(path)


def works(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "dgx-a100-01" in result.stdout
    for secret in (PASSWORD, TOKEN):
        assert secret not in result.stdout
    return result.stdout


def one_line(result: subprocess.CompletedProcess[str], status: int = 1) -> str:
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpusight: "), lines
    for secret in (PASSWORD, TOKEN):
        assert secret not in result.stderr + result.stdout
    return lines[0]


def test_ca_verified_tls_and_basic_auth_from_a_password_file(basic, pki, tmp_path):
    # relative paths are relative to the config file's folder, as in Prometheus
    shutil.copy(pki / "password", tmp_path / "password")
    path = config(tmp_path, f"basic_auth:\n  username: gpusight\n  password_file: password\n"
                            f"tls_config:\n  ca_file: {pki / 'ca.pem'}\n  min_version: TLS12\n")
    works(run_cli(basic.url, "--cluster-config", path, "--once"))
    frame = run_cli(basic.url, "--cluster-config", path, "--json")
    assert frame.returncode == 0 and PASSWORD not in frame.stdout
    assert json.loads(frame.stdout)["nodes"]


def test_the_certificate_checked_against_server_name(basic, pki, tmp_path):
    path = config(tmp_path, f"basic_auth: {{username: gpusight, password_file: {pki / 'password'}}}\n"
                            f"tls_config: {{ca_file: {pki / 'ca.pem'}, server_name: prometheus.test}}\n")
    works(run_cli(basic.url, "--cluster-config", path, "--once"))


def test_a_server_signed_by_another_ca_is_refused(basic, pki, tmp_path):
    path = config(tmp_path, f"basic_auth: {{username: gpusight, password_file: {pki / 'password'}}}\n"
                            f"tls_config: {{ca_file: {pki / 'rogue.pem'}}}\n")
    line = one_line(run_cli(basic.url, "--cluster-config", path, "--once"))
    assert line == f"gpusight: cannot reach Prometheus at {basic.url}: TLS failed (CERTIFICATE_VERIFY_FAILED)"


def test_insecure_skip_verify_accepts_it(basic, pki, tmp_path):
    path = config(tmp_path, f"basic_auth: {{username: gpusight, password_file: {pki / 'password'}}}\n"
                            "tls_config: {insecure_skip_verify: true}\n")
    works(run_cli(basic.url, "--cluster-config", path, "--once"))


def test_missing_and_wrong_credentials_are_the_401_line(basic, pki, tmp_path):
    tls = f"tls_config: {{ca_file: {pki / 'ca.pem'}}}\n"
    missing = one_line(run_cli(basic.url, "--cluster-config", config(tmp_path, tls), "--once"))
    assert missing == f"gpusight: Prometheus at {basic.url} refused access (HTTP 401): " \
                      "give credentials with --cluster-config FILE (see docs/cluster.md)"
    wrong = config(tmp_path, tls + "basic_auth: {username: gpusight, password: not-it}\n")
    assert one_line(run_cli(basic.url, "--cluster-config", wrong, "--once")) == \
        f"gpusight: Prometheus at {basic.url} refused access (HTTP 401): the credentials given were not accepted"


def test_a_required_client_certificate(mutual, pki, tmp_path):
    ca = f"tls_config:\n  ca_file: {pki / 'ca.pem'}\n"
    given = config(tmp_path, ca + f"  cert_file: {pki / 'client.pem'}\n  key_file: {pki / 'client.key'}\n")
    works(run_cli(mutual.url, "--cluster-config", given, "--once"))
    (tmp_path / "bare").mkdir()
    refused = one_line(run_cli(mutual.url, "--cluster-config", config(tmp_path / "bare", ca), "--once"))
    assert refused.startswith(f"gpusight: cannot reach Prometheus at {mutual.url}: "), refused


def test_a_bearer_token_from_a_file_reaches_the_proxy(basic, pki, tmp_path):
    """An OAuth-style proxy checks the token and forwards to the real Prometheus with its own credentials."""
    upstream = checks(pki, client_cert=False)
    inner = "Basic " + base64.b64encode(f"gpusight:{PASSWORD}".encode()).decode()

    def forward(path: str, authorization: str | None) -> tuple[int, bytes]:
        if authorization != f"Bearer {TOKEN}":
            return 401, b"Unauthorized"
        request = urllib.request.Request(basic.url + path, headers={"Authorization": inner})
        with urllib.request.urlopen(request, timeout=5, context=upstream) as answer:
            return 200, answer.read()

    proxy = AuthProxy(forward)
    try:
        url = f"http://{proxy.address}"
        works(run_cli(url, "--cluster-config", config(tmp_path, f"authorization:\n  credentials_file: {pki / 'token'}\n"),
                      "--once"))
        works(run_cli(url, "--cluster-config", config(tmp_path, f"bearer_token_file: {pki / 'token'}\n"), "--once"))
        refused = one_line(run_cli(url, "--cluster-config", config(tmp_path, "authorization: {credentials: nope}\n"),
                                   "--once"))
    finally:
        proxy.close()
    assert refused.endswith("refused access (HTTP 401): the credentials given were not accepted")


@pytest.mark.parametrize(("text", "expected"), [
    (None, "cannot read it (No such file or directory)"),
    ("basic_auth: [unclosed\n", "not YAML at line"),
    ("oauth2: {client_id: x}\n", "unknown key 'oauth2'"),
    ("tls_config: {ca_file: ca.pem, verify: false}\n", "unknown key 'tls_config.verify'"),
    ("basic_auth: {username: u, password: 12345}\n", "basic_auth.password must be a string"),
    ("basic_auth: {username: u, password_file: nowhere}\n", "cannot read basic_auth.password_file"),
    (f"basic_auth: {{username: u, password: {PASSWORD}}}\nauthorization: {{credentials: {TOKEN}}}\n",
     "give one of basic_auth and authorization, not both"),
    ("tls_config: {cert_file: /etc/hostname, key_file: /etc/hostname}\n", "cannot load cert_file /etc/hostname"),
    ("tls_config: {ca_file: /etc/hostname}\n", "cannot load ca_file /etc/hostname"),
    ("tls_config: {min_version: TLS9}\n", "tls_config.min_version must be one of TLS10"),
    ("tls_config: {insecure_skip_verify: maybe}\n", "insecure_skip_verify must be true or false"),
    ("- a list\n", "the file must be a mapping of keys"),
])
def test_a_bad_config_file_is_one_line_and_exit_2(tmp_path, text, expected):
    path = str(tmp_path / "missing.yml") if text is None else config(tmp_path, text)
    line = one_line(run_cli("https://127.0.0.1:9", "--cluster-config", path, "--once"), status=2)
    assert line.startswith(f"gpusight: --cluster-config {path}: ") and expected in line, line


def test_usage_errors(tmp_path):
    path = config(tmp_path, "basic_auth: {username: u, password: p}\n")
    both = run_cli("https://user:secret@127.0.0.1:9", "--cluster-config", path, "--once")
    assert both.returncode == 2 and "in the --cluster URL or in --cluster-config, not both" in both.stderr
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    alone = subprocess.run([sys.executable, "-m", "gpusight", "--cluster-config", path, "--once"], capture_output=True,
                           text=True, env=env, timeout=60, check=False)
    assert alone.returncode == 2 and "--cluster-config needs --cluster URL" in alone.stderr
