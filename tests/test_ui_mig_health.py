"""MIG devices, hardware health and the video engines on the main and GPU detail screens (issue 29), at 80x24 and
160x45, on the demo's mig, faulty and video-decode stories and on hand-built snapshots with hostile strings."""

from __future__ import annotations

import dataclasses
import re

import pytest
from test_ui_app import demo_sampler, run_app, screen_text, wait_for
from textual.pilot import Pilot

from gpusight.demo.frozen import frozen_demo_sampler
from gpusight.snapshot.model import DeviceHealth, MigDeviceSample, Snapshot, XidEvent
from gpusight.ui.detail.gpu_detail import GpuDetailScreen
from gpusight.ui.detail.process_detail import ProcessDetailScreen
from gpusight.ui.main.app import GpusightApp
from gpusight.ui.main.gpu_panel import GpuPanel
from gpusight.ui.main.process_table import ProcessTable

SMALL = (80, 24)
LARGE = (160, 45)
SIZES = pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x45"])


def panel_text(panel: GpuPanel) -> str:
    """Every line of one GPU panel as plain text."""
    return "\n".join(panel.render_line(y).text for y in range(panel.size.height))


async def shown(app: GpusightApp, pilot: Pilot) -> list[GpuPanel]:
    """The GPU panels once a snapshot is drawn."""
    await wait_for(pilot, lambda: app.snapshots_applied >= 1)
    await pilot.pause()
    return list(app.query(GpuPanel))


async def open_detail(app: GpusightApp, pilot: Pilot, index: int) -> str:
    """Open GPU ``index``'s detail screen and return its fields and sections, one ``label value`` a line."""
    panels = await shown(app, pilot)
    panels[index].focus()
    await pilot.press("enter")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, GpuDetailScreen)
    await wait_for(pilot, lambda: "compute capability" in screen.fields_text)
    assert "\x1b" not in screen_text(app)
    return screen.fields_text


@SIZES
def test_each_mig_instance_is_shown_under_its_gpu_and_the_gpu_util_is_na(size: tuple[int, int]) -> None:
    app = GpusightApp(frozen_demo_sampler("mig"))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        panels = await shown(app, pilot)
        mig, whole = panel_text(panels[0]), panel_text(panels[1])
        snapshot = app.snapshot
        assert snapshot is not None and len(snapshot.mig_devices) == 4
        for instance in snapshot.mig_devices:
            assert f"g{instance.gpu_instance_id}" in mig and instance.profile in mig
        assert "N/A" in mig and "util 0%" not in mig
        assert "31." in mig and "39.4GiB" in mig  # the 3g.40gb slice's memory, used and total
        assert "13MiB/9.62GiB" in mig  # the free slice holds only what the driver keeps
        assert "g2" not in whole
        text = screen_text(app)
        assert "[g2.c0]" in text and "[g3.c0]" in text  # the processes' instances lead their commands

    run_app(app, size, body)


def test_mig_detail_lists_instances_with_their_processes() -> None:
    app = GpusightApp(frozen_demo_sampler("mig"))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        text = await open_detail(app, pilot, 0)
        assert "NVML gives no utilization on a MIG-enabled GPU" in text
        for line in ("g2.c0 3g.40gb", "g3.c0 2g.20gb", "g9.c0 1g.10gb", "g10.c0 1g.10gb"):
            assert line in text
        snapshot = app.snapshot
        assert snapshot is not None
        for process in snapshot.processes:
            if process.gpu_instance_id is not None:
                assert f"PID {process.pid}" in text
        assert "60 SMs" in text and "MIG-" in text

    run_app(app, LARGE, body)


@SIZES
def test_faulty_gpus_wear_their_health_badge(size: tuple[int, int]) -> None:
    app = GpusightApp(frozen_demo_sampler("faulty"))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        remap, link, healthy = (panel_text(p) for p in await shown(app, pilot))
        assert "REMAP" in remap
        assert "PCIe Gen3" in link or "PCIe x8" in link
        if size == LARGE:
            assert "DRAIN REMAP +2" in remap and "DRAIN PCIe x8 +2" in link
        assert "DRAIN" not in healthy and "REMAP" not in healthy and "PCIe" not in healthy.split("util")[0]

    run_app(app, size, body)


def test_faulty_detail_explains_the_score_and_lists_the_xids() -> None:
    app = GpusightApp(frozen_demo_sampler("faulty"))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        text = await open_detail(app, pilot, 0)
        assert "score 0/100" in text
        assert "row remap pending: reset needed" in text and "-50 DRAIN" in text
        assert "Xid 48: double-bit ECC error" in text
        assert "remapped rows" in text and "uncorrectable 2, pending yes" in text
        assert "ECC aggregate" in text and "uncorrected 3" in text
        assert "Xid 94" in text and "contained ECC error" in text

    run_app(app, LARGE, body)


