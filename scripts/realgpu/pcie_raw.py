"""Raw PCIe byte counters: fields 197 (TX) and 198 (RX) of GPU 0 read every 10 ms, as the driver returns them.

Usage: ``python scripts/realgpu/pcie_raw.py OUT.jsonl SECONDS``. Each line holds the wall time and,
per field, ``[field id, NVML return, value type, value (ullVal), driver timestamp in us]``.
"""

from __future__ import annotations

import json
import sys
import time

import pynvml


def main(argv: list[str]) -> int:
    """Write the readings to the file named on the command line."""
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    end = time.monotonic() + float(argv[2])
    with open(argv[1], "w", encoding="utf-8") as stream:
        while time.monotonic() < end:
            values = pynvml.nvmlDeviceGetFieldValues(handle, [197, 198])
            fields = [[int(v.fieldId), int(v.nvmlReturn), int(v.valueType), int(v.value.ullVal), int(v.timestamp)]
                      for v in values]
            stream.write(json.dumps({"t": time.time(), "fields": fields}) + "\n")
            time.sleep(0.01)
    pynvml.nvmlShutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
