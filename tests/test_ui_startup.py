"""The live monitor's start-up: its widgets are styled no more often than its layout changes."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from test_ui_app import demo_sampler
from textual.css.stylesheet import Stylesheet
from textual.dom import DOMNode

from gpusight.ui.main.app import GpusightApp
from gpusight.ui.main.gpu_panel import GpuPanel


def test_each_gpu_panel_is_styled_once_up_to_the_first_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once, as it mounts: the first frame opens the advice below the GPUs (two layout classes, one pass) before the
    GPU area mounts its panels, so they mount with those classes set.

    Textual also restyles a screen's widgets when it is resumed and for each class changed: the first resume
    follows the mount that styled them, and the two classes are changed together.
    """
    styled: Counter[int] = Counter()
    apply = Stylesheet.apply

    def counting_apply(self: Stylesheet, node: DOMNode, **kwargs: object) -> None:
        if isinstance(node, GpuPanel):
            styled[id(node)] += 1
        apply(self, node, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Stylesheet, "apply", counting_apply)
    app = GpusightApp(demo_sampler("mixed"))

    async def main() -> int:
        async with app.run_test(size=(160, 45)) as pilot:
            await pilot.pause()
            assert app.first_frame_at is not None
            return len(app.query(GpuPanel))

    panels = asyncio.run(main())
    assert panels == 8
    assert sorted(styled.values()) == [1] * panels