def test_degraded_link_detail_shows_now_against_max() -> None:
    app = GpusightApp(frozen_demo_sampler("faulty"))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        text = await open_detail(app, pilot, 1)
        assert "Gen3 x8 now, Gen5 x16 max" in text
        assert "PCIe link degraded to x8" in text

    run_app(app, LARGE, body)


@SIZES
def test_a_busy_decoder_is_charted_and_its_figures_shown(size: tuple[int, int]) -> None:
    app = GpusightApp(frozen_demo_sampler("video-decode"))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        panels = await shown(app, pilot)
        decoding, jpeg = panel_text(panels[0]), panel_text(panels[1])
        snapshot = app.snapshot
        assert snapshot is not None
        decoder = snapshot.devices[0].decoder_percent
        assert decoder is not None and decoder >= 90
        assert f"DEC {decoder:.0f}%" in decoding  # the decoder chart's label, and on wide panels the title's figure
        assert "DEC" not in jpeg.splitlines()[1]  # an idle decoder gets no chart
        if size == LARGE:
            assert "JPG" in jpeg and "ENC 0%" in decoding

    run_app(app, size, body)


def test_video_engines_section_in_the_detail_screen() -> None:
    app = GpusightApp(frozen_demo_sampler("video-decode"))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        text = await open_detail(app, pilot, 0)
        assert "encoder (NVENC) 0%" in text and "optical flow (OFA) 0%" in text
        decoder = re.search(r"decoder \(NVDEC\) (\d+)%", text)
        assert decoder is not None and 91 <= int(decoder.group(1)) <= 99  # the story's decoder, near its limit

    run_app(app, LARGE, body)


HOSTILE = "\x1b[31m3g\x1b]0;pwn\x07.40gb[b]x[/b]"


def hostile_mig(snapshot: Snapshot) -> Snapshot:
    """GPU 0 as a MIG-enabled GPU whose instances carry hostile strings, with an Xid 79 on it."""
    device = dataclasses.replace(
        snapshot.devices[0], mig_mode=True, utilization_gpu_percent=None,
        health=DeviceHealth(xid_total=1, xid_recent=(XidEvent(79, snapshot.timestamp - 5, 1, 0),)),
    )
    migs = (
        MigDeviceSample(0, 0, 1, 0, HOSTILE, "MIG-\x1b[2J\u202eevil", None, 42, 2**30, 20 * 2**30,
                        utilization_note="\x1b[5mno GPM on Ampere\x07"),
        MigDeviceSample(0, 1, 2, 0, "2g.20gb", "MIG-ok", None, 28, 2**29, 10 * 2**30, 12.0, 5.0, 3.0, 4.0),
        MigDeviceSample(0, 2, 3, 0, "1g.10gb", None, None, None, None, None, error="\x1b[31mread failed"),
    )
    return dataclasses.replace(snapshot, devices=(device, *snapshot.devices[1:]), mig_devices=migs)


@SIZES
def test_hostile_mig_strings_are_escaped_and_missing_figures_read_na(size: tuple[int, int]) -> None:
    app = GpusightApp(demo_sampler("small-batch", edit=hostile_mig))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        panels = await shown(app, pilot)
        text = panel_text(panels[0])
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
        assert "[b]x[/b]" in text or "?[31m3g" in text  # markup and escapes shown as text, not obeyed
        assert "Xid 79" in text
        if size == LARGE:
            assert "DRAIN Xid 79" in text and "no GPM on Ampere" in text and "read failed" in text
        assert "N/A/N/A" in text or size == SMALL  # the broken instance's memory is unknown, not 0
        detail = await open_detail(app, pilot, 0)
        assert "\x1b" not in detail and "\u202e" not in detail
        assert "Xid 79" in detail and "fallen off the bus" in detail
        assert "no GPM on Ampere" in detail

    run_app(app, size, body)


@pytest.mark.parametrize(("scenario", "expected"), [
    ("mig", r"GPU 0 MIG instance g2\.c0, GPU memory"),
    ("video-decode", r"video encoder 0%, decoder 9\d%"),
])
def test_process_detail_names_its_mig_instance_and_video_engines(scenario: str, expected: str) -> None:
    app = GpusightApp(frozen_demo_sampler(scenario))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await shown(app, pilot)
        table = app.query_one(ProcessTable)
        table.sort_by("pid")
        await pilot.pause()
        selected = table.selected_process()
        assert selected is not None and selected.device_index == 0 and selected.trainer_pid is None
        table.focus()
        await pilot.press("enter")
        screen = app.screen
        assert isinstance(screen, ProcessDetailScreen)
        await wait_for(pilot, lambda: bool(screen.identity_text))
        assert re.search(expected, screen.identity_text), screen.identity_text

    run_app(app, LARGE, body)
