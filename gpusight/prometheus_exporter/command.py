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
    from gpusight.collect.model import Snapshot
    from gpusight.collect.sampler import Sampler

EXIT_SERVE_ERROR = 2
"""Exit status when the exporter cannot start (bad address, port in use, unusable TLS or auth file)."""

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
    group.add_argument("--serve-tls-cert", type=Path, metavar="FILE", help="with --serve: serve HTTPS with this certificate (PEM)")
    group.add_argument("--serve-tls-key", type=Path, metavar="FILE", help="with --serve: the certificate's private key (PEM)")
    group.add_argument("--serve-basic-auth", type=Path, metavar="FILE",
                       help="with --serve: require HTTP basic auth; FILE holds user:password lines and must be open to "
                       "its owner only (chmod 600)")


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors of the exporter's flags (exit 2 through ``parser.error``)."""
    if args.serve is None:
        for flag in ("hostname", "serve_cmdline", "serve_tls_cert", "serve_tls_key", "serve_basic_auth"):
            if getattr(args, flag):
                parser.error(f"--{flag.replace('_', '-')} needs --serve")
        return
    for flag, dest in _CONFLICTS:
        if getattr(args, dest, None) not in (None, False):
            parser.error(f"--serve cannot be combined with {flag}")
    if (args.serve_tls_cert is None) != (args.serve_tls_key is None):
        parser.error("--serve-tls-cert and --serve-tls-key go together")


def serve(sampler: Sampler, args: argparse.Namespace) -> int:
    """Serve ``/metrics`` from ``sampler``'s newest snapshot until SIGTERM or SIGINT; returns the exit status."""
    from gpusight.prometheus_exporter.families import ExportOptions, SnapshotCollector
    from gpusight.prometheus_exporter.server import (
        ExporterServer,
        ServeError,
        exporter_app,
        parse_listen,
        read_credentials,
        tls_context,
    )

    try:
        address = parse_listen(args.serve)
        tls = None if args.serve_tls_cert is None else tls_context(args.serve_tls_cert, args.serve_tls_key)
        credentials = None if args.serve_basic_auth is None else read_credentials(args.serve_basic_auth)
        options = ExportOptions(hostname=args.hostname or socket.gethostname(), cmdline=args.serve_cmdline)
        collector = SnapshotCollector(lambda: _latest(sampler), options)
        server = ExporterServer(address, exporter_app(collector, credentials), tls)
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
