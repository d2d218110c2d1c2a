"""``gpusight --cluster URL``: its command-line arguments and the one-shot run (``--once``/``--json``).

The TUI path (``--cluster URL`` on a terminal) lives with the cluster UI; both build a :class:`ClusterSource`
from the same arguments with :func:`source_from_args`.
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from gpusight.cluster.settings import DEFAULT_HISTORY_SECONDS, DEFAULT_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from gpusight.cluster.source import ClusterSource

EXIT_UNREACHABLE = 1
"""Exit status when the server could not be queried (bad URL, unreachable, slow, not Prometheus)."""


def positive_seconds(value: str) -> float:
    """Argparse type: a number of seconds above zero and at most a day."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not 0 < seconds <= 86400:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 86400 seconds, not {value!r}")
    return seconds


EXIT_BAD_CONFIG = 2
"""Exit status when the ``--cluster-config`` file cannot be used (missing, not YAML, an unknown key, a bad key file)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--cluster URL``, ``--cluster-config``, ``--cluster-timeout`` and ``--cluster-history`` to ``parser``."""
    parser.add_argument(
        "--cluster", metavar="URL",
        help="show a fleet of GPU nodes from a Prometheus server (http[s]://HOST:PORT) that scrapes "
        "dcgm-exporter or gpusight --serve; with --once a table, with --json the cluster frame. See docs/cluster.md",
    )
    parser.add_argument(
        "--cluster-config", type=Path, metavar="FILE",
        help="with --cluster: credentials and TLS for Prometheus, in the YAML shape of Prometheus's http_config "
        "(basic_auth, authorization, tls_config); see docs/cluster.md",
    )
    parser.add_argument(
        "--cluster-timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_SECONDS, metavar="SECONDS",
        help=f"with --cluster: how long one query may take (default {DEFAULT_TIMEOUT_SECONDS:g})",
    )
    parser.add_argument(
        "--cluster-history", type=positive_seconds, default=DEFAULT_HISTORY_SECONDS, metavar="SECONDS",
        help=f"with --cluster: how far back charts and fleet advice look (default {DEFAULT_HISTORY_SECONDS:g})",
    )


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse flags that make no sense with ``--cluster`` (a usage error)."""
    for flag, given in (("--demo", args.demo is not None), ("--replay", args.replay is not None),
                        ("--record", args.record is not None), ("--check", args.check),
                        ("--export", args.export is not None), ("--gpus", args.gpus is not None),
                        ("--cuda-visible", args.cuda_visible), ("--user", args.user is not None),
                        ("--serve", getattr(args, "serve", None) is not None)):
        if given:
            parser.error(f"--cluster cannot be combined with {flag}")
    in_url = _url_has_credentials(args.cluster)
    args.cluster_http = None
    if args.cluster_config is not None:
        from gpusight.cluster.http_config import HttpConfigError, load_http_config

        try:
            args.cluster_http = load_http_config(str(args.cluster_config))
        except HttpConfigError as exc:
            parser.exit(EXIT_BAD_CONFIG, f"gpusight: {exc}\n")
        if in_url and args.cluster_http.authorization is not None:
            parser.error("give Prometheus's credentials in the --cluster URL or in --cluster-config, not both")
    if in_url:
        print("gpusight: warning: the --cluster URL holds credentials, which ps and shell history show; "
              "put them in a --cluster-config file instead (basic_auth with a password_file)", file=sys.stderr)


def _url_has_credentials(url: str) -> bool:
    """Whether ``url`` holds ``USER[:PASS]@``."""
    try:
        return urllib.parse.urlsplit(url.strip()).username is not None
    except ValueError:  # the client says what is wrong with the URL
        return False


def source_from_args(args: argparse.Namespace) -> ClusterSource:
    """The cluster source the arguments ask for."""
    from gpusight.cluster.source import ClusterSource

    return ClusterSource(args.cluster, timeout=args.cluster_timeout, history_seconds=args.cluster_history,
                         http_config=getattr(args, "cluster_http", None))


def run_once(args: argparse.Namespace) -> int:
    """Poll once and print the table (or, with ``--json``, the frame); 1 with one line on stderr when unreachable."""
    from gpusight.cluster.render import render_cluster
    from gpusight.cluster.serialize import frame_to_json
    from gpusight.textsafe import safe_text

    source = source_from_args(args)
    frame = source.poll()
    stats = source.last_stats
    if not source.reachable:
        problem = safe_text(frame.problems[0]) if frame.problems else "Prometheus did not answer"
        print(f"gpusight: {problem}", file=sys.stderr)
    elif source.cut_note is not None:
        print(f"gpusight: {safe_text(source.cut_note)}", file=sys.stderr)
    if args.json:
        text = frame_to_json(frame) + "\n"
    elif source.reachable:
        text = render_cluster(frame, requests=stats.requests, fetched=stats.bytes)
    else:
        text = ""
    sys.stdout.write(text)  # a BrokenPipeError is the caller's (gpusight.cli handles it)
    sys.stdout.flush()
    return 0 if source.reachable else EXIT_UNREACHABLE
