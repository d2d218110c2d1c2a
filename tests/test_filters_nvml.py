"""``--gpus``, ``--cuda-visible`` and ``--user`` against the fake libnvidia-ml.so.1: the NVML source in process, the
real CLI (``--json``/``--once``) with real processes of two users, and the TUI in a real pty."""

from __future__ import annotations

import html
import json
import os
import pwd
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpusight.facts.gpu_selection import CudaVisible, GpuIds
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env, read_call_log
from support.procs import fake_trainer, run_python_as, sleeper, wait_until
from support.terminal import ENTER_ALT_SCREEN, PtyGpusight

GIB = 1 << 30
UUIDS = [
    "GPU-5f3a0000-aaaa-bbbb-cccc-000000000000",
    "GPU-5f3b1111-aaaa-bbbb-cccc-111111111111",
    "GPU-a7002222-aaaa-bbbb-cccc-222222222222",
    "GPU-c0ffee33-aaaa-bbbb-cccc-333333333333",
]
IDLE_ADVICE_AT_ONCE = "[advice]\nidle_hold_s = 0\nhold_s = 0\n"
"""Thresholds under which a process holding memory on an idle GPU is named on the first poll (pid-scoped advice)."""


def four_gpus(processes: dict[int, int] | None = None, util: int = 0) -> FakeScenario:
    """Four GPUs with distinct UUIDs; ``processes`` maps a pid to the GPU it holds 1 GiB on."""
    gpus = [FakeGpu(uuid=uuid, util_gpu=util, name="NVIDIA Fake") for uuid in UUIDS]
    for pid, index in (processes or {}).items():
        gpus[index].compute_processes.append((pid, GIB))
    return FakeScenario(gpus=gpus)


def gpusight(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, env=env, timeout=60)


def touched_devices(call_log: Path) -> set[int]:
    return {call.device for call in read_call_log(call_log) if call.device >= 0}


# -- the NVML source --------------------------------------------------------------------------------------


def test_only_the_chosen_gpus_are_opened_and_polled(nvml_scenario, make_nvml_source):
    nvml_scenario.write(four_gpus({4242: 0, 4343: 3}))
    source = make_nvml_source(gpus=GpuIds(("3", "1")))
    for _ in range(3):
        reading = source.poll()
    assert [(d.index, d.uuid, d.cuda_index) for d in reading.devices] == [(3, UUIDS[3], None), (1, UUIDS[1], None)]
    assert [p.pid for p in reading.processes] == [4343]
    assert reading.errors == ()
    assert touched_devices(nvml_scenario.call_log) == {1, 3}


def test_uuid_ids_read_each_uuid_once_and_then_poll_only_the_chosen(nvml_scenario, make_nvml_source):
    nvml_scenario.write(four_gpus())
    source = make_nvml_source(gpus=GpuIds(("gpu-C0FFEE", UUIDS[1][:12])))
    for _ in range(3):
        reading = source.poll()
    assert [d.index for d in reading.devices] == [3, 1]
    for device in (0, 2):
        calls = [c.symbol for c in nvml_scenario.calls() if c.device == device]
        assert sorted(calls) == ["nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetName", "nvmlDeviceGetUUID"]


def test_an_unknown_gpu_shuts_nvml_down_for_good_and_lists_the_gpus(nvml_scenario, make_nvml_source):
    nvml_scenario.write(four_gpus())
    source = make_nvml_source(gpus=GpuIds(("1", "GPU-dead")), init_retry_s=0.0)
    first, second = source.poll(), source.poll()
    expected = ("--gpus: no GPU has a UUID starting with 'GPU-dead'; GPUs here: "
                + ", ".join(f"{i} {uuid} (NVIDIA Fake)" for i, uuid in enumerate(UUIDS)))
    assert source.selection_error == expected
    assert first.devices == second.devices == ()
    assert [(e.scope, e.message) for e in second.errors] == [("filters", expected)]
    assert nvml_scenario.count("nvmlInitWithFlags") == 1 and nvml_scenario.count("nvmlShutdown") == 1


