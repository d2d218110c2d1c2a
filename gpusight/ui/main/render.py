"""Rendering the monitor's screen without a terminal, for ``gpusight --once --export``."""

from __future__ import annotations

import asyncio

from gpusight.sampling.sampler import Sampler
from gpusight.ui.main.app import GpusightApp

EXPORT_SCREEN_SIZE = (160, 45)
"""Columns and rows of the screen rendered for a one-shot export."""


def render_screen_svg(sampler: Sampler, size: tuple[int, int] = EXPORT_SCREEN_SIZE) -> str:
    """Draw the app headless over the sampler's newest snapshot and history; return the SVG screenshot."""

    async def draw() -> str:
        app = GpusightApp(sampler, readonly=True, live=False)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            return app.export_screenshot(title="gpusight")

    return asyncio.run(draw())
