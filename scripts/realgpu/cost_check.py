"""The cost of watching on a real NVIDIA GPU: gpusight and nvitop side by side, in a real pty, beside real training.

Usage: ``python scripts/realgpu/cost_check.py OUT_DIR [--measure 15] [--warmup 3] [--sizes 160x45,80x24]``

Starts a real training job (``gpusight.examples.convnet`` on CUDA in bf16, four DataLoader workers) so that every
figure moves, waits for it to warm up, then runs gpusight and nvitop in turn in a pty at each size and at each
point: both at 0.25 s, and each tool at its defaults (gpusight samples every 0.5 s and redraws every 1 s; nvitop
refreshes every 2 s). Each run is measured as ``benchmarks/run.py`` measures it (``benchmarks/ptyrun.py``): CPU of
the whole process tree per wall second after the warm-up, bytes written to the terminal per second, peak RSS and
the first frame (spawn to the end of the first output burst that shows the GPU's power limit, a figure only
sampled data can draw). Writes ``cost.md`` (a table with the device named) and ``cost.json`` into OUT_DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
from ptyrun import PtyResult, run_in_pty  # noqa: E402

FAST_S = 0.25
"""The interval both tools run at in the fast point (nvitop's minimum)."""

TRAIN_WARMUP_S = float(os.environ.get("COST_TRAIN_WARMUP_S", "25"))
"""How long the trainer runs before the first measurement (CUDA start-up, cuDNN autotuning)."""


def nvidia_smi(query: str) -> str:
    """One ``nvidia-smi --query-gpu`` field of GPU 0, as text."""
    out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", "0"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def commands(tool: str, fast: bool) -> list[str]:
    """The command line of ``tool`` at the fast point or at its defaults."""
    base = [sys.executable, "-m", tool]
    return [*base, "--interval", str(FAST_S)] if fast else base


def start_trainer(seconds: float) -> subprocess.Popen[bytes]:
    """A real training job that keeps the GPU's figures moving for ``seconds``."""
    argv = [sys.executable, "-m", "gpusight.examples.convnet", "--duration", str(int(seconds)), "--num-workers", "4",
            "--device", "cuda", "--precision", "bf16"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)


def row(result: PtyResult) -> dict[str, float | None]:
    """The figures of one run."""
    return {"cpu_ms_per_s": round(result.cpu_ms_per_s, 1), "kib_per_s": round(result.bytes_per_s / 1024, 2),
            "peak_rss_mib": round(result.peak_rss_bytes / 2**20, 1),
            "first_frame_s": None if result.first_frame_s is None else round(result.first_frame_s, 2)}


def main() -> int:
    """Measure, write cost.md and cost.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--measure", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--sizes", default="160x45,80x24")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    device = f"{nvidia_smi('name')}, driver {nvidia_smi('driver_version')}"
    marker = re.compile(rf"{round(float(nvidia_smi('power.limit')))}W".encode())
    env = {**os.environ, "TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    runs = len(sizes) * 2 * 2
    trainer = start_trainer(TRAIN_WARMUP_S + runs * (args.warmup + args.measure + 8) + 30)
    results: list[dict[str, object]] = []
    try:
        time.sleep(TRAIN_WARMUP_S)
        for columns, rows in sizes:
            for fast in (True, False):
                for tool in ("gpusight", "nvitop"):
                    result = run_in_pty(commands(tool, fast), env, columns, rows, args.warmup, args.measure, marker)
                    entry = {"tool": tool, "size": f"{columns}x{rows}", "point": "0.25 s" if fast else "defaults",
                             "training": trainer.poll() is None, **row(result)}
                    print(json.dumps(entry), flush=True)
                    results.append(entry)
    finally:
        trainer.terminate()
        trainer.wait(30)
    (args.out / "cost.json").write_text(json.dumps({"device": device, "runs": results}, indent=1))
    lines = [f"Device: {device}. Beside a real bf16 convnet training with 4 DataLoader workers. Each run "
             f"{args.warmup:g} s warm-up, {args.measure:g} s measured; CPU is the whole process tree's.", "",
             "| size | point | CPU ms/s gpusight / nvitop | ratio | KiB/s gpusight / nvitop | ratio | RSS MiB "
             "gpusight / nvitop | first frame s gpusight / nvitop |", "|---|---|---|---|---|---|---|---|"]
    for i in range(0, len(results), 2):
        ours, theirs = results[i], results[i + 1]
        cpu = f"{ours['cpu_ms_per_s']} / {theirs['cpu_ms_per_s']}"
        out = f"{ours['kib_per_s']} / {theirs['kib_per_s']}"
        lines.append(f"| {ours['size']} | {ours['point']} | {cpu} | {ratio(ours['cpu_ms_per_s'], theirs['cpu_ms_per_s'])}"
                     f" | {out} | {ratio(ours['kib_per_s'], theirs['kib_per_s'])} | {ours['peak_rss_mib']} / "
                     f"{theirs['peak_rss_mib']} | {ours['first_frame_s']} / {theirs['first_frame_s']} |")
    (args.out / "cost.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def ratio(ours: object, theirs: object) -> str:
    """``ours / theirs`` to two places, or n/a."""
    if not isinstance(ours, float) or not isinstance(theirs, float) or theirs <= 0:
        return "n/a"
    return f"{ours / theirs:.2f}"


if __name__ == "__main__":
    sys.exit(main())
