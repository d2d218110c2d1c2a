"""Raw per-process utilization samples from the real driver, to see what one nvmlDeviceGetProcessUtilization call returns.

Usage: ``python scripts/realgpu/procutil_probe.py OUT.jsonl SECONDS``. Every 0.1 s it asks GPU 0 for
the samples newer than the newest seen so far (``"kind": "follow"``), and every second also for
those of the last second (``"kind": "window"``); each call is one JSON line with its wall time and
the samples as ``[pid, timestamp_us, sm, mem]``. Compare with ``nvidia-smi pmon -s u -o T -d 1``.
"""

from __future__ import annotations

import json
import sys
import time

import pynvml


def ask(handle: object, last_seen: int) -> list[list[int]]:
    """Samples newer than ``last_seen`` (microseconds), or none."""
    try:
        samples = pynvml.nvmlDeviceGetProcessUtilization(handle, last_seen)
    except pynvml.NVMLError_NotFound:
        return []
    return [[int(s.pid), int(s.timeStamp), int(s.smUtil), int(s.memUtil)] for s in samples]


def main(argv: list[str]) -> int:
    """Write the calls to the JSON-lines file named on the command line."""
    out, seconds = argv[1], float(argv[2])
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    last_seen = 0
    end = time.monotonic() + seconds
    next_window = time.monotonic() + 1.0
    with open(out, "w", encoding="utf-8") as stream:
        while time.monotonic() < end:
            now = time.time()
            samples = ask(handle, last_seen)
            stream.write(json.dumps({"kind": "follow", "t": now, "last_seen": last_seen, "samples": samples}) + "\n")
            if samples:
                last_seen = max(last_seen, max(s[1] for s in samples))
            if time.monotonic() >= next_window:
                since = int((time.time() - 1.0) * 1e6)
                stream.write(json.dumps({"kind": "window", "t": time.time(), "last_seen": since,
                                         "samples": ask(handle, since)}) + "\n")
                next_window += 1.0
            time.sleep(0.1)
    pynvml.nvmlShutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
