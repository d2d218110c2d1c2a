"""One-shot runs judge the window they sampled (issue 30, finding 7): the real CLI on the fake NVML, a real trainer.

A GPU stalling 2 s in every 4 s shows 5 clean stalls in 22 s; the periodic-stall rule needs 3 of them and then,
on a live screen, its 15 s hold, longer than the run. ``--once --json --duration 22`` and ``--check --duration 22``
must name the stalls all the same, and say how the run's shortness shaped what they could judge.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

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
