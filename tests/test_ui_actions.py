"""The action table drives the keys, the help screen and the command palette: each action is offered once
everywhere, and every key and palette entry runs its action (driven through a Pilot, the palette included)."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from test_ui_app import as_live, demo_sampler, run_app, screen_text, wait_for
from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input, OptionList

from gpusight.sampling.filters import current_user_filter
from gpusight.sampling.timegrid import ZOOM_FACTORS
from gpusight.ui.actions import ACTIONS, OTHER_KEYS
from gpusight.ui.detail.gpu_detail import GpuDetailScreen
from gpusight.ui.detail.process_detail import ProcessDetailScreen
from gpusight.ui.dialogs.help_screen import HelpScreen
from gpusight.ui.dialogs.kill_dialog import KillDialog
from gpusight.ui.main.advice_panel import AdvicePanel
from gpusight.ui.main.app import GpusightApp
from gpusight.ui.main.gpu_panel import GpuArea, GpuPanel
from gpusight.ui.main.process_table import ProcessTable

Check = Callable[[GpusightApp, Pilot, str], Awaitable[None]]
"""Presses ``key`` (after any setup it needs) and asserts that its action ran, leaving the main screen."""


async def open_palette(pilot: Pilot, query: str = "") -> list[str]:
    """Open the real command palette, type ``query`` and return the titles it lists."""
    app = pilot.app
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
    if query:
        await pilot.press(*query)
    options = app.screen.query_one(OptionList)
    await wait_for(pilot, lambda: options.option_count > 0)
    await pilot.pause(0.2)  # the search runs in the background; let it finish
    return [str(options.get_option_at_index(i).prompt).split("\n")[0] for i in range(options.option_count)]


async def close_to_main(app: GpusightApp, pilot: Pilot) -> None:
    """Pop every screen above the main one."""
    while len(app.screen_stack) > 1:
        app.pop_screen()
        await pilot.pause()


# -- one check per action: press the key, see what it did ---------------------------------------


async def check_pause(app: GpusightApp, pilot: Pilot, key: str) -> None:
    before = app.sampler.paused
    await pilot.press(key)
    assert app.sampler.paused is not before


async def check_slower(app: GpusightApp, pilot: Pilot, key: str) -> None:
    app.sampler.set_interval(1.0)
    await pilot.press(key)
    assert app.sampler.interval == 2.0


async def check_faster(app: GpusightApp, pilot: Pilot, key: str) -> None:
    app.sampler.set_interval(2.0)
    await pilot.press(key)
    assert app.sampler.interval == 1.0


async def check_export(app: GpusightApp, pilot: Pilot, key: str) -> None:
    before = set(app.export_dir.glob("*")) if app.export_dir.exists() else set()
    await pilot.press(key)
    await app.workers.wait_for_complete()
    assert {p.suffix for p in set(app.export_dir.glob("*")) - before} == {".html", ".json", ".md", ".svg"}


async def check_filter(app: GpusightApp, pilot: Pilot, key: str) -> None:
    await pilot.press(key)
    assert isinstance(app.focused, Input) and app.focused.display
    await pilot.press("escape")


async def check_clear_filter(app: GpusightApp, pilot: Pilot, key: str) -> None:
    await pilot.press("slash", "x")
    assert app.query_one(ProcessTable).filter_text == "x"
    await pilot.press(key)
    assert app.query_one(ProcessTable).filter_text == "" and not app.query_one("#filter").display


async def check_toggle_workers(app: GpusightApp, pilot: Pilot, key: str) -> None:
    table = app.query_one(ProcessTable)
    before = table.workers_collapsed
    await pilot.press(key)
    assert table.workers_collapsed is not before


async def check_gpu_detail(app: GpusightApp, pilot: Pilot, key: str) -> None:
    panel = list(app.query(GpuPanel))[1]
    panel.focus()
    await pilot.press(key)
    await pilot.pause()
    assert isinstance(app.screen, GpuDetailScreen) and app.screen.device_index == panel.device_index
    await close_to_main(app, pilot)
    app.query_one(ProcessTable).focus()


async def check_process_detail(app: GpusightApp, pilot: Pilot, key: str) -> None:
    selected = app.query_one(ProcessTable).selected_process()
    await pilot.press(key)
    await pilot.pause()
    assert isinstance(app.screen, ProcessDetailScreen) and app.screen.pid == selected.pid
    await close_to_main(app, pilot)
    app.query_one(ProcessTable).focus()


async def check_kill(app: GpusightApp, pilot: Pilot, key: str) -> None:
    await pilot.press(key)
    await pilot.pause()
    assert isinstance(app.screen, KillDialog)
    await close_to_main(app, pilot)


async def check_toggle_advice(app: GpusightApp, pilot: Pilot, key: str) -> None:
    advice = app.query_one(AdvicePanel)
    before = advice.display
    await pilot.press(key)
    await pilot.pause()
    assert advice.display is not before


async def check_help(app: GpusightApp, pilot: Pilot, key: str) -> None:
    await pilot.press(key)
    assert isinstance(app.screen, HelpScreen)
    await close_to_main(app, pilot)


async def check_zoom(app: GpusightApp, pilot: Pilot, key: str) -> None:
    gpus = app.query_one("#gpus", GpuArea)
    before = gpus.choice.level
    await pilot.press(key)
    assert gpus.choice.level == (before + 1) % len(ZOOM_FACTORS) and "10s/column" in str(gpus.border_title)
    gpus.set_choice(dataclasses.replace(gpus.choice, level=before))


async def check_chart_metric(app: GpusightApp, pilot: Pilot, key: str) -> None:
    # v charts the next metric of the one-line layout, which 8 GPUs take at 80x24 (at 160x45 it says why not).
    await pilot.resize_terminal(80, 24)
    await wait_for(pilot, lambda: app.unavailable("chart_metric") is None)
    gpus = app.query_one("#gpus", GpuArea)
    before = gpus.choice.history
    await pilot.press(key)
    assert gpus.choice.history != before
    await pilot.resize_terminal(160, 45)
    await wait_for(pilot, lambda: app.unavailable("chart_metric") is not None)


def others(app: GpusightApp) -> list[int]:
    """PIDs on screen that belong to someone other than the user running the test."""
    assert app.snapshot is not None
    mine = current_user_filter()
    return [p.pid for p in app.snapshot.processes if not mine.matches(p.user)]


async def check_toggle_mine(app: GpusightApp, pilot: Pilot, key: str) -> None:
    assert others(app), "the demo's processes belong to other users"
    await pilot.press(key)
    assert app.sampler.filters.user == current_user_filter()
    assert others(app) == []
    await pilot.press(key)
    assert app.sampler.filters.user is None and others(app)


def check_sort(sort_key: str) -> Check:
    async def check(app: GpusightApp, pilot: Pilot, key: str) -> None:
        table = app.query_one(ProcessTable)
        table.sort_by("pid" if sort_key != "pid" else "memory")
        await pilot.press(key)
        assert table.sort_key == sort_key

    return check


CHECKS: dict[str, Check] = {
    "pause": check_pause,
    "slower": check_slower,
    "faster": check_faster,
    "export": check_export,
    "filter": check_filter,
    "clear_filter": check_clear_filter,
    "toggle_workers": check_toggle_workers,
    "gpu_detail": check_gpu_detail,
    "process_detail": check_process_detail,
    "kill": check_kill,
    "toggle_advice": check_toggle_advice,
    "zoom": check_zoom,
    "chart_metric": check_chart_metric,
    "toggle_mine": check_toggle_mine,
    "help": check_help,
    **{f"sort('{key}')": check_sort(key) for key in ("memory", "cpu", "sm", "pid", "gpu", "elapsed", "user", "job",
                                                               "container")},
}
"""How to see that each action ran; ``quit`` and ``interrupt`` (Ctrl+C) are checked on their own apps below."""


def table_keys(action: str) -> list[str]:
    """Every key the table binds to ``action``."""
    return [key for entry in ACTIONS if entry.action == action for key in entry.keys.split(",")]


def test_every_action_has_a_check() -> None:
    """The replay-only actions are checked on a replay in test_replay_ui.py."""
    assert set(CHECKS) | {"quit", "interrupt"} == {entry.action for entry in ACTIONS if not entry.replay}


def test_every_key_runs_its_action(tmp_path: Path) -> None:
    app = GpusightApp(demo_sampler("mixed", edit=as_live), export_dir=tmp_path / "exports")

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        for action, check in CHECKS.items():
            for key in table_keys(action):
                await check(app, pilot, key)
                assert len(app.screen_stack) == 1 and app.is_running, (action, key)

    run_app(app, (160, 45), body)


def test_q_quits() -> None:
    app = GpusightApp(demo_sampler("healthy"))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await pilot.press(*table_keys("quit"))

    run_app(app, (80, 24), body)
    assert app.return_code == 0 and not app.is_running


@pytest.mark.parametrize("opened_with", [(), ("question_mark",), ("k",), ("ctrl+p",), ("tab", "enter"), ("slash", "x")],
                         ids=["main", "help", "signal-dialog", "palette", "gpu-details", "filter"])
def test_ctrl_c_quits_from_every_screen_and_dialog(opened_with: tuple[str, ...]) -> None:
    app = GpusightApp(demo_sampler("healthy", edit=as_live))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await pilot.press(*opened_with)
        await pilot.pause()
        if opened_with:  # a screen, a dialog or the filter is open
            assert len(app.screen_stack) > 1 or isinstance(app.focused, Input)
        await pilot.press(*table_keys("interrupt"))
        await pilot.pause()

    run_app(app, (160, 45), body)
    assert app.return_code == 0 and not app.is_running


def test_ctrl_c_copies_while_text_is_selected() -> None:
    app = GpusightApp(demo_sampler("healthy"))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        await pilot.press("slash", *"python")
        field = app.query_one("#filter", Input)
        field.select_all()
        await pilot.press("ctrl+c")
        assert app.is_running and app.clipboard == "python"
        field.action_end()
        await pilot.press("ctrl+c")

    run_app(app, (160, 45), body)
    assert app.return_code == 0 and not app.is_running


# -- help screen and palette ------------------------------------------------------------------------


def test_help_screen_shows_every_action_and_the_other_keys(tmp_path: Path) -> None:
    app = GpusightApp(demo_sampler("healthy", edit=as_live), export_dir=tmp_path / "exports")

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        # Live data, 4 GPUs with every chart: all but v (the one-line layout's metric) act.
        assert {entry.name for entry in ACTIONS if app.unavailable(entry.name)} == {"chart_metric"}
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        for entry in ACTIONS:
            row = (entry.keys_text, entry.describe(str(tmp_path / "exports")))
            shown = not entry.replay and entry.name != "chart_metric"  # replay keys: test_replay_ui.py
            assert (row in app.screen.rows) is shown, entry.action
            if shown:
                assert entry.keys_text in text, entry.action
        for _, description in app.screen.rows:
            assert description[:40] in text, description
        assert set(OTHER_KEYS) <= set(app.screen.rows)

    run_app(app, (160, 60), body)


def test_the_palette_lists_every_action_once_and_runs_it() -> None:
    app = GpusightApp(demo_sampler("healthy", edit=as_live))

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        titles = await open_palette(pilot)
        assert len(titles) == len(set(titles)), titles
        offered = {entry.title for entry in ACTIONS if entry.palette and not entry.replay and not app.unavailable(entry.name)}
        assert offered <= set(titles) and "Send signal" in offered
        assert not ({entry.title for entry in ACTIONS} - offered) & set(titles)
        assert "Theme" in titles  # Textual's commands that no action replaces stay
        await close_to_main(app, pilot)
        assert await open_palette(pilot, "keys") == ["Keys"]  # Textual's own "Keys" is gone
        await close_to_main(app, pilot)
        assert await open_palette(pilot, "pause / resume") == ["Pause / resume"]
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.sampler.paused)

    run_app(app, (160, 45), body)


def test_readonly_leaves_the_signal_out_of_the_palette_and_marks_it_in_help() -> None:
    app = GpusightApp(demo_sampler("healthy"), readonly=True)

    async def body(app: GpusightApp, pilot: Pilot) -> None:
        titles = await open_palette(pilot)
        assert "Send signal" not in titles and "Pause / resume" in titles
        await close_to_main(app, pilot)
        await pilot.press("question_mark")
        assert ("k", "send a signal to the selected process (asks first): disabled (--readonly)") in app.screen.rows

    run_app(app, (160, 45), body)
