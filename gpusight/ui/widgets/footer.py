"""A footer that shows only the keys that fit whole, the most important first.

Textual's footer scrolls sideways when its keys do not fit, so at 80 columns the last key is cut
in half and the command palette's key is drawn over it. :class:`FittingFooter` keeps the keys by
their :attr:`~gpusight.ui.actions.Action.footer_rank` (``? Help`` and ``q Quit`` always), drops the
rest whole, and leaves out the keys the app says do nothing now (see :class:`OffersActions`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.events import Resize
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from gpusight.ui.actions import ACTIONS

FOOTER_RANKS: Mapping[str, int] = {entry.action: entry.footer_rank for entry in ACTIONS}
"""Footer rank of each main-screen action; keys of other screens (e.g. ``Esc Back``) rank 0."""


@runtime_checkable
class OffersActions(Protocol):
    """An app that can say why one of its actions does nothing now."""

    def unavailable(self, action: str) -> str | None:
        """Why the action named ``action`` does nothing now, or None when it acts."""


def key_width(key: FooterKey, compact: bool) -> int:
    """Cells a footer key takes: its key, its label, their padding and its margin."""
    return cell_len(key.key_display) + cell_len(key.description) + (2 if compact else 3)


def fitting_keys(keys: list[FooterKey], width: int, compact: bool, ranks: Mapping[str, int]) -> list[FooterKey]:
    """The keys that fit in ``width`` cells, chosen by rank (lowest first) and kept in their order.

    The first key of a rank that does not fit ends the choice, so a less important key never shows
    in place of a more important one. Rank 0 keys are kept even when they do not fit.
    """
    order = sorted(range(len(keys)), key=lambda i: ranks.get(keys[i].action, 0))
    chosen: set[int] = set()
    used = 0
    for index in order:
        need = key_width(keys[index], compact)
        if used + need > width and ranks.get(keys[index].action, 0) > 0:
            break
        chosen.add(index)
        used += need
    return [key for index, key in enumerate(keys) if index in chosen]


class FittingFooter(Footer):
    """Textual's footer, less the keys that do not fit (by rank) and those that do nothing now."""

    def __init__(self, *, compact: bool = False) -> None:
        super().__init__(compact=compact)
        self._composed_width = 0

    def compose(self) -> ComposeResult:
        """Textual's footer keys, filtered; the command palette's key stays when the rank 0 keys leave room."""
        items = list(super().compose())
        keys = [item for item in items if isinstance(item, FooterKey)]
        palette = [key for key in keys if key.has_class("-command-palette")]
        keys = [key for key in keys if key not in palette]
        keys = [key for key in keys if not self._does_nothing(key.action)]
        width = self._composed_width = self.size.width or self.app.size.width
        essential = sum(key_width(key, self.compact) for key in keys if FOOTER_RANKS.get(key.action, 0) == 0)
        palette_room = sum(key_width(key, self.compact) + 1 for key in palette)
        if essential + palette_room > width:
            palette, palette_room = [], 0
        yield from fitting_keys(keys, width - palette_room, self.compact, FOOTER_RANKS)
        yield from palette

    def _does_nothing(self, action: str) -> bool:
        app = self.app
        return isinstance(app, OffersActions) and app.unavailable(action.split("(", 1)[0]) is not None

    def on_resize(self, event: Resize) -> None:
        """Choose the keys again for the new width."""
        if event.size.width != self._composed_width and self.is_attached:
            self._composed_width = event.size.width
            self.call_after_refresh(self.recompose)
