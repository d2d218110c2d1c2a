"""Job speed in the cluster view, end to end: trainers publish records, ``gpusight --serve`` exports them on two
nodes, a real Prometheus scrapes both, and ``gpusight --cluster`` shows one MFU for the job across its nodes.

The fleet: a two-rank job (one rendezvous, so one ``cluster_job``) with rank 0 on node-a and rank 1 on node-b,
each rank publishing its own speed (their GPUs' peaks differ); on node-b a second GPU process of the same job that
publishes nothing, and on node-x a part of the same job that reports no speed (neither may count as 0). node-x's
exporter also serves hostile speed values: NaN, infinities, negatives, absurd FLOP/s, a made-up utilization name and
step-time parts that do not sum to 100, which all read N/A.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from test_cluster_e2e import open_host, visible

from gpusight import metric_names as m
from gpusight.cluster.frame import ClusterFrame
from gpusight.cluster.prom import PrometheusClient
from gpusight.cluster.source import ClusterSource
from support.exporter import serving
from support.exposition import ExpositionServer
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env
from support.prometheus import PrometheusServer, Target, require_prometheus
from support.terminal import PtyTerminal, gpusight_argv
from support.trainer_record import publishing_trainer

REPO = Path(__file__).resolve().parents[1]
HISTORY = "20"
RENDEZVOUS = {"MASTER_ADDR": "10.20.0.5", "MASTER_PORT": "29500", "WORLD_SIZE": "4", "SLURM_JOB_ID": "77"}
"""One Slurm job with a rendezvous: every node gives the job the same ``cluster_job``, ``slurm:77``."""
KEY = "slurm:77"
BREAKDOWN_A = {"data": 0.40, "compute": 0.50, "communication": 0.06, "copy": 0.02, "idle": 0.02}
BREAKDOWN_B = {"data": 0.20, "compute": 0.60, "communication": 0.16, "copy": 0.02, "idle": 0.02}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, fake_nvml_lib: Path) -> Iterator[str]:
    require_prometheus()
    tmp = tmp_path_factory.mktemp("speed")
    runtime = tmp / "run"
    with ExitStack() as stack:
        rank0 = stack.enter_context(publishing_trainer(
            tmp, {**RENDEZVOUS, "RANK": "0"}, runtime, steps_per_second=2.0, achieved_tflops=300.0, peak_tflops=989.0,
            breakdown=BREAKDOWN_A))
        rank1 = stack.enter_context(publishing_trainer(
            tmp, {**RENDEZVOUS, "RANK": "1"}, runtime, steps_per_second=1.6, achieved_tflops=240.0, peak_tflops=400.0,
            breakdown=BREAKDOWN_B))
        silent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                  env={**os.environ, **RENDEZVOUS, "RANK": "2"})
        stack.callback(lambda: (silent.kill(), silent.wait()))
        scenarios = {
            "node-a": [FakeGpu(util_gpu=100, mem_used=60 << 30, compute_processes=[(rank0.pid, 58 << 30)])],
            "node-b": [FakeGpu(util_gpu=100, mem_used=60 << 30, compute_processes=[(rank1.pid, 58 << 30)]),
                       FakeGpu(util_gpu=90, mem_used=30 << 30, compute_processes=[(silent.pid, 20 << 30)])],
        }
        targets = []
        for host, gpus in scenarios.items():
            env = {**fake_nvml_env(fake_nvml_lib, FakeScenario(gpus=gpus).write(tmp / f"{host}.txt")),
                   "PYTHONPATH": str(REPO), "XDG_RUNTIME_DIR": str(runtime)}
            exporter = stack.enter_context(serving(["--hostname", host, "--interval", "0.5"], env=env))
            targets.append(Target(exporter.url.split("://", 1)[1], instance=f"{host}:9401"))
        hostile = ExpositionServer({"/metrics": lambda: HOSTILE.encode()})
        stack.callback(hostile.close)
        targets.append(Target(hostile.address, instance="node-x:9401"))
        yield stack.enter_context(PrometheusServer(targets)).url


HOSTILE = "".join(f"{line}\n" for line in (
    f'{m.GPU_UTIL.name}{{gpu="0",Hostname="node-x"}} 100',
    f'{m.BUILD_INFO.name}{{Hostname="node-x",version="9",source="nvml"}} 1',
    f'{m.JOB_INFO.name}{{Hostname="node-x",gpusight_job="1",cluster_job="evil\x1b[2J",kind="training"}} 1',
    f'{m.JOB_INFO.name}{{Hostname="node-x",gpusight_job="2",cluster_job="odd",kind="training"}} 1',
    f'{m.JOB_INFO.name}{{Hostname="node-x",gpusight_job="3",cluster_job="{KEY}",kind="training"}} 1',
    f'{m.JOB_STEPS.name}{{Hostname="node-x",gpusight_job="1"}} NaN',
    f'{m.JOB_STEPS.name}{{Hostname="node-x",gpusight_job="2"}} 3',
    f'{m.JOB_SAMPLES.name}{{Hostname="node-x",gpusight_job="2"}} -5',
    f'{m.JOB_TOKENS.name}{{Hostname="node-x",gpusight_job="2"}} +Inf',
    f'{m.JOB_FLOPS.name}{{Hostname="node-x",gpusight_job="2",utilization="MFU"}} 1e30',
    f'{m.JOB_PEAK_FLOPS.name}{{Hostname="node-x",gpusight_job="2",utilization="MFU"}} 1e30',
    f'{m.JOB_FLOPS.name}{{Hostname="node-x",gpusight_job="1",utilization="\x1b[31mBEST"}} 5e14',
    f'{m.JOB_PEAK_FLOPS.name}{{Hostname="node-x",gpusight_job="1",utilization="\x1b[31mBEST"}} 1e15',
    *(f'{m.JOB_STEP_TIME.name}{{Hostname="node-x",gpusight_job="2",part="{part}"}} 90'
      for part in ("data", "compute", "communication", "copy", "idle")),
))
"""A node whose exporter serves nothing believable about speed."""


def poll_until(url: str, done, timeout: float = 60.0) -> ClusterFrame:
    source = ClusterSource(url, history_seconds=float(HISTORY))
    deadline = time.monotonic() + timeout
    frame = source.poll()
    while not done(frame) and time.monotonic() < deadline:
        time.sleep(0.5)
        frame = source.poll()
    return frame


def complete(frame: ClusterFrame) -> bool:
    """Both trainers' speed and the hostile node are in."""
    spanning = [s for s in frame.job_speeds if s.key == KEY]
    return (len(spanning) == 1 and len(spanning[0].reporting_hosts) == 2 and spanning[0].step_time_percent is not None
            and any(j.host == "node-x" for j in frame.jobs))


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def test_a_job_across_two_nodes_has_one_mfu_and_a_silent_rank_does_not_count_as_zero(fleet):
    frame = poll_until(fleet, complete)
    [speed] = [s for s in frame.job_speeds if s.key == KEY]
    assert speed.hosts == ("node-a", "node-b", "node-x") and speed.reporting_hosts == ("node-a", "node-b")
    assert speed.steps_per_second == 1.6  # the slowest node sets the pace
    assert speed.samples_per_second == pytest.approx(32 * 3.6)
    assert speed.tokens_per_second == pytest.approx(65536 * 3.6)
    assert speed.flops_per_second == pytest.approx(540e12) and speed.peak_flops_per_second == pytest.approx(1389e12)
    assert speed.flops_utilization_percent == pytest.approx(540 / 1389 * 100)  # summed over summed: not the mean 45%
    assert speed.utilization_name == "MFU"
    assert dict(speed.step_time_percent) == pytest.approx(
        {"data": 30.0, "compute": 55.0, "communication": 11.0, "copy": 2.0, "idle": 2.0})
    parts = {j.host: j for j in frame.jobs if j.cluster_job == speed.key}
    assert parts["node-b"].peak_flops_per_second == pytest.approx(400e12)  # the silent rank adds no peak


