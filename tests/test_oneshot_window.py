"""One-shot runs judge the window they sampled (issue 30, finding 7): the real CLI on the fake NVML, a real trainer.

A GPU stalling 2 s in every 4 s shows 5 clean stalls in 22 s; the periodic-stall rule needs 3 of them and then,
on a live screen, its 15 s hold, longer than the run. ``--once --json --duration 22`` and ``--check --duration 22``
must name the stalls all the same, and say how the run's shortness shaped what they could judge.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

from gpusight.advice.context import Finding
from gpusight.advice.hysteresis import Hysteresis
from gpusight.demo.source import DemoSource
from gpusight.snapshot.model import Advice, Severity
from gpusight.snapshot.serialize import snapshot_to_json
from support.fake_nvml import FakeGpu, FakeScenario, Square, fake_nvml_env
from support.procs import fake_trainer

GIB = 1 << 30
DURATION = 22


def test_a_gpu_stalling_2_s_in_every_4_s_is_named_by_once_json_and_check_over_22_s(tmp_path, fake_nvml_lib):
    with fake_trainer(tmp_path, workers=("sleep", "sleep")) as trainer:
        gpu = FakeGpu(util_gpu=Square(100, 0, 2000, 2000), mem_used=60 * GIB,
                      compute_processes=[(trainer.pid, 59 * GIB)])
        env = fake_nvml_env(fake_nvml_lib, FakeScenario(gpus=[gpu]).write(tmp_path / "scenario.txt"))
        base = [sys.executable, "-m", "gpusight", "--duration", str(DURATION), "--interval", "0.5"]
        # both runs sample the same GPU at once, so the test costs one window, not two
        runs = [subprocess.Popen([*base, *mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                for mode in (["--once", "--json"], ["--check"])]
        (once_out, once_err), (check_out, check_err) = (run.communicate(timeout=DURATION + 60) for run in runs)

    assert runs[0].returncode == 0, once_err
    advice = {a["id"]: a for a in json.loads(once_out)["advice"]}
    assert "periodic_stall:gpu0" in advice, (once_err, advice)
    found = re.search(r"GPU 0 stalls every (\d+\.\d) s for (\d+\.\d) s \((\d+) stalls",
                      advice["periodic_stall:gpu0"]["evidence"])
    assert found, advice["periodic_stall:gpu0"]["evidence"]
    period, stall, count = float(found[1]), float(found[2]), int(found[3])
    assert 3.5 <= period <= 4.5 and 1.5 <= stall <= 2.5 and count >= 4
    # stderr says how the run judged its window: averages cut to it, no hold, the longest stall period it sees
    assert "advice judged on the window as a whole at its end" in once_err
    assert "averages over 21.5 s, not window_s 30 s, stall_window_s 60 s" in once_err
    assert "regular stalls seen up to a 7.0 s period" in once_err

    assert runs[1].returncode == 1, check_out + check_err
    assert re.search(r"^WARN     gpu0: GPU 0 stalls every 4 s", check_out, re.MULTILINE), check_out
    assert "regular stalls seen up to a 7.0 s period" in check_out.splitlines()[0]
    assert check_out.splitlines()[-1] == "result: 0 critical, 1 warn, 0 info; exit 1"


DEMO_STORIES = {
    # scenario: (seconds judged, --check exit status, advice that must stand: "rule:scope", or "rule:pid" for a pid)
    "mixed": (20, 1, {"input_bound:gpu4", "throttling:gpu7", "idle_holding:pid", "batch_headroom:gpu6", "healthy:gpu0"}),
    "healthy": (20, 0, {"healthy:gpu0", "healthy:gpu1", "healthy:gpu2", "healthy:gpu3"}),
    "input-bound": (20, 1, {"input_bound:gpu0", "input_bound:gpu3"}),
    "small-batch": (20, 0, {"batch_headroom:gpu0", "batch_headroom:gpu1"}),
    "throttling": (20, 1, {"throttling:gpu0", "throttling:gpu2"}),
    "idle-holding": (20, 1, {"idle_holding:pid", "free_capacity:gpu3"}),
    "imbalance": (20, 1, {"straggler:job1"}),
    "serving": (20, 0, {"serving_idle:pid", "serving_batching:gpu3"}),
    "stalls": (25, 1, {"periodic_stall:gpu0"}),  # a 7 s period: 3 stalls and a second can take 22 s
    "comm-bound": (20, 1, {"comm_bound:job1"}),
    "mig": (20, 1, {"mig_idle_holding:mig0.3", "mig_free:mig0.10"}),
    "faulty": (20, 2, {"health:gpu0", "health:gpu1"}),
    "video-decode": (20, 1, {"decoder_bound:gpu0"}),
}
"""Each demo story that a 20 s window can show (the stalls need 25 s), as ``tests/test_advice_demo.py`` sees it live
(hysteresis, on a fake clock)."""


def demo_recording(path: Path, scenario: str, seconds: float) -> Path:
    """``seconds`` (and 5 more) of a demo scenario polled every half second from its start, with no prefilled history:
    a run judges only what it reads, as on live data."""
    clock = itertools.count()
    source = DemoSource(scenario, seed=5, clock=lambda: 1_750_000_000.0 + next(clock) * 0.5)
    path.write_text("".join(snapshot_to_json(source.poll()) + "\n" for _ in range(int(2 * (seconds + 5)))),
                    encoding="utf-8")
    return path


def standing(ids: set[str], wanted: set[str]) -> set[str]:
    """The ``wanted`` advice missing from ``ids`` (``rule:pid`` matches any pid)."""
    return {want for want in wanted if not any(i == want or (want.endswith(":pid") and i.startswith(want))
                                               for i in ids)}


def test_every_demo_story_stands_after_20_s_in_check_and_once_json_alike(tmp_path):
    runs = {}
    for scenario, (seconds, _, _) in DEMO_STORIES.items():
        recording = demo_recording(tmp_path / f"{scenario}.jsonl", scenario, seconds)
        base = [sys.executable, "-m", "gpusight", "--json", "--replay", str(recording), "--duration", str(seconds)]
        # all at once: --json --duration plays the recording at its pace, so the whole test costs about one window
        for mode in ("check", "once"):
            command = [*base, "--check"] if mode == "check" else base
            runs[scenario, mode] = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    problems = []
    for (scenario, mode), run in runs.items():
        out, err = run.communicate(timeout=120)
        seconds, status, wanted = DEMO_STORIES[scenario]
        ids = {a["id"] for a in json.loads(out)["advice"]} if out else set()
        if run.returncode != (status if mode == "check" else 0) or standing(ids, wanted):
            problems.append(f"{scenario} {mode}: exit {run.returncode}, missing {standing(ids, wanted)}; {err[-300:]}")
        if mode == "check" and "advice judged on the window as a whole at its end" not in err:
            problems.append(f"{scenario} check: {err[:300]}")
    assert not problems, "\n".join(problems)


def _shown_at_end(pattern: str, whole_window: bool, hold: float = 15.0) -> bool:
    """Whether a condition true on the polls marked ``x`` of ``pattern`` (one poll each half second) shows at its end."""
    gate, finding = Hysteresis(whole_window=whole_window), Finding(Advice("rule:gpu0", Severity.WARN, "gpu0", "t", "", ""))
    shown: list[Finding] = []
    for poll, mark in enumerate(pattern):
        shown = gate.update(poll * 0.5, {"rule:gpu0": (finding, hold)} if mark == "x" else {}, clear=10.0)
    return finding in shown


def test_a_window_judges_a_late_steady_condition_but_not_one_that_comes_and_goes():
    late = "." * 22 + "x" * 22  # from the middle of a 22 s window on: the periodic-stall rule after its third stall
    flicker = ("xxxx" + "." * 10) * 3 + "xx"  # a reading true in each stall only, and on the window's last polls
    assert _shown_at_end(late, whole_window=True) and not _shown_at_end(late, whole_window=False)
    assert not _shown_at_end(flicker, whole_window=True) and not _shown_at_end(flicker, whole_window=False)
    # what the live screen shows stays shown in a window: a finding with no hold, then gone with its GPU
    assert _shown_at_end("xx" + "." * 10, whole_window=True, hold=0.0)
    assert not _shown_at_end("xx" + "." * 30, whole_window=True, hold=0.0)  # gone for clear_s



def _mig_idle_at_end(idle_from: float, seconds: float = 20.0) -> bool:
    """Whether a window-judging engine names MIG instance 0.5 (a notebook holding 8 GiB) as idle after ``seconds``
    of an instance busy (a moving 40-80 % SM activity) until ``idle_from`` seconds in, then idle (0 %)."""
    from gpusight.advice.engine import AdviceEngine
    from gpusight.sampling.history import History
    from gpusight.snapshot.model import MigDeviceSample
    from support.advice_frames import HZ, gpu, snapshot, trainer, wave

    notebook = dataclasses.replace(trainer(pid=200, mem=8.0, workers=0, cpu=0.5), gpu_instance_id=5,
                                   compute_instance_id=0)
    history, engine = History(), AdviceEngine()
    engine.judge_window()
    advice: tuple[Advice, ...] = ()
    for step in range(int(seconds * HZ) + 1):
        t = step / HZ
        active = 0.0 if t >= idle_from else wave(t, 40.0, 80.0, 7.0)
        mig = MigDeviceSample(0, 0, 5, 0, "2g.20gb", "MIG-aaaa-5", None, None, 8 * GIB, 20 * GIB,
                              sm_active_percent=active)
        snap = dataclasses.replace(snapshot(t, [gpu(0, util=None, used=8.0, mig_mode=True)], [notebook]),
                                   mig_devices=(mig,))
        history.append(snap)
        advice = engine(snap, history)
    return any(a.id == "mig_idle_holding:mig0.5" for a in advice)


def test_an_instant_rule_needs_part_of_the_window_not_its_last_poll():
    """mig_idle_holding reads the newest SM activity only: an instance idle on the window's last poll is a blip, not
    the run's verdict; idle over half the window or more (shorter than the rule's 120 s live hold) is."""
    assert not _mig_idle_at_end(idle_from=20.0)  # the last poll only
    assert not _mig_idle_at_end(idle_from=17.0)  # 3 s of 20
    assert _mig_idle_at_end(idle_from=9.0)  # 11 s of 20
    assert _mig_idle_at_end(idle_from=0.0)  # the whole window
