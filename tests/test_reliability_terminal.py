"""Terminal faults against the real ``gpusight`` TUI in a pseudo-terminal: hangup, SIGTERM, stdin at EOF,
a terminal that disappears, a resize storm, a 20x5 terminal, and quitting (``q`` or Ctrl-C) while every
NVML call blocks for 2 s.

Each test starts ``python -m gpusight --demo healthy`` on the slave side of a pty (the test keeps a
copy of the slave, so it can read the terminal modes after gpusight is gone) and drains the master
side the way a terminal emulator would. "Restored" means what a user sees afterwards: the line
discipline is back in canonical mode with echo, and the last things written were leaving the
alternate screen and showing the cursor. Deadlines below only catch hangs; they are not speed
measurements.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections.abc import Callable, Iterator

import psutil
import pytest

from gpusight.demo.source import DemoSource
from gpusight.sampling.history import History
from gpusight.sampling.sampler import Sampler
from gpusight.ui.main.app import GpusightApp
from gpusight.ui.messages import FrameReady
from support.fake_nvml import FakeGpu, FakeScenario
from support.terminal import ENTER_ALT_SCREEN, PtyGpusight, set_size

LOST_TERMINAL_CPU_SECONDS = 0.75
"""Most CPU time gpusight may use between losing its terminal and exiting (a spin would use ~1 s per second)."""

IDLE_CPU_FRACTION = 0.5
"""Most CPU (fraction of one core) gpusight may use while idling after a resize storm at a 0.5 s interval."""

BLOCKED_CALL_MS = 2000
"""How long every NVML call blocks in the quit tests."""

QUIT_LIMIT_S = 1.0
"""The issue's limit: ``q`` and Ctrl-C quit within a second even while an NVML call blocks."""


def cpu_seconds(process: psutil.Process) -> float:
    """User plus system CPU time used so far."""
    times = process.cpu_times()
    return times.user + times.system


@pytest.fixture
def start_gpusight() -> Iterator[Callable[..., PtyGpusight]]:
    """Factory starting gpusight on a pty; everything is cleaned up after the test."""
    started: list[PtyGpusight] = []

    def start(size: tuple[int, int] = (100, 30), *, controlling: bool = True, stdin_tty: bool = True,
              args: tuple[str, ...] = ("--demo", "healthy")) -> PtyGpusight:
        app = PtyGpusight(size, controlling=controlling, stdin_tty=stdin_tty, args=args)
        started.append(app)
        return app

    yield start
    for app in started:
        app.cleanup()


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGHUP, 129), (signal.SIGTERM, 143)])
def test_hangup_and_terminate_exit_cleanly_and_restore_the_terminal(start_gpusight, sig, status):
    app = start_gpusight()
    app.wait_up()
    assert not app.canonical()  # the app really had the terminal in raw mode

    app.proc.send_signal(sig)

    assert app.reap() == status
    assert app.canonical()
    assert app.restored()
    assert "Traceback" not in app.text()


@pytest.mark.parametrize("controlling", [True, False], ids=["with-sighup", "without-sighup"])
def test_a_vanished_terminal_ends_gpusight_without_spinning(start_gpusight, controlling):
    app = start_gpusight(controlling=controlling)
    app.wait_up()
    before = cpu_seconds(psutil.Process(app.proc.pid))

    app.close_master()

    assert app.reap() == 129
    assert app.rusage_cpu is not None
    assert app.rusage_cpu - before < LOST_TERMINAL_CPU_SECONDS


def test_stdin_at_end_of_file_ends_gpusight_and_restores_the_screen(start_gpusight):
    app = start_gpusight(stdin_tty=False)

    assert app.reap() == 129
    assert app.restored() or ENTER_ALT_SCREEN not in app.output
    assert app.canonical()
    assert "Traceback" not in app.text()


def test_a_resize_storm_leaves_gpusight_responsive_and_idle(start_gpusight):
    app = start_gpusight()
    app.wait_up()
    rng = random.Random(7)
    sizes = [(20, 5), (1, 1), (300, 100), (80, 24), (43, 11), (160, 45), (200, 2)]
    for _ in range(300):
        set_size(app.slave, *rng.choice(sizes))  # the kernel sends SIGWINCH to gpusight for each change
        time.sleep(0.002)
    set_size(app.slave, 100, 30)
    time.sleep(1.0)  # let the last resize's full redraw through; after that only changed cells are sent
    settled = len(app.output)
    os.write(app.master, b"?")
    app.wait_for(lambda: b"gpusight keys" in app.output[settled:], "the help screen after the storm")
    os.write(app.master, b"\x1b")
    time.sleep(0.5)
    process = psutil.Process(app.proc.pid)
    start_cpu, start_wall = cpu_seconds(process), time.monotonic()
    time.sleep(2.0)
    used = (cpu_seconds(process) - start_cpu) / (time.monotonic() - start_wall)

    os.write(app.master, b"q")

    assert app.reap() == 0
    assert used < IDLE_CPU_FRACTION
    assert app.canonical() and app.restored()
    assert "Traceback" not in app.text()


