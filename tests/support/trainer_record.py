"""A live process that publishes a trainer status record with speed and breakdown sections, as ``gpusight.torch`` does.

The child writes ``$XDG_RUNTIME_DIR/gpusight/<its pid>.json`` atomically every 0.3 s (a record goes stale after
10 s) with the layout of ``gpusight.backends.host.trainer_status``, written out here by hand so a test does not trust
the code under test. It exits when its parent does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_SOURCE = r"""
import json, os, sys, time
import psutil

folder, extra = sys.argv[1], json.loads(sys.argv[2])
parent = os.getppid()
me = psutil.Process()
while os.getppid() == parent:
    record = {"kind": "gpusight.trainer_status", "schema": 1, "pid": me.pid, "create_time": me.create_time(),
              "uid": os.geteuid(), "updated_at": time.time(), "active": True, "name": "train", **extra}
    path = os.path.join(folder, f"{me.pid}.json")
    with open(path + ".tmp", "w") as out:
        json.dump(record, out)
    os.replace(path + ".tmp", path)
    time.sleep(0.3)
"""


@dataclass
class Trainer:
    """The publishing process and the runtime directory to hand to the monitor as ``XDG_RUNTIME_DIR``."""

    pid: int
    runtime_dir: Path


def record_fields(steps_per_second: float, achieved_tflops: float | None = None, peak_tflops: float | None = None,
                  samples_per_step: int = 32, tokens_per_step: int | None = 65536, flops_source: str = "6N",
                  breakdown: Mapping[str, float] | None = None,
                  input_wait_fraction: float | None = None) -> dict[str, object]:
    """The rate, ``speed`` and ``breakdown`` keys of a record for a trainer running at ``steps_per_second`` (and the
    measured input wait, when given)."""
    speed: dict[str, object] = {"samples_per_second": samples_per_step * steps_per_second,
                                "batch_size_source": "batch", "flops_source": flops_source, "math_mode": "bf16"}
    if tokens_per_step is not None:
        speed["tokens_per_second"] = tokens_per_step * steps_per_second
    if achieved_tflops is not None:
        speed["achieved_tflops"] = achieved_tflops
        speed["flops_per_step"] = achieved_tflops * 1e12 / steps_per_second
    if peak_tflops is not None:
        speed["peak_tflops"] = peak_tflops
        speed["peak_source"] = "given"
        if achieved_tflops is not None:
            speed["flops_utilization_fraction"] = achieved_tflops / peak_tflops
    fields: dict[str, object] = {"steps_per_second": steps_per_second, "step_seconds": 1 / steps_per_second,
                                 "speed": speed}
    if breakdown is not None:
        fields["breakdown"] = {**breakdown, "source": "host"}
    if input_wait_fraction is not None:
        fields["input_wait_fraction"] = input_wait_fraction
    return fields


@contextmanager
def publishing_trainer(tmp_path: Path, env: Mapping[str, str] | None = None, runtime_dir: Path | None = None,
                       **fields: object) -> Iterator[Trainer]:
    """A child publishing :func:`record_fields` (``fields``) in ``runtime_dir`` (default: a new one in ``tmp_path``),
    with ``env`` added to its environment (RANK, MASTER_ADDR, ...)."""
    base = runtime_dir or tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"
    folder = base / "gpusight"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    base.chmod(0o700)
    child = subprocess.Popen([sys.executable, "-c", _SOURCE, str(folder), json.dumps(record_fields(**fields))],  # type: ignore[arg-type]
                             env={**os.environ, **(env or {})})
    try:
        yield Trainer(child.pid, base)
    finally:
        child.kill()
        child.wait()
