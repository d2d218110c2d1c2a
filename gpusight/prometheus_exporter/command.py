"""``gpusight --serve [ADDR:]PORT``: its command-line flags and its run loop (headless, until SIGTERM/SIGINT).

prometheus_client and the server are imported only when ``--serve`` runs, so other commands start as fast as before.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpusight.sampling.sampler import Sampler
    from gpusight.snapshot.model import Snapshot

EXIT_SERVE_ERROR = 2
"""Exit status when the exporter cannot start (bad address, port in use, unusable TLS files or web config)."""

_CONFLICTS = (("--once", "once"), ("--json", "json"), ("--check", "check"), ("--duration", "duration"),
              ("--export", "export"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--serve`` and its options to ``parser``."""
    group = parser.add_argument_group("Prometheus exporter (docs/exporter.md)")
    group.add_argument(
        "--serve", metavar="[ADDR:]PORT",
        help="run headless and serve the latest snapshot as Prometheus metrics on /metrics (dcgm-exporter's names "
        "for the GPUs, gpusight_* for jobs, processes and advice); listens on 127.0.0.1 unless ADDR is given "
        "(0.0.0.0:9400, [::1]:9400)",
    )
    group.add_argument("--hostname", metavar="NAME",
                       help="with --serve: the Hostname label of every series (default: this host's name; "
                       "on Kubernetes e.g. --hostname $(NODE_NAME))")
    group.add_argument("--serve-cmdline", action="store_true",
                       help="with --serve: add each process's command line (cut to 200 characters) as a `command` "
                       "label; off by default because command lines hold tokens and paths")
    group.add_argument("--serve-web-config", type=Path, metavar="FILE",
                       help="with --serve: TLS, response headers and basic auth users with bcrypt hashes, in the "
                       "web-config.yml format of node_exporter and the Prometheus exporter-toolkit "
                       "(tls_server_config, http_server_config, basic_auth_users)")
    group.add_argument("--serve-tls-cert", type=Path, metavar="FILE",
                       help="with --serve: serve HTTPS with this certificate (PEM); short for a web config's "
                       "tls_server_config cert_file")
    group.add_argument("--serve-tls-key", type=Path, metavar="FILE",
                       help="with --serve: the certificate's private key (PEM); tls_server_config key_file")
    group.add_argument("--serve-basic-auth", type=Path, metavar="FILE",
                       help="removed: plaintext passwords; give bcrypt hashes in --serve-web-config's basic_auth_users")


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors of the exporter's flags (exit 2 through ``parser.error``)."""
    if args.serve is None:
        for flag in ("hostname", "serve_cmdline", "serve_web_config", "serve_tls_cert", "serve_tls_key",
                     "serve_basic_auth"):
            if getattr(args, flag):
                parser.error(f"--{flag.replace('_', '-')} needs --serve")
        return
    for flag, dest in _CONFLICTS:
        if getattr(args, dest, None) not in (None, False):
            parser.error(f"--serve cannot be combined with {flag}")
    if args.serve_basic_auth is not None:
        parser.error("--serve-basic-auth (a file of plaintext passwords) was replaced by --serve-web-config FILE, whose "
                     "basic_auth_users hold bcrypt hashes (docs/exporter.md)")
    if (args.serve_tls_cert is None) != (args.serve_tls_key is None):
        parser.error("--serve-tls-cert and --serve-tls-key go together")
    if args.serve_web_config is not None and args.serve_tls_cert is not None:
        parser.error("--serve-web-config cannot be combined with --serve-tls-cert/--serve-tls-key: "
                     "put cert_file and key_file in its tls_server_config")


def serve(sampler: Sampler, args: argparse.Namespace) -> int:
    """Serve ``/metrics`` from ``sampler``'s newest snapshot until SIGTERM or SIGINT; returns the exit status."""
    from gpusight.prometheus_exporter.basic_auth import BcryptUsers
    from gpusight.prometheus_exporter.families import ExportOptions, SnapshotCollector
    from gpusight.prometheus_exporter.server import ExporterServer, ServeError, exporter_app, parse_listen
    from gpusight.prometheus_exporter.web_config import WebConfig, load_web_config, tls_context

    try:
        address = parse_listen(args.serve)
        if args.serve_web_config is not None:
            web = load_web_config(args.serve_web_config)
        else:
            web = WebConfig(tls=None if args.serve_tls_cert is None else tls_context(args.serve_tls_cert,
                                                                                     args.serve_tls_key))
        options = ExportOptions(hostname=args.hostname or socket.gethostname(), cmdline=args.serve_cmdline)
        collector = SnapshotCollector(lambda: _latest(sampler), options)
        users = None if web.users is None else BcryptUsers(web.users)
        server = ExporterServer(address, exporter_app(collector, users, web.headers), web.tls)
    except ServeError as exc:
        print(f"gpusight: {exc}", file=sys.stderr)
        return EXIT_SERVE_ERROR
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stop.set())
    sampler.start()
    threading.Thread(target=server.serve_forever, name="gpusight-exporter", daemon=True).start()
    print(f"gpusight: serving {server.url}/metrics every {sampler.interval:g} s; stop with Ctrl-C or SIGTERM",
          file=sys.stderr, flush=True)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


def _latest(sampler: Sampler) -> Snapshot | None:
    """The sampler's newest snapshot (None before the first poll): an attribute read, never a poll."""
    frame = sampler.latest_frame
    return None if frame is None else frame.snapshot
