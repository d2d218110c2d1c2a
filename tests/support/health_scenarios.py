"""Fake GPUs with hardware faults and busy video engines, for tests from NVML call to screen, JSON and exporter.

Each builder returns a ``FakeScenario``; ``tests/data/fakenvml/<name>.scenario`` holds the same text (written by
``write_scenario_files``, checked by tests/test_nvml_health.py), for tests and tools that want a file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from support.fake_nvml import FakeGpu, FakeHealth, FakeScenario

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "fakenvml"
"""Folder of the scenario files."""

DECODER_PID = 4242
"""PID of the decoding process in ``decoder_busy`` (pass ``pid`` to use a real process)."""


def xid(codes: tuple[int, ...] = (79, 48), lost: bool = False) -> FakeScenario:
    """Two H100s; GPU 0 has delivered the Xid ``codes`` (seq 1, 2, ...), the second on MIG GPU instance 3."""
    events: list[tuple[int, int] | tuple[int, int, int, int]] = [
        (seq, code) if seq == 1 else (seq, code, 3, 0) for seq, code in enumerate(codes, start=1)]
    return FakeScenario(gpus=[FakeGpu(lost=lost, health=FakeHealth(xids=events)), FakeGpu()])


def remap_pending() -> FakeScenario:
    """An H100 with a row remapped after an uncorrectable error, waiting for a GPU reset."""
    health = FakeHealth(remap_uncorrected=1, remap_pending=1, ecc_uncorrected_aggregate=1)
    return FakeScenario(gpus=[FakeGpu(ecc_uncorrected=1, health=health)])


def pcie_degraded() -> FakeScenario:
    """A busy H100 whose Gen5 x16 link runs at Gen3 x8, with PCIe replays."""
    health = FakeHealth(pcie_gen=3, pcie_gen_max=5, pcie_width=8, pcie_width_max=16, pcie_replay=57)
    return FakeScenario(gpus=[FakeGpu(util_gpu=90, health=health)])


def decoder_busy(pid: int = DECODER_PID) -> FakeScenario:
    """An H100 whose decoders run at 97 % (JPEG 40 %) while SMs idle; process ``pid`` decodes at 88 %."""
    health = FakeHealth(enc_util=0, dec_util=97, jpg_util=40, ofa_util=0, process_codecs=[(pid, 0, 88)])
    gpu = FakeGpu(util_gpu=12, compute_processes=[(pid, 4 << 30)], live_process_samples=[(pid, 3, 9)],
                  health=health)
    return FakeScenario(gpus=[gpu])


SCENARIOS: dict[str, Callable[[], FakeScenario]] = {
    "xid": xid, "remap_pending": remap_pending, "pcie_degraded": pcie_degraded, "decoder_busy": decoder_busy,
}
"""Scenario file name (without ``.scenario``) -> its builder."""


def scenario_path(name: str) -> Path:
    """The file of scenario ``name``."""
    return DATA_DIR / f"{name}.scenario"


def write_scenario_files() -> None:
    """(Re)write every scenario file from its builder."""
    for name, build in SCENARIOS.items():
        scenario_path(name).write_text(build().text(), encoding="utf-8")