def test_cuda_visible_devices_order_and_numbers(nvml_scenario, make_nvml_source):
    nvml_scenario.write(four_gpus())
    source = make_nvml_source(gpus=CudaVisible("2,0,7,1", "PCI_BUS_ID"))
    reading = source.poll()
    assert [(d.index, d.cuda_index) for d in reading.devices] == [(2, 0), (0, 1)]
    [note] = reading.errors
    assert note.scope == "filters" and "entry '7' names no GPU" in note.message
    assert source.poll().errors == (note,)  # said with every snapshot
    assert touched_devices(nvml_scenario.call_log) == {0, 2}


def test_without_pci_bus_order_the_boards_are_compared_once(nvml_scenario, make_nvml_source):
    scenario = four_gpus()
    scenario.gpus[3].name = "NVIDIA A100-SXM4-40GB"
    nvml_scenario.write(scenario)
    source = make_nvml_source(gpus=CudaVisible("2,0"))
    for _ in range(3):
        reading = source.poll()
    assert [(d.index, d.cuda_index) for d in reading.devices] == [(2, 0), (0, 1)]
    assert [e.message for e in reading.errors] == [
        "CUDA_DEVICE_ORDER is not PCI_BUS_ID and the GPUs differ: CUDA may number them fastest first, so its GPU "
        "numbers can name other GPUs than shown; set CUDA_DEVICE_ORDER=PCI_BUS_ID"
    ]
    for device in (1, 3):  # asked who they are once, never polled
        calls = [c.symbol for c in nvml_scenario.calls() if c.device == device]
        assert sorted(calls) == ["nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetName", "nvmlDeviceGetUUID"]


# -- the CLI ----------------------------------------------------------------------------------------------


@pytest.fixture
def xdg(tmp_path: Path) -> Path:
    """An empty config home, so the user's own config.toml never leaks into a test."""
    home = tmp_path / "xdg"
    (home / "gpusight").mkdir(parents=True)
    return home


def cli_env(tmp_path: Path, fake_nvml_lib: Path, scenario: FakeScenario, xdg: Path, **extra: str | None) -> dict[str, str]:
    env = fake_nvml_env(fake_nvml_lib, scenario.write(tmp_path / "scenario.txt"), tmp_path / "calls.log")
    env["XDG_CONFIG_HOME"] = str(xdg)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    for key, value in extra.items():
        if value is not None:
            env[key] = value
    return env


def test_gpus_limits_json_once_and_advice_and_never_polls_the_others(tmp_path, fake_nvml_lib, xdg):
    (xdg / "gpusight" / "config.toml").write_text(IDLE_ADVICE_AT_ONCE)
    with sleeper() as on_gpu0, sleeper() as on_gpu3:
        env = cli_env(tmp_path, fake_nvml_lib, four_gpus({on_gpu0.pid: 0, on_gpu3.pid: 3}), xdg)
        unfiltered = json.loads(gpusight(env, "--json").stdout)
        assert {a["scope"] for a in unfiltered["advice"]} >= {f"pid{on_gpu0.pid}", f"pid{on_gpu3.pid}"}
        Path(env["FAKE_NVML_CALL_LOG"]).unlink()
        out = gpusight(env, "--json", "--gpus", "3,1")
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert [(d["index"], d["cuda_index"]) for d in data["devices"]] == [(3, None), (1, None)]
        assert [p["pid"] for p in data["processes"]] == [on_gpu3.pid]
        scopes = {a["scope"] for a in data["advice"]}
        assert f"pid{on_gpu3.pid}" in scopes and scopes <= {"host", "gpu1", "gpu3", f"pid{on_gpu3.pid}"}
        assert touched_devices(Path(env["FAKE_NVML_CALL_LOG"])) == {1, 3}
        once = gpusight(env, "--once", "--gpus", UUIDS[3][:9]).stdout.splitlines()
        assert once[1] == "filters: GPUs GPU-c0ffe"
        assert [line.split()[0] for line in once if line.startswith(("0 ", "1 ", "2 ", "3 "))] == ["3", "3"]  # GPU, process