def test_a_job_across_nodes_that_waits_for_data_gets_fleet_advice_with_its_bounded_gain(fleet):
    frame = poll_until(fleet, lambda f: complete(f) and any(a.id.startswith("fleet_input_bound") for a in f.fleet_advice))
    advice = next(a for a in frame.fleet_advice if a.id == f"fleet_input_bound:{KEY}")
    assert advice.title == f"{KEY} is input-bound: node-a waits 40% of each step for data: up to 1.7x steps/s without it"
    assert "data wait node-a 40%, node-b 20%; communication node-a 6%, node-b 16%" in advice.evidence
    assert "1.6 steps/s, 39% MFU across 2 nodes" in advice.evidence
    assert "Feed node-a first" in advice.action


def test_hostile_speed_values_read_as_unknown(fleet):
    frame = poll_until(fleet, complete)
    hostile = {j.job: j for j in frame.jobs if j.host == "node-x"}
    assert hostile[1].steps_per_second is None and hostile[1].flops_per_second is None
    assert hostile[1].utilization_name is None
    odd = hostile[2]
    assert odd.steps_per_second == 3.0
    assert (odd.samples_per_second, odd.tokens_per_second, odd.flops_per_second, odd.peak_flops_per_second,
            odd.step_time_percent) == (None, None, None, None, None)
    [speed] = [s for s in frame.job_speeds if s.key == "odd"]
    assert speed.flops_utilization_percent is None and speed.utilization_name is None
    assert not any(s.key.startswith("evil") for s in frame.job_speeds)  # no believable steps: no speed at all


