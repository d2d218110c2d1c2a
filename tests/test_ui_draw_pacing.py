"""Drawing less often than polling (``--refresh``): a one-poll spike the screen never drew still shows in its chart,
the screen is redrawn about once per refresh period while the sampler polls faster, and keys are answered at once.

The spike runs the real app headless (Textual's Pilot) over the real sampler on the fake ``libnvidia-ml.so.1``; the
cadence and the key run ``python -m gpusight`` in a real pty on the same fake.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable

from test_cluster_e2e import visible
from test_ui_app import demo_sampler
from textual.pilot import Pilot

from gpusight.backends.host.source import HostSource
from gpusight.backends.live import LiveSource
from gpusight.sampling.frame import Frame
from gpusight.sampling.history import History
from gpusight.sampling.sampler import Sampler
from gpusight.ui.main.app import GpusightApp
from gpusight.ui.main.gpu_panel import GpuPanel
from gpusight.ui.messages import FrameReady
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env
from support.terminal import PtyTerminal, gpusight_argv

QUIET = FakeScenario(gpus=[FakeGpu(util_gpu=0, util_mem=0)])
"""One GPU doing nothing: its utilization chart is blank."""

SPIKE = FakeScenario(gpus=[FakeGpu(util_gpu=100, util_mem=0)])
"""The same GPU flat out."""


def util_chart(app: GpusightApp) -> tuple[str, list[str]]:
    """The GPU panel's utilization text (``util 0%``) and the rows of its utilization chart, as drawn now."""
    panel = app.query_one(GpuPanel)
    lines = [panel.render_line(y).text for y in range(panel.size.height)]
    labels = next(y for y, line in enumerate(lines) if line.startswith("util "))
    width = lines[labels].index(" mem ")
    return lines[labels][:width].strip(), [line[:width] for line in lines[labels + 1 :]]