@pytest.mark.parametrize(
    ("ids", "reason"),
    [("7", "there is no GPU 7"), ("0,GPU-dead", "no GPU has a UUID starting with 'GPU-dead'"),
     ("GPU-5f3", "'GPU-5f3' matches GPUs 0, 1; give more of the UUID"), ("cuda:0", "'cuda:0' is neither")],
)
def test_a_bad_gpu_id_exits_1_with_one_line_listing_the_gpus(tmp_path, fake_nvml_lib, xdg, ids, reason):
    out = gpusight(cli_env(tmp_path, fake_nvml_lib, four_gpus(), xdg), "--once", "--gpus", ids)
    assert out.returncode == 1
    assert out.stdout == ""
    [line] = out.stderr.splitlines()
    assert line.startswith(f"gpusight: --gpus: {reason}")
    assert line.endswith(", ".join(f"{i} {uuid} (NVIDIA Fake)" for i, uuid in enumerate(UUIDS)))
    assert "GPUs here: 0 " in line


@pytest.mark.parametrize(
    ("visible", "expected"),
    [("2,0", [(2, 0), (0, 1)]), (f"{UUIDS[3]},{UUIDS[1][:10]}", [(3, 0), (1, 1)]), ("3, 1 ,2", [(3, 0), (1, 1), (2, 2)])],
    ids=["indexes", "uuids", "spaces"],
)
def test_cuda_visible_takes_cuda_visible_devices_in_its_order(tmp_path, fake_nvml_lib, xdg, visible, expected):
    env = cli_env(tmp_path, fake_nvml_lib, four_gpus(), xdg, CUDA_VISIBLE_DEVICES=visible)
    data = json.loads(gpusight(env, "--json", "--cuda-visible").stdout)
    assert [(d["index"], d["cuda_index"]) for d in data["devices"]] == expected
    assert not [e for e in data["errors"] if e["scope"] == "filters"]
    lines = gpusight(env, "--once", "--cuda-visible").stdout.splitlines()
    assert lines[1] == f"filters: CUDA_VISIBLE_DEVICES={visible}"
    shown = [line.split("NVIDIA")[0].strip() for line in lines if "NVIDIA Fake" in line]
    assert shown == [f"{index} (cuda:{cuda})" for index, cuda in expected]


def test_cuda_visible_truncated_empty_and_unset(tmp_path, fake_nvml_lib, xdg):
    scenario = four_gpus()
    truncated = json.loads(gpusight(cli_env(tmp_path, fake_nvml_lib, scenario, xdg, CUDA_VISIBLE_DEVICES="1,9,0"),
                                  "--json", "--cuda-visible").stdout)
    assert [(d["index"], d["cuda_index"]) for d in truncated["devices"]] == [(1, 0)]
    [note] = [e["message"] for e in truncated["errors"] if e["scope"] == "filters"]
    assert "entry '9' names no GPU, so CUDA ignores it and every entry after it; GPUs visible to CUDA: 1" in note

    empty_env = cli_env(tmp_path, fake_nvml_lib, scenario, xdg, CUDA_VISIBLE_DEVICES="")
    empty = json.loads(gpusight(empty_env, "--json", "--cuda-visible").stdout)
    assert empty["devices"] == [] and empty["driver"] is not None
    assert [e["message"] for e in empty["errors"] if e["scope"] == "filters"] == [
        "CUDA_VISIBLE_DEVICES is empty: CUDA programs see no GPU"
    ]
    once = gpusight(empty_env, "--once", "--cuda-visible").stdout
    assert "filters: CUDA_VISIBLE_DEVICES empty: no GPU" in once and "No GPUs." in once

    unset = json.loads(gpusight(cli_env(tmp_path, fake_nvml_lib, scenario, xdg), "--json", "--cuda-visible").stdout)
    assert [(d["index"], d["cuda_index"]) for d in unset["devices"]] == [(0, None), (1, None), (2, None), (3, None)]