def test_once_and_json_show_the_job_speed_across_nodes(fleet):
    poll_until(fleet, complete)
    table = run_cli("--cluster", fleet, "--once", "--cluster-history", HISTORY)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    start = lines.index("Job speed across nodes (gpusight.torch)")
    spanning = next(line for line in lines[start:] if KEY in line)
    assert "3 nodes (2 reporting)  540 of 1.4k TFLOP/s  1.6 steps/s, 236k tokens/s, 39% MFU" in spanning, spanning
    assert "step: data wait 30%, compute 55%, communication 11%, H2D copy 2.0%, idle 2.0%" in spanning
    assert "odd  1 node  3.0 steps/s, N/A\n" in table.stdout
    assert "\x1b" not in table.stdout
    document = json.loads(run_cli("--cluster", fleet, "--json", "--cluster-history", HISTORY).stdout)
    [speed] = [s for s in document["job_speeds"] if s["key"] == KEY]
    assert speed["flops_utilization_percent"] == pytest.approx(540 / 1389 * 100)
    assert speed["flops_per_second"] == pytest.approx(540e12) and speed["reporting_hosts"] == ["node-a", "node-b"]
    assert speed["step_time_percent"][0] == ["data", pytest.approx(30.0)]
    node_b = next(j for j in document["jobs"] if j["host"] == "node-b" and j["cluster_job"] == speed["key"])
    assert node_b["steps_per_second"] == 1.6 and node_b["utilization_name"] == "MFU"


def test_the_cluster_view_shows_the_jobs_mfu_across_nodes_in_a_real_terminal(fleet):
    poll_until(fleet, complete)
    argv = gpusight_argv("--cluster", fleet, "--interval", "1", "--cluster-history", HISTORY)
    env = {**os.environ, "PYTHONPATH": str(REPO), "GPUSIGHT_PARTIAL_OUTPUT": "0"}
    with PtyTerminal(argv, (160, 45), env=env) as term:
        screen = lambda: visible(bytes(term.output))  # noqa: E731 - read again on every check
        term.wait_for(lambda: re.search(r"node-a\s+up\b", screen()) is not None, "node-a up", 60)
        term.wait_for(lambda: "1 job 39% MFU" in screen(), "node-a's row with the job's MFU across nodes", 30)
        drilled = open_host(term, "node-b")
        term.wait_for(lambda: "MFU ALL NODES" in drilled() and "39% MFU (2/3 nodes)" in drilled(),
                      "node-b's jobs with the MFU across nodes", 30)
        assert "1.6 steps/s" in drilled()
        assert "Traceback" not in screen()
        assert term.quit() == 0


def test_the_documented_promql_for_mfu_across_nodes_agrees_with_the_cluster_view(fleet):
    frame = poll_until(fleet, complete)
    [speed] = [s for s in frame.job_speeds if s.key == KEY]
    text = (REPO / "docs" / "exporter.md").read_text()
    block = text[text.index("A job's MFU across\nnodes"):]
    start = block.index("```promql\n") + len("```promql\n")
    expr = block[start:block.index("\n```", start)]
    answer = {s.labels.get(m.LABEL_CLUSTER_JOB): s.value for s in PrometheusClient(fleet, 10.0).query(expr)}
    assert answer[KEY] * 100 == pytest.approx(speed.flops_utilization_percent)
