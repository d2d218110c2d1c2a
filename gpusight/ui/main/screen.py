"""The live monitor's first screen, whose widgets are styled once at start rather than twice."""

from __future__ import annotations

from textual import events
from textual.screen import Screen


class MainScreen(Screen[None]):
    """The app's default screen (Textual's own default, but styled once at start).

    Textual restyles every widget of a screen each time the screen is resumed. Its first resume comes
    right after the mount, which has just styled every widget: that second pass costs about 0.1 s of CPU
    before the first frame with eight GPU panels (each panel resolves its component classes again).
    The first resume skips it; later ones (back from a detail screen or a dialog) restyle as Textual
    does. Textual calls the handlers of every class in the MRO, subclass first, so Screen's own
    handler runs after this one and sees the flag (Textual 8.2's ``Screen._on_screen_resume``, the
    version pyproject.toml pins; tests/test_ui_startup.py notices a change).
    """

    def __init__(self) -> None:
        super().__init__(id="_default")
        self._resumed = False

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        if not self._resumed:
            self._resumed = True
            event.refresh_styles = False
