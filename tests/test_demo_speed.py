"""The demo's trainers publish what gpusight.torch would (speed, FLOPs, MFU/HFU, step-time breakdown), and their
figures tell each scenario's story; ``gpusight --demo --once`` and ``--json`` show them."""

from __future__ import annotations

import json
import subprocess
import sys
from statistics import mean

import pytest

from gpusight.demo.source import SCENARIOS, DemoSource
from gpusight.facts.peak_flops import peak_for
from gpusight.facts.speed import BREAKDOWN_FIELDS, job_speed
from gpusight.snapshot.model import FlopsSource, ProcessRole, ProcessSample, Snapshot

START = 1_700_000_000.0
HZ = 4


def polls(scenario: str, seconds: float = 60.0, seed: int = 0) -> list[Snapshot]:
    """``seconds`` of the scenario polled at 4 Hz on a simulated clock."""
    now = [START]
    source = DemoSource(scenario, seed, lambda: now[0])
    snapshots = []
    for _ in range(int(seconds * HZ)):
        now[0] += 1 / HZ
        snapshots.append(source.poll())
    return snapshots


def trainers(snapshot: Snapshot) -> list[ProcessSample]:
    return [p for p in snapshot.processes if p.role == ProcessRole.GPU and p.steps_per_second is not None]


def parts(process: ProcessSample) -> dict[str, float]:
    return {label: getattr(process, name) for name, label in BREAKDOWN_FIELDS}


@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_breakdown_sums_to_100_and_every_figure_is_consistent(scenario, seed):
    snapshots = polls(scenario, 40.0, seed)
    reporting = [p for snapshot in snapshots for p in trainers(snapshot)]
    assert bool(reporting) == (scenario != "serving")  # every scenario but the inference host trains
    for snapshot in snapshots:
        for p in trainers(snapshot):
            shares = parts(p)
            assert sum(shares.values()) == pytest.approx(100.0, abs=1e-6), shares
            assert all(0.0 <= value <= 100.0 for value in shares.values()), shares
            assert p.input_wait_percent == shares["data wait"]
            peak = peak_for(snapshot.devices[p.device_index].name, p.math_mode)
            assert (p.peak_tflops, p.peak_source) == (peak.tflops, peak.source)
            assert p.achieved_tflops == pytest.approx(p.flops_per_step * p.steps_per_second / 1e12, rel=1e-2, abs=0.01)
            if peak.tflops is None:  # a GPU the peak table lacks: N/A with the reason, never a guess
                assert p.flops_utilization_percent is None and p.flops_utilization_note == peak.source
            else:
                assert p.flops_utilization_percent == pytest.approx(p.achieved_tflops / p.peak_tflops * 100, abs=0.05)


def test_the_figures_move():
    snapshots = polls("mixed", 60.0)
    pids = {p.pid for p in trainers(snapshots[0])}
    assert len(pids) == 7  # alice's 4 ranks, bob, dave and erin; not carol's notebook
    for pid in pids:
        rows = [next(p for p in s.processes if p.pid == pid) for s in snapshots]
        assert len({p.steps_per_second for p in rows}) > 20
        assert len({p.flops_utilization_percent for p in rows}) > 20
        assert len({p.step_data_percent for p in rows}) > 10


def test_only_training_loops_report_and_language_models_count_tokens():
    snapshot = polls("mixed", 1.0)[-1]
    by_user = {p.user: p for p in snapshot.processes if p.role == ProcessRole.GPU}
    assert by_user["carol"].steps_per_second is None and by_user["carol"].flops_utilization_percent is None
    assert by_user["alice"].tokens_per_second is not None and by_user["erin"].tokens_per_second is not None
    assert by_user["bob"].tokens_per_second is None and by_user["bob"].samples_per_second is not None
    sources = {p.flops_source for p in trainers(snapshot)}
    assert FlopsSource.COUNTED in sources and sources - {FlopsSource.COUNTED}  # both HFU and MFU in the demo
    for snapshot in polls("serving", 2.0):
        assert not trainers(snapshot)


def job_means(scenario: str, seconds: float = 60.0) -> tuple[dict[str, float], float]:
    """The first job's mean breakdown (by label) and mean MFU/HFU over ``seconds``."""
    speeds = [job_speed(s.jobs[0], s.processes) for s in polls(scenario, seconds)]
    labels = [label for _, label in BREAKDOWN_FIELDS]
    breakdown = {label: mean(dict(speed.breakdown or ())[label] for speed in speeds) for label in labels}
    return breakdown, mean(speed.flops_utilization_percent or 0.0 for speed in speeds)


def test_the_breakdown_tells_each_scenarios_story():
    healthy, healthy_mfu = job_means("healthy")
    assert healthy["compute"] > 80 and healthy_mfu > 35
    starved, starved_mfu = job_means("input-bound")
    assert starved["data wait"] > 50 and starved_mfu < 10
    comm, _ = job_means("comm-bound")
    assert comm["communication"] > 35 and comm["data wait"] < 5  # its measured wait leaves comm_bound its verdict


def test_a_straggler_waits_for_data_while_its_peers_wait_in_nccl_all_at_one_pace():
    for snapshot in polls("imbalance", 20.0):
        ranks = sorted(trainers(snapshot), key=lambda p: p.step_data_percent or 0.0)
        slow, peers = ranks[-1], ranks[:-1]
        assert slow.device_index == 2 and slow.step_data_percent >= 30
        assert all(p.step_comm_percent >= 30 and p.step_data_percent < 5 for p in peers)
        assert len({p.steps_per_second for p in ranks}) == 1  # data-parallel ranks step together


def test_a_stall_turns_the_step_idle():
    rows = [next(p for p in trainers(s) if p.device_index == 0) for s in polls("stalls", 30.0)]
    assert max(p.step_idle_percent for p in rows) > 90
    assert min(p.step_idle_percent for p in rows) < 10


def gpusight(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_once_prints_each_jobs_speed():
    text = gpusight("--demo", "mixed", "--once")
    speed = text.split("\nSPEED\n", 1)[1].split("\n\n", 1)[0].splitlines()
    job = next(line for line in speed if line.startswith("  job 1 (4 ranks): "))
    assert "steps/s" in job and "tokens/s" in job and "% MFU" in job and "; step: data wait " in job
    ranks = [line for line in speed if line.startswith("    rank ")]
    assert len(ranks) == 4 and all("step on the GPU: data wait" in line for line in ranks)
    assert any("samples/s" in line and "% HFU" in line for line in speed)  # dave's counted FLOPs
    assert not any("carol" in line or "PID" in line and "notebook" in line for line in speed)
    assert "\nSPEED\n" not in gpusight("--demo", "serving", "--once")  # nothing trains there


def test_json_carries_the_speed_fields():
    snapshot = json.loads(gpusight("--demo", "comm-bound", "--json"))
    trainer = next(p for p in snapshot["processes"] if p["role"] == "gpu")
    assert trainer["flops_source"] == "6N" and trainer["math_mode"] == "bf16" and trainer["breakdown_source"] == "device"
    assert trainer["tokens_per_second"] > 0 and 0 < trainer["flops_utilization_percent"] < 100
    assert sum(trainer[name] for name, _ in BREAKDOWN_FIELDS) == pytest.approx(100.0)