def test_a_20x5_terminal_runs_and_quits(start_gpusight):
    app = start_gpusight(size=(20, 5))
    app.wait_for(lambda: ENTER_ALT_SCREEN in app.output and b"Quit" in app.output, "the first screen")
    drawn = len(app.output)
    os.write(app.master, b"?")  # only changed cells are sent, so a steady 20x5 screen may write nothing: ask for one
    app.wait_for(lambda: len(app.output) > drawn, "a later update (the help screen)")
    os.write(app.master, b"\x1b")
    time.sleep(0.5)  # a lone Esc, not Alt+q

    os.write(app.master, b"q")

    assert app.reap() == 0
    assert app.canonical() and app.restored()
    assert "Traceback" not in app.text()


def test_a_20x5_screen_keeps_every_line_inside_the_terminal():
    clock = iter(range(1_700_000_000, 1_800_000_000))
    sampler = Sampler(DemoSource("mixed", seed=1, clock=lambda: float(next(clock))), interval=3600.0,
                      history=History(100))
    for _ in range(10):
        sampler.poll_once()
    app = GpusightApp(sampler)
    lines: list[str] = []

    async def main() -> None:
        async with app.run_test(size=(20, 5)) as pilot:
            for _ in range(5):
                sampler.poll_once()
                app.post_message(FrameReady(sampler.latest_frame))
                await pilot.pause()
            await pilot.resize_terminal(20, 5)
            await pilot.pause()
            lines.extend(strip.text for strip in app.screen._compositor.render_strips())

    asyncio.run(main())

    assert 0 < len(lines) <= 5
    assert all(len(line) <= 20 for line in lines)
    assert app.snapshots_applied >= 5


@pytest.mark.parametrize("key", [b"q", b"\x03"], ids=["q", "ctrl-c"])
def test_quitting_takes_under_a_second_while_nvml_blocks_and_never_shuts_nvml_down_under_a_call(
        start_gpusight, nvml_scenario, key):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(), FakeGpu()]))
    app = start_gpusight(size=(120, 40), args=("--interval", "0.2"))
    app.wait_up(marker=b"H100")
    nvml_scenario.clear_log()
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(), FakeGpu()], call_delay_ms=BLOCKED_CALL_MS))
    app.wait_for(lambda: any(call.symbol.endswith(".delay") for call in nvml_scenario.calls()), "an NVML call to block")
    assert not app.canonical()  # the app still has the terminal

    pressed = time.monotonic()
    status = app.quit(key)
    took = time.monotonic() - pressed

    assert status == 0
    assert took < QUIT_LIMIT_S
    assert app.canonical() and app.restored()
    assert "Traceback" not in app.text()
    in_flight_at_shutdown = [call.argument for call in nvml_scenario.calls() if call.symbol == "nvmlShutdown"]
    assert all(count == 0 for count in in_flight_at_shutdown), in_flight_at_shutdown


def test_a_driver_that_hangs_from_the_start_still_gets_a_screen_that_quits(start_gpusight, nvml_scenario):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(), FakeGpu()], call_delay_ms=BLOCKED_CALL_MS))
    app = start_gpusight(size=(120, 40), args=("--interval", "0.2"))
    app.wait_for(lambda: ENTER_ALT_SCREEN in app.output and b"Quit" in app.output, "the screen without data")
    assert any(call.symbol.endswith(".delay") for call in nvml_scenario.calls()), "the first poll is still blocked"

    pressed = time.monotonic()
    status = app.quit(b"\x03")
    took = time.monotonic() - pressed

    assert status == 0
    assert took < QUIT_LIMIT_S
    assert app.canonical() and app.restored()
    assert "Traceback" not in app.text()


def test_quitting_with_nvml_answering_shuts_nvml_down_once_with_no_call_in_flight(start_gpusight, nvml_scenario):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(pcie_tx_kbps=100, pcie_rx_kbps=200)], pcie_delay_ms=20))
    app = start_gpusight(size=(120, 40), args=("--interval", "0.2"))
    app.wait_up(marker=b"H100")
    app.wait_for(lambda: nvml_scenario.count("nvmlDeviceGetPcieThroughput") > 3, "the PCIe thread to poll")

    app.send(b"q")

    assert app.reap() == 0
    calls = nvml_scenario.calls()
    assert [call.argument for call in calls if call.symbol == "nvmlShutdown"] == [0]
    assert calls[-1].symbol == "nvmlShutdown"  # no NVML call after it
