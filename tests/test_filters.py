"""GPU requests resolved against a set of GPUs, CUDA_VISIBLE_DEVICES read as CUDA reads it, the user view, the sampler
applying it, and the ``[filters]`` config section: the rules behind ``--gpus``, ``--cuda-visible`` and ``--user``."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys

import pytest

from gpusight.facts.gpu_selection import (
    CudaVisible,
    GpuIdentity,
    GpuIds,
    GpuSelection,
    SelectedGpu,
    gpu_number,
    resolve_gpus,
    select_gpus,
)
from gpusight.sampling.filters import (
    Filters,
    UnknownUserError,
    UserFilter,
    current_user_filter,
    filters_from_config,
    user_filter,
)
from gpusight.snapshot.model import (
    Advice,
    DeviceSample,
    ErrorNote,
    ProcessRole,
    ProcessSample,
    Severity,
    Snapshot,
    SourceKind,
)

UUIDS = {
    0: "GPU-5f3a0000-1111-2222-3333-444444444444",
    1: "GPU-5f3b0000-1111-2222-3333-444444444444",
    2: "GPU-a7000000-1111-2222-3333-444444444444",
    3: "GPU-c0ffee00-1111-2222-3333-444444444444",
}


class Lookups:
    """GPU identities for four GPUs (all the same board unless ``names`` says otherwise); remembers which were asked for."""

    def __init__(self, names: tuple[str, ...] = ("Board",) * 4) -> None:
        self.names = names
        self.asked: list[int] = []

    def __call__(self, index: int) -> GpuIdentity:
        self.asked.append(index)
        return GpuIdentity(index, UUIDS[index], self.names[index])


def resolve(request, count: int = 4, names: tuple[str, ...] = ("Board",) * 4):
    lookups = Lookups(names)
    return resolve_gpus(request, range(count), lookups), lookups


def indexes(selection) -> list[tuple[int, int | None]]:
    return [(gpu.index, gpu.cuda_index) for gpu in selection.gpus]


def test_indexes_keep_the_order_given_and_never_look_up_other_gpus():
    selection, lookups = resolve(GpuIds(("3", "0", "3")))
    assert indexes(selection) == [(3, None), (0, None)]
    assert selection.error is None and selection.notes == ()
    assert lookups.asked == []  # plain indexes need no UUIDs


def test_uuid_prefixes_in_any_case():
    selection, _ = resolve(GpuIds(("gpu-C0FFEE", UUIDS[1])))
    assert indexes(selection) == [(3, None), (1, None)]


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        (("7",), "there is no GPU 7"),
        (("GPU-dead",), "no GPU has a UUID starting with 'GPU-dead'"),
        (("GPU-5f3",), "'GPU-5f3' matches GPUs 0, 1; give more of the UUID"),
        (("cuda:0",), "'cuda:0' is neither a GPU index nor a UUID"),
        (("0", ""), "empty GPU id"),
    ],
)
def test_a_bad_id_is_an_error_that_lists_the_gpus(ids, expected):
    selection, _ = resolve(GpuIds(ids))
    assert selection.gpus == ()
    assert selection.error.startswith(f"--gpus: {expected}")
    assert f"GPUs here: 0 {UUIDS[0]} (Board), 1 {UUIDS[1]} (Board), 2 {UUIDS[2]} (Board)" in selection.error
    assert "\n" not in selection.error


def test_without_gpus_the_error_says_so():
    selection = resolve_gpus(GpuIds(("0",)), range(0), Lookups())
    assert selection.error == "--gpus: there is no GPU 0; there are no GPUs here"


def test_a_bad_id_from_the_config_file_is_a_note_and_every_gpu_stays():
    selection, _ = resolve(GpuIds(("0", "9"), origin="cfg.toml: [filters] gpus", lenient=True))
    assert selection.error is None
    assert indexes(selection) == [(0, None), (1, None), (2, None), (3, None)]
    [note] = selection.notes
    assert note.startswith("cfg.toml: [filters] gpus: there is no GPU 9;") and note.endswith("showing all GPUs")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2,0", [(2, 0), (0, 1)]),
        (" 3 , 1 ", [(3, 0), (1, 1)]),
        ("1abc,0", [(1, 0), (0, 1)]),  # CUDA reads the leading digits
        (f"{UUIDS[3]},GPU-5f3b", [(3, 0), (1, 1)]),
        ("GPU-A7", [(2, 0)]),
    ],
)
def test_cuda_visible_devices_in_cuda_order_with_cuda_numbers(value, expected):
    selection, _ = resolve(CudaVisible(value))
    assert indexes(selection) == expected
    assert selection.notes == () and selection.error is None


@pytest.mark.parametrize(
    ("value", "expected", "entry"),
    [
        ("1,7,0", [(1, 0)], "'7' names no GPU"),
        ("2,-1,0", [(2, 0)], "'-1' is not a GPU index"),
        ("-1", [], "'-1' is not a GPU index"),
        ("0,GPU-c0ffee", [(0, 0)], "'GPU-c0ffee' mixes UUIDs and indexes"),
        ("GPU-a7,GPU-5f3", [(2, 0)], "'GPU-5f3' matches several GPUs"),
        ("GPU-a7,GPU-zz,0", [(2, 0)], "'GPU-zz' matches no GPU"),
        ("MIG-1234", [], "'MIG-1234' matches no MIG device"),
        ("0,,1", [(0, 0)], "'' is not a GPU index"),
    ],
)
def test_an_invalid_entry_ends_the_list_there_as_in_cuda(value, expected, entry):
    selection, _ = resolve(CudaVisible(value))
    assert indexes(selection) == expected
    [note] = selection.notes
    assert f"entry {entry}" in note
    assert note.endswith("GPUs visible to CUDA: " + (",".join(str(i) for i, _ in expected) or "none"))


def test_empty_cuda_visible_devices_means_no_gpu_and_says_so():
    selection, _ = resolve(CudaVisible(""))
    assert selection.gpus == ()
    assert selection.notes == ("CUDA_VISIBLE_DEVICES is empty: CUDA programs see no GPU",)
    assert CudaVisible("").describe() == "CUDA_VISIBLE_DEVICES empty: no GPU"


def test_a_gpu_named_twice_leaves_cuda_without_gpus():
    selection, _ = resolve(CudaVisible("1,0,1"))
    assert selection.gpus == ()
    assert selection.notes == ("CUDA_VISIBLE_DEVICES names GPU 1 twice: CUDA programs see no GPU",)


MIXED_BOARDS = ("H100", "H100", "A100", "H100")


@pytest.mark.parametrize(
    ("request_", "names", "warned"),
    [
        (CudaVisible("2,0"), MIXED_BOARDS, True),
        (CudaVisible("2,0", "FASTEST_FIRST"), MIXED_BOARDS, True),
        (CudaVisible("2,0", "PCI_BUS_ID"), MIXED_BOARDS, False),
        (CudaVisible("GPU-a7,GPU-5f3a"), MIXED_BOARDS, False),  # UUIDs name GPUs whatever the order
        (CudaVisible("2,0"), ("H100",) * 4, False),  # alike GPUs: CUDA's order is the bus order
    ],
)
def test_integer_entries_on_mixed_gpus_warn_unless_cuda_orders_by_pci_bus(request_, names, warned):
    selection, _ = resolve(request_, names=names)
    assert indexes(selection) == [(2, 0), (0, 1)]
    expected = ("CUDA_DEVICE_ORDER is not PCI_BUS_ID and the GPUs differ: CUDA may number them fastest first, so its "
                "GPU numbers can name other GPUs than shown; set CUDA_DEVICE_ORDER=PCI_BUS_ID")
    assert selection.notes == ((expected,) if warned else ())


def test_cuda_visible_is_read_from_the_environment():
    assert CudaVisible.from_environment({"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}) == CudaVisible(
        "1", "PCI_BUS_ID"
    )
    assert CudaVisible.from_environment({}) == CudaVisible(None, None)


def test_unset_cuda_visible_devices_means_every_gpu_without_cuda_numbers():
    selection, _ = resolve(CudaVisible(None))
    assert indexes(selection) == [(0, None), (1, None), (2, None), (3, None)]
    assert CudaVisible(None).describe() == "CUDA_VISIBLE_DEVICES unset: all GPUs"


def test_gpu_number_shows_cuda_beside_nvml():
    assert gpu_number(DeviceSample(3)) == "3"
    assert gpu_number(DeviceSample(3, cuda_index=0)) == "3 (cuda:0)"


def _process(pid, user, *, role=ProcessRole.GPU, trainer=None, ppid=None, device=0):
    return ProcessSample(pid=pid, role=role, trainer_pid=trainer, user=user, ppid=ppid, device_index=device)


def _advice(scope):
    return Advice(id=f"rule:{scope}", severity=Severity.WARN, scope=scope, title=scope, evidence="", action="")


SHARED = Snapshot(
    timestamp=1.0,
    source=SourceKind.NVML,
    devices=(DeviceSample(0), DeviceSample(1)),
    processes=(
        _process(100, "alice", ppid=90),
        _process(101, "alice", role=ProcessRole.DATALOADER_WORKER, trainer=100),
        _process(200, "bob", ppid=190, device=1),
        _process(201, "bob", role=ProcessRole.DATALOADER_WORKER, trainer=200, device=1),
        _process(300, "1234", device=1),  # an owner without a name shows the uid
    ),
    advice=tuple(_advice(s) for s in ("host", "gpu0", "gpu1", "pid100", "pid101", "pid90", "pid200", "pid190", "pid300")),
)


def test_the_user_view_keeps_the_users_processes_their_workers_and_their_advice():
    view = UserFilter("alice", 1000).apply(SHARED)
    assert [p.pid for p in view.processes] == [100, 101]
    assert [a.scope for a in view.advice] == ["host", "gpu0", "gpu1", "pid100", "pid101", "pid90"]
    assert view.devices == SHARED.devices  # GPUs are never hidden by the user filter


def test_the_user_view_matches_a_numeric_owner_by_uid():
    view = UserFilter("carol", 1234).apply(SHARED)
    assert [p.pid for p in view.processes] == [300]
    assert [a.scope for a in view.advice] == ["host", "gpu0", "gpu1", "pid300"]


def test_filters_without_a_user_change_nothing():
    assert Filters(gpus=GpuIds(("0",))).apply(SHARED) is SHARED
    assert Filters().describe() is None
    assert Filters(GpuIds(("0", "3")), UserFilter("alice")).describe() == "GPUs 0,3, user alice"


def test_user_names_and_uids_come_from_the_password_database():
    root = pwd.getpwuid(0).pw_name
    assert user_filter(root) == UserFilter(root, 0)
    assert user_filter("0") == UserFilter(root, 0)
    assert current_user_filter() == UserFilter(pwd.getpwuid(os.getuid()).pw_name, os.getuid())
    with pytest.raises(UnknownUserError, match="no user 'no-such-user-here' on this host"):
        user_filter("no-such-user-here")
    assert user_filter("no-such-user-here", must_exist=False) == UserFilter("no-such-user-here")


def test_config_section_accepts_lists_strings_and_cuda_visible():
    env = {"CUDA_VISIBLE_DEVICES": "3,1"}
    root = pwd.getpwuid(0).pw_name
    filters, warnings = filters_from_config({"gpus": [0, "GPU-5f3a"], "user": root}, "c.toml", env)
    assert warnings == []
    assert filters == Filters(GpuIds(("0", "GPU-5f3a"), origin="c.toml: [filters] gpus", lenient=True), UserFilter(root, 0))
    assert filters_from_config({"gpus": "0, 3"}, "c.toml", env)[0].gpus.ids == ("0", "3")
    assert filters_from_config({"cuda_visible": True}, "c.toml", env) == (Filters(CudaVisible("3,1")), [])
    assert filters_from_config({"cuda_visible": True}, "c.toml", {}) == (Filters(CudaVisible(None)), [])
    assert filters_from_config({"cuda_visible": False}, "c.toml", env) == (Filters(), [])


def test_bad_config_values_warn_and_leave_that_filter_off():
    section = {"gpus": [0.5], "cuda_visible": "yes", "user": "no-such-user-here", "colour": "red"}
    filters, warnings = filters_from_config(section, "c.toml", {})
    assert filters == Filters()
    assert len(warnings) == 4 and all(w.startswith("c.toml: [filters] ") and w.endswith("; ignored") for w in warnings)
    for key in ("gpus must be a list", "cuda_visible must be true or false", "no user 'no-such-user-here'", "unknown key 'colour'"):
        assert sum(key in w for w in warnings) == 1, (key, warnings)
    assert filters_from_config({"gpus": []}, "c.toml", {})[1] == [
        "c.toml: [filters] gpus must name at least one GPU, without empty entries; ignored"
    ]
    assert filters_from_config(3, "c.toml", {}) == (Filters(), ["c.toml: [filters] must be a table; filters ignored"])


def test_gpus_and_cuda_visible_together_keep_gpus_and_say_so():
    filters, warnings = filters_from_config({"cuda_visible": True, "gpus": [1]}, "c.toml", {"CUDA_VISIBLE_DEVICES": "0"})
    assert isinstance(filters.gpus, GpuIds) and filters.gpus.ids == ("1",)
    assert warnings == ["c.toml: [filters] gpus and cuda_visible are both set; only gpus is used"]


def test_changing_the_filters_hands_out_the_newest_snapshot_again_and_keeps_history():
    from gpusight.demo.source import DemoSource
    from gpusight.sampling.sampler import Sampler

    sampler = Sampler(DemoSource("mixed"))
    received: list[Snapshot] = []
    sampler.subscribe(lambda frame: received.append(frame.snapshot))
    assert sampler.set_filters(Filters(user=UserFilter("bob"))) is None  # nothing polled yet
    first = sampler.poll_once()
    assert {p.user for p in first.processes} == {"bob"} and len(first.devices) == 8
    polls = len(sampler.history)

    everyone_frame = sampler.set_filters(Filters())
    assert everyone_frame is not None and everyone_frame.charts is sampler.grid.view  # a view change keeps the charts
    everyone = everyone_frame.snapshot
    assert received == [everyone] and sampler.latest_frame.snapshot is everyone
    assert len({p.user for p in everyone.processes}) > 1 and everyone.timestamp == first.timestamp
    assert len(sampler.history) == polls  # a view change is not a poll
    alice_frame = sampler.set_filters(Filters(user=UserFilter("alice")))
    assert alice_frame is not None
    alice = alice_frame.snapshot
    assert received[-1] is alice and {p.user for p in alice.processes} == {"alice"}
    assert alice.advice == tuple(a for a in everyone.advice if a in alice.advice)  # a subset, in order
    sampler.stop()


def _gpusight(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, timeout=60, env=env)


def test_demo_and_replay_data_are_limited_to_the_chosen_gpus(tmp_path):
    recording = tmp_path / "run.jsonl"
    made = _gpusight("--demo", "imbalance", "--record", str(recording), "--duration", "0.4", "--interval", "0.2", "--json")
    assert made.returncode == 0, made.stderr
    recorded = json.loads(recording.read_text().splitlines()[-1])
    assert len(recorded["devices"]) >= 3
    last = recorded["devices"][-1]["index"]
    replay = _gpusight("--replay", str(recording), "--json", "--gpus", f"{last},0")
    assert replay.returncode == 0, replay.stderr
    data = json.loads(replay.stdout)
    assert [d["index"] for d in data["devices"]] == [last, 0]
    assert {p["device_index"] for p in data["processes"]} <= {last, 0}
    assert all(not a["scope"].startswith("gpu") or a["scope"] in (f"gpu{last}", "gpu0") for a in data["advice"])
    bad = _gpusight("--replay", str(recording), "--once", "--gpus", "42")
    assert bad.returncode == 1
    assert bad.stderr.startswith("gpusight: --gpus: there is no GPU 42; GPUs here: 0 GPU-") and bad.stderr.count("\n") == 1
    visible = _gpusight("--demo", "mixed", "--json", "--cuda-visible")
    assert [d["cuda_index"] for d in json.loads(visible.stdout)["devices"]] == [None] * 8  # CUDA_VISIBLE_DEVICES unset


def test_selecting_gpus_keeps_their_processes_advice_and_errors_in_the_chosen_order():
    snapshot = Snapshot(
        timestamp=1.0,
        source=SourceKind.REPLAY,
        devices=(DeviceSample(0), DeviceSample(1), DeviceSample(2)),
        processes=(_process(10, "a", device=0, ppid=5), _process(11, "a", role=ProcessRole.DATALOADER_WORKER, trainer=10),
                   _process(20, "b", device=1, ppid=6)),
        advice=tuple(_advice(s) for s in ("host", "gpu0", "gpu1", "gpu2", "pid10", "pid5", "pid20", "pid6")),
        errors=(ErrorNote("gpu1", "lost"), ErrorNote("replay", "line 3: bad")),
    )
    selection = GpuSelection((SelectedGpu(2, 0), SelectedGpu(0, 1)), notes=("a note",))
    chosen = select_gpus(snapshot, selection)
    assert [(d.index, d.cuda_index) for d in chosen.devices] == [(2, 0), (0, 1)]
    assert [p.pid for p in chosen.processes] == [10, 11]
    assert [a.scope for a in chosen.advice] == ["host", "gpu0", "gpu2", "pid10", "pid5"]
    assert chosen.errors == (ErrorNote("replay", "line 3: bad"), ErrorNote("filters", "a note"))