@pytest.fixture
def other_user() -> tuple[str, int, int]:
    """A second account to own processes (the tests run as root, which may switch to it)."""
    if os.geteuid() != 0:
        pytest.skip("running processes as another user needs root")
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' account on this host")
    return entry.pw_name, entry.pw_uid, entry.pw_gid


DAEMON = r"""
import os, sys, time
drop()
pid = os.fork()
if pid == 0:
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    time.sleep(600)
    os._exit(0)
print(pid, flush=True)
"""


@pytest.fixture
def foreign_process(other_user) -> Iterator[int]:
    """A sleeping process owned by the other user; killed afterwards."""
    _, uid, gid = other_user
    out = run_python_as(uid, gid, DAEMON, [])
    assert out.returncode == 0, out.stderr
    pid = int(out.stdout)
    wait_until(lambda: os.stat(f"/proc/{pid}").st_uid == uid, "the other user's process")
    yield pid
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_user_filters_processes_workers_and_their_advice_but_not_gpus(tmp_path, fake_nvml_lib, xdg, foreign_process, other_user):
    (xdg / "gpusight" / "config.toml").write_text(IDLE_ADVICE_AT_ONCE)
    me = pwd.getpwuid(os.getuid()).pw_name
    with fake_trainer(tmp_path, workers=("sleep", "sleep")) as trainer:
        env = cli_env(tmp_path, fake_nvml_lib, four_gpus({trainer.pid: 0, foreign_process: 1}), xdg)
        everyone = json.loads(gpusight(env, "--json").stdout)
        assert {f"pid{trainer.pid}", f"pid{foreign_process}"} <= {a["scope"] for a in everyone["advice"]}

        theirs = json.loads(gpusight(env, "--json", "--user", other_user[0]).stdout)
        assert [(p["pid"], p["user"]) for p in theirs["processes"]] == [(foreign_process, other_user[0])]
        assert f"pid{trainer.pid}" not in {a["scope"] for a in theirs["advice"]}
        assert f"pid{foreign_process}" in {a["scope"] for a in theirs["advice"]}
        assert [d["index"] for d in theirs["devices"]] == [0, 1, 2, 3]  # GPUs stay
        gpu_advice = {a["id"] for a in everyone["advice"] if a["scope"].startswith("gpu")}
        assert gpu_advice <= {a["id"] for a in theirs["advice"]}

        mine = json.loads(gpusight(env, "--json", "--user", str(os.getuid())).stdout)
        assert sorted(p["pid"] for p in mine["processes"]) == sorted([trainer.pid, *trainer.workers])
        assert {p["trainer_pid"] for p in mine["processes"] if p["role"] == "dataloader_worker"} == {trainer.pid}
        assert f"pid{foreign_process}" not in {a["scope"] for a in mine["advice"]}

        once = gpusight(env, "--once", "--user", me).stdout.splitlines()
        assert once[1] == f"filters: user {me}"
        assert not [line for line in once if f" {foreign_process} " in line]

    unknown = gpusight(env, "--once", "--user", "no-such-user-here")
    assert (unknown.returncode, unknown.stderr) == (1, "gpusight: --user: no user 'no-such-user-here' on this host\n")