async def until(pilot: Pilot, condition: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    """Let the app run until ``condition`` holds (bounded, so a hang fails)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        await pilot.pause(0.01)


def util(frame: Frame) -> float | None:
    return frame.snapshot.devices[0].utilization_gpu_percent


def test_a_one_poll_spike_the_screen_never_drew_shows_in_the_chart(nvml_scenario, make_nvml_source) -> None:
    nvml_scenario.write(QUIET)
    sampler = Sampler(LiveSource(gpu=make_nvml_source(), host=HostSource()), 0.25, History(100))
    posted: list[Frame] = []
    sampler.subscribe(posted.append)
    app = GpusightApp(sampler, refresh=2.0)
    drawn: list[Frame] = []

    def watch_draws() -> bool:
        """Note the frame on screen (draws are two seconds apart, the watch looks every 10 ms)."""
        if app.frame is not None and (not drawn or drawn[-1] is not app.frame):
            drawn.append(app.frame)
        return False

    async def main() -> None:
        async with app.run_test(size=(160, 45)) as pilot:
            await until(pilot, lambda: watch_draws() or len(drawn) >= 2, "two draws")
            text, chart = util_chart(app)
            assert text == "util 0%" and "█" not in "".join(chart)
            nvml_scenario.write(SPIKE)  # just after a draw: the next one is two seconds away
            await until(pilot, lambda: watch_draws() or any(util(f) == 100 for f in posted), "a poll of the spike")
            nvml_scenario.write(QUIET)
            shown = len(drawn)
            await until(pilot, lambda: watch_draws() or len(drawn) > shown, "the next draw")
            text, chart = util_chart(app)
            assert text == "util 0%"  # the poll drawn is after the spike ...
            assert "█" in "".join(chart)  # ... and its chart holds the spike's 100 %

    asyncio.run(main())
    spikes = [frame for frame in posted if util(frame) == 100]
    assert 1 <= len(spikes) <= 2 < len(posted)
    assert not any(frame is spike for frame in drawn for spike in spikes)  # no draw ever showed a spike's poll
    assert all(util(frame) == 0 for frame in drawn)


def clocks(text: str) -> list[str]:
    """The header's clock readings (HH:MM:SS) in what the terminal drew, in order."""
    return re.findall(r"\b\d\d:\d\d:\d\d\b", text)


def test_refresh_1_at_interval_0_25_draws_about_once_a_second_while_polling_four_times(tmp_path, fake_nvml_lib) -> None:
    stats = tmp_path / "stats.json"
    env = {**fake_nvml_env(fake_nvml_lib, QUIET.write(tmp_path / "scenario.txt")), "GPUSIGHT_PARTIAL_OUTPUT": "0",
           "GPUSIGHT_STATS_FILE": str(stats)}
    with PtyTerminal(gpusight_argv("--interval", "0.25", "--refresh", "1"), (160, 45), env=env) as term:
        term.wait_for(lambda: "every 0.25s · screen 1s" in visible(bytes(term.output)), "the header", 60)
        time.sleep(4)
        assert term.quit() == 0
    shown = json.loads(stats.read_text())
    assert shown["interval_s"] == 0.25
    assert 3 <= shown["snapshots_shown"] and shown["polls"] >= 3 * shown["snapshots_shown"], shown


def test_a_key_is_answered_before_the_next_refresh(tmp_path, fake_nvml_lib) -> None:
    env = {**fake_nvml_env(fake_nvml_lib, QUIET.write(tmp_path / "scenario.txt")), "GPUSIGHT_PARTIAL_OUTPUT": "0"}
    with PtyTerminal(gpusight_argv("--interval", "0.25", "--refresh", "10"), (160, 45), env=env) as term:
        term.wait_for(lambda: "screen 10s" in visible(bytes(term.output)), "the header", 60)
        before = clocks(visible(bytes(term.output)))
        start = len(term.output)
        term.send("/")
        term.wait_for(lambda: "filter processes" in visible(bytes(term.output[start:])), "the filter", 60)
        answered = visible(bytes(term.output[start:]))
        term.send("\r")  # Enter in the empty filter closes it, so q quits (once the table has the focus back)
        time.sleep(1)
        assert term.quit() == 0
    # The key drew the newest poll held back (its clock, at most one new reading), not the refresh ten seconds on.
    answer = answered[: answered.index("filter processes")]
    assert len(set(clocks(answer)) - set(before[-1:])) <= 1, (before[-1:], clocks(answer))


def test_a_frame_held_back_is_drawn_at_the_end_of_its_period_though_no_newer_poll_comes() -> None:
    sampler = demo_sampler("healthy", interval=0.25, prefill=2)
    app = GpusightApp(sampler, live=False, refresh=1.0)  # polled by hand: a sampler that stalls after each poll

    def post() -> Frame:
        """Poll once and hand the frame to the app as the sampler thread does."""
        sampler.poll_once()
        frame = sampler.latest_frame
        assert frame is not None
        app.post_message(FrameReady(frame))
        return frame

    async def main() -> None:
        async with app.run_test(size=(160, 45)) as pilot:
            first = post()
            await until(pilot, lambda: app.frame is first, "the first frame drawn (at once or at its period's end)", 10)
            second = post()
            await pilot.pause()
            assert app.frame is first  # held: the screen was just drawn
            await until(pilot, lambda: app.frame is second, "the held frame drawn", 10)

    asyncio.run(main())


def test_a_narrow_header_drops_the_screen_period_before_the_driver() -> None:
    async def header_at(width: int) -> str:
        app = GpusightApp(demo_sampler("amd", interval=0.5), refresh=1.0)
        async with app.run_test(size=(width, 24)) as pilot:
            await pilot.pause()
            return app.query_one("#header").render_line(0).text

    wide, narrow = asyncio.run(header_at(160)), asyncio.run(header_at(80))
    assert "amdgpu 6.10.5" in wide and "every 0.5s · screen 1s" in wide
    assert "amdgpu 6.10.5" in narrow and "every 0.5s" in narrow and "screen" not in narrow
