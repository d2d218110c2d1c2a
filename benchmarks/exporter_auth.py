"""What bcrypt basic auth (``--serve-web-config``'s ``basic_auth_users``) costs a scrape of ``gpusight --serve --demo``.

Times, as the scraper sees them: the first scrape with the right password (a bcrypt check), later ones (remembered),
scrapes with a wrong password (a bcrypt check each time), and scrapes of the same exporter without auth. Prints a
Markdown section; ``--results FILE`` appends it to FILE::

    python benchmarks/exporter_auth.py --results benchmarks/RESULTS-exporter.md
"""

from __future__ import annotations

import argparse
import base64
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import bcrypt

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from support.exporter import RunningExporter, serving  # noqa: E402


def _ms(running: RunningExporter, password: bytes | None) -> float:
    headers = {} if password is None else {
        "Authorization": "Basic " + base64.b64encode(b"prometheus:" + password).decode()}
    start = time.perf_counter()
    running.get(headers=headers)
    return (time.perf_counter() - start) * 1000


def main(argv: list[str] | None = None) -> int:
    """Measure and print (and optionally append) the section."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cost", type=int, default=10, help="bcrypt cost of the hash (default 10, as htpasswd -B)")
    parser.add_argument("--scrapes", type=int, default=20, help="scrapes timed per kind (default 20)")
    parser.add_argument("--results", type=Path, help="also append the section to this Markdown file")
    args = parser.parse_args(argv)
    config = Path(tempfile.mkdtemp(prefix="gpusight-auth-")) / "web-config.yml"
    config.write_text(f"basic_auth_users:\n  prometheus: {bcrypt.hashpw(b'pw', bcrypt.gensalt(args.cost)).decode()}\n")
    with serving(["--demo", "--serve-web-config", str(config)]) as running:
        running.get("/")  # the first answer warms the process up
        first = _ms(running, b"pw")
        cached = statistics.median(_ms(running, b"pw") for _ in range(args.scrapes))
        wrong = statistics.median(_ms(running, b"guess") for _ in range(args.scrapes))
    with serving(["--demo"]) as running:
        running.get("/")
        plain = statistics.median(_ms(running, None) for _ in range(args.scrapes))
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = (f"\n## bcrypt basic auth: what a scrape costs\n\nWritten by `python benchmarks/exporter_auth.py --cost "
            f"{args.cost} --scrapes {args.scrapes}` on {when} ({platform.machine()}, {os.cpu_count()} logical CPUs, "
            f"load average {os.getloadavg()[0]:.2f}). Wall time of one `/metrics` scrape as the scraper sees it.\n\n"
            "| first, right password | later, right password (median) | wrong password (median) | no auth (median) |\n"
            "|---|---|---|---|\n"
            f"| {first:.1f} ms | {cached:.1f} ms | {wrong:.1f} ms | {plain:.1f} ms |\n")
    print(text)
    if args.results is not None:
        with args.results.open("a", encoding="utf-8") as out:
            out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
