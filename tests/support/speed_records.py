"""Status records that real processes "publish" as ``gpusight.torch`` would: throughput, FLOPs and MFU, the
profiled step-time breakdown, the input wait. A background thread rewrites each record atomically twice a second
(a record older than 10 s is stale), so the monitor reads them exactly as it reads a real trainer's."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import psutil

REWRITE_S = 0.5
"""How often each record is rewritten."""


def speed_record(pid: int, wait: float = 0.02, steps: float = 3.0, speed: Mapping[str, object] | None = None,
                 breakdown: Mapping[str, object] | None = None, **extra: object) -> dict:
    """A valid record of the live process ``pid``: ``wait`` is the input-wait share (0..1), ``speed`` and
    ``breakdown`` the optional sections as the trainer writes them (shares 0..1)."""
    record: dict = {
        "kind": "gpusight.trainer_status",
        "schema": 1,
        "pid": pid,
        "create_time": psutil.Process(pid).create_time(),
        "uid": os.geteuid(),
        "active": True,
        "name": "train",
        "window_seconds": 9.5,
        "steps": round(steps * 9.5),
        "input_wait_fraction": wait,
        "steps_per_second": steps,
        **extra,
    }
    if speed is not None:
        record["speed"] = dict(speed)
    if breakdown is not None:
        record["breakdown"] = dict(breakdown)
    return record


@contextmanager
def published(runtime: Path, records: Mapping[int, dict]) -> Iterator[dict[str, str]]:
    """Keep ``records`` (pid -> record) fresh under ``runtime/gpusight`` while the block runs; yields the
    environment (``XDG_RUNTIME_DIR``) under which the monitor finds them."""
    folder = runtime / "gpusight"
    folder.mkdir(parents=True, mode=0o700, exist_ok=True)
    runtime.chmod(0o700)
    done = threading.Event()

    def write_all() -> None:
        for pid, record in records.items():
            temporary = folder / f".{pid}.tmp"
            temporary.write_text(json.dumps({**record, "updated_at": time.time()}))
            os.replace(temporary, folder / f"{pid}.json")

    def keep_fresh() -> None:
        while not done.wait(REWRITE_S):
            write_all()

    write_all()
    thread = threading.Thread(target=keep_fresh, daemon=True)
    thread.start()
    try:
        yield dict(os.environ, XDG_RUNTIME_DIR=str(runtime))
    finally:
        done.set()
        thread.join()
