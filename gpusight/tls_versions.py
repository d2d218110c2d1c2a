"""TLS version names as Prometheus's configs spell them, shared by ``--cluster-config`` (``tls_config``) and
``--serve-web-config`` (``tls_server_config``)."""

from __future__ import annotations

import ssl

TLS_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1, "TLS12": ssl.TLSVersion.TLSv1_2,
                "TLS13": ssl.TLSVersion.TLSv1_3}
"""``min_version``/``max_version`` values -> the ssl module's versions."""
