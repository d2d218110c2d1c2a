"""Straggler: in a multi-process job, the slowest rank's GPU is far below its peers, which wait for it in every collective.

In DistributedDataParallel every step ends in an all-reduce, so the job runs at the pace of its
slowest rank. The waiting ranks spin inside NCCL kernels, which NVML counts as busy: the peers
read about 96 % while the rank that holds them back reads, say, 57 %. The rule names that rank,
its PID and GPU, the gap, and why it is slow where the data tells: its workers' CPU, its
measured input wait, its main process's CPU, or its clocks, each against its peers'.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from gpusight.advice.context import Context, Finding
from gpusight.advice.feeds import cpu_demand, cpu_saturated, cpu_text
from gpusight.advice.jobs import Rank, Straggler
from gpusight.advice.rules.base import Rule, listing, pct, pct_range
from gpusight.advice.rules.throttling import ACTIONS
from gpusight.snapshot.model import Severity

CLOCK_GAP = 0.9
"""A rank whose SM clock (window mean) is below this fraction of its peers' median runs slower kernels."""


def _evaluate(ctx: Context) -> list[Finding]:
    findings = []
    for found in ctx.stragglers():
        slow, job = found.slow, found.job
        window = f"over the last {ctx.thresholds.window_s:.0f} s"
        evidence = (
            f"{slow.label()} on GPU {slow.device} util {pct(found.utils[slow.device])} vs a median of "
            f"{pct(found.peer_median)} on its {len(found.peers)} peers ({_peer_range(found)}) {window} ({job.describe()})"
        )
        reasons, actions = _why(ctx, found)
        if reasons:
            evidence += "; why: " + "; ".join(reasons)
        else:
            evidence += "; its workers' CPU, input wait and clocks look like its peers'"
            actions = [
                "profile every rank for a few steps (torch.profiler; the TensorBoard plugin's distributed view compares "
                "each rank's computation and communication) and check uneven per-rank work: DistributedSampler shards, "
                "equal per-rank batch sizes, length-bucketed sequences"
            ]
        action = "; ".join(actions) + "; every rank waits for it in each all-reduce, so the whole job runs at its pace"
        label = slow.label()
        title = (
            f"{label[0].upper() + label[1:]} on GPU {slow.device} holds back job {job.sample.id} "
            f"({pct(found.utils[slow.device])} vs {pct(found.peer_median)} on its peers)"
        )
        findings.append(RULE.finding(Severity.WARN, job.scope, title, evidence, action, job.devices))
    return findings


def _peer_range(found: Straggler) -> str:
    """The peers' utilizations as a range, e.g. ``"95-97 %"``."""
    return pct_range([found.utils[rank.device] for rank in found.peers])


def _why(ctx: Context, found: Straggler) -> tuple[list[str], list[str]]:
    """Reasons the slow rank differs from its peers, and the action for each."""
    thresholds = ctx.thresholds
    slow, peers = found.slow, found.peers
    reasons: list[str] = []
    actions: list[str] = []
    slow_workers = _worker_cpu(ctx, slow)
    peer_workers = [cpu for cpu in (_worker_cpu(ctx, rank) for rank in peers) if cpu is not None]
    waits = [rank.process.input_wait_percent for rank in peers if rank.process.input_wait_percent is not None]
    wait = slow.process.input_wait_percent
    if wait is not None and waits and wait - median(waits) >= thresholds.comm_input_wait_percent:
        reasons.append(f"it waits {pct(wait)} of each step for data vs {pct(median(waits))} on its peers (gpusight.torch)")
    oversubscribed = False
    if slow_workers is not None and peer_workers and _saturated_alone(slow_workers, peer_workers, ctx):
        reasons.append(
            f"its DataLoader workers run at {cpu_text(*slow_workers, thresholds)} each vs "
            f"{pct(median(cpu for cpu, _ in peer_workers))} on its peers"
        )
        oversubscribed = (slow_workers[1] or 0.0) >= thresholds.cpu_wait_percent
    if reasons:
        more = "" if oversubscribed else "give every rank more DataLoader workers, and "
        actions.append(
            f"feed {slow.label()} faster: its input is the slowest; check its data shard (larger samples, remote "
            f"files), {more}check that its workers' cores are not shared with another job (per-rank CPU affinity, "
            "numactl/taskset)"
        )
    trainer_cpu, trainer_wait = slow.process.cpu_percent, slow.process.cpu_wait_percent
    peer_cpu = [(rank.process.cpu_percent, rank.process.cpu_wait_percent) for rank in peers]
    peer_cpu = [(cpu, wait) for cpu, wait in peer_cpu if cpu is not None]
    if not reasons and trainer_cpu is not None and peer_cpu and _saturated_alone((trainer_cpu, trainer_wait), peer_cpu, ctx):
        reasons.append(
            f"its main process runs at {cpu_text(trainer_cpu, trainer_wait, thresholds)} vs "
            f"{pct(median(cpu or 0.0 for cpu, _ in peer_cpu))} on its peers"
        )
        actions.append(
            "its main process is short of CPU: look for another process on its cores (top -H, per-rank CPU affinity, "
            "OMP_NUM_THREADS) or work done only on that rank"
        )
    throttled = [reason for reason in ACTIONS if reason in ctx.devices[slow.device].throttle_reasons]
    clock = ctx.device_stat(slow.device, "clock_sm_mhz")
    peer_clocks = [stat.mean for stat in (ctx.device_stat(rank.device, "clock_sm_mhz") for rank in peers) if stat]
    slow_clock = clock is not None and bool(peer_clocks) and clock.mean < CLOCK_GAP * median(peer_clocks)
    if throttled or slow_clock:
        text = f"GPU {slow.device} clocks held down by {listing(throttled)}" if throttled else f"GPU {slow.device}"
        if clock is not None and peer_clocks:
            text += f", SM clock {clock.mean:.0f} MHz vs {median(peer_clocks):.0f} MHz on its peers"
        reasons.append(text)
        actions.append(
            f"GPU {slow.device} runs every kernel slower: fix its cooling or power (nvidia-smi -q -d PERFORMANCE) "
            "or leave it out of the job (CUDA_VISIBLE_DEVICES)"
        )
    return reasons, actions


def _saturated_alone(
    slow: tuple[float, float | None], peers: Sequence[tuple[float | None, float | None]], ctx: Context
) -> bool:
    """True when ``slow`` (CPU, run-queue wait) is CPU-saturated and the median of its ``peers`` is not."""
    thresholds = ctx.thresholds
    peer_median = median(cpu_demand(cpu or 0.0, wait) for cpu, wait in peers)
    return cpu_saturated(*slow, thresholds) and peer_median < thresholds.cpu_saturated_percent


def _worker_cpu(ctx: Context, rank: Rank) -> tuple[float, float | None] | None:
    """Mean CPU and mean run-queue wait (None when unknown) per DataLoader worker of a rank; None when it has no
    workers or their CPU is unknown."""
    workers = [worker for worker in ctx.workers.get(rank.process.pid, ()) if worker.cpu_percent is not None]
    if not workers:
        return None
    waits = [worker.cpu_wait_percent for worker in workers if worker.cpu_wait_percent is not None]
    cpu = sum(worker.cpu_percent or 0.0 for worker in workers) / len(workers)
    return cpu, sum(waits) / len(waits) if waits else None


RULE = Rule("straggler", "one rank of a job is slower than the others", _evaluate)
"""The slowest rank of a job far below its peers' median."""