def test_config_filters_apply_and_bad_values_only_warn(tmp_path, fake_nvml_lib, xdg):
    config = xdg / "gpusight" / "config.toml"
    with sleeper() as on_gpu2:
        env = cli_env(tmp_path, fake_nvml_lib, four_gpus({on_gpu2.pid: 2}), xdg, CUDA_VISIBLE_DEVICES="2,3")
        config.write_text(f'[filters]\ncuda_visible = true\nuser = "{pwd.getpwuid(os.getuid()).pw_name}"\n')
        data = json.loads(gpusight(env, "--json").stdout)
        assert [(d["index"], d["cuda_index"]) for d in data["devices"]] == [(2, 0), (3, 1)]
        assert [p["pid"] for p in data["processes"]] == [on_gpu2.pid]
        assert json.loads(gpusight(env, "--json", "--gpus", "0").stdout)["devices"][0]["index"] == 0  # the flag wins
        assert len(json.loads(gpusight(env, "--json", "--no-filters").stdout)["devices"]) == 4

        config.write_text('[filters]\ngpus = [0, 9]\ncuda_visible = "yes"\nuser = "no-such-user-here"\nsort = 1\n')
        out = gpusight(env, "--json")
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert [d["index"] for d in data["devices"]] == [0, 1, 2, 3]  # the unknown GPU 9 drops the GPU filter
        assert [p["pid"] for p in data["processes"]] == [on_gpu2.pid]
        messages = [e["message"] for e in data["errors"] if e["scope"] in ("config", "filters")]
        assert len(messages) == 4, messages
        for part in ("cuda_visible must be true or false", "no user 'no-such-user-here'", "unknown key 'sort'",
                     "[filters] gpus: there is no GPU 9"):
            assert sum(part in m for m in messages) == 1, (part, messages)


# -- the TUI in a real pty --------------------------------------------------------------------------------


def screen_text(svg_path: Path) -> str:
    """The text of an exported SVG screenshot, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", svg_path.read_text(encoding="utf-8"))).replace("\xa0", " ")


def export_now(app: PtyGpusight, directory: Path) -> tuple[dict, str]:
    """Press ``s`` and return the new export: the snapshot JSON and the screen's text."""
    before = set(directory.glob("gpusight-*.json"))
    app.send("s")
    [data_path] = wait_until(lambda: list(set(directory.glob("gpusight-*.json")) - before), "the export")
    return json.loads(data_path.read_text()), screen_text(data_path.with_suffix(".svg"))


def test_tui_shows_cuda_numbers_and_filters_and_toggles_my_processes(tmp_path, fake_nvml_lib, xdg, foreign_process, other_user):
    me = pwd.getpwuid(os.getuid()).pw_name
    exports = tmp_path / "exports"
    with fake_trainer(tmp_path, workers=("sleep",)) as trainer:
        env = cli_env(tmp_path, fake_nvml_lib, four_gpus({trainer.pid: 2, foreign_process: 0}), xdg,
                      CUDA_VISIBLE_DEVICES="2,0", TERM="xterm-256color")
        with PtyGpusight((140, 40), controlling=True, env=env,
                       args=("--cuda-visible", "--interval", "0.5", "--export-dir", str(exports))) as app:
            app.wait_for(lambda: ENTER_ALT_SCREEN in app.output and b"only CUDA_VISIBLE_DEVICES=2,0 " in app.output,
                         "the header naming the filter")
            before, screen = export_now(app, exports)
            assert [(d["index"], d["cuda_index"]) for d in before["devices"]] == [(2, 0), (0, 1)]
            assert {trainer.pid, foreign_process} <= {p["pid"] for p in before["processes"]}
            assert "GPU 2 (cuda:0)" in screen and "GPU 0 (cuda:1)" in screen
            assert str(foreign_process) in screen

            app.send("o")
            after, screen = export_now(app, exports)
            assert f" only CUDA_VISIBLE_DEVICES=2,0, user {me} " in screen
            assert sorted(p["pid"] for p in after["processes"]) == sorted([trainer.pid, *trainer.workers])
            assert [d["index"] for d in after["devices"]] == [2, 0]  # my filter hides no GPU
            assert str(trainer.pid) in screen and str(foreign_process) not in screen

            app.send("o")
            again, screen = export_now(app, exports)
            assert " only CUDA_VISIBLE_DEVICES=2,0 " in screen and f"user {me}" not in screen
            assert foreign_process in {p["pid"] for p in again["processes"]}
            assert str(foreign_process) in screen
            assert app.quit() == 0
