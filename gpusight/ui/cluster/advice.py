"""Advice in the cluster view: the fleet's (beside or below the table, or one line on narrow terminals) and a node's.

The text is built by :func:`gpusight.ui.main.advice_panel.advice_text` from escaped strings, so remote evidence
is never read as markup; it is redrawn only when the advice changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from gpusight.cluster.frame import ClusterFrame
from gpusight.snapshot.model import Advice
from gpusight.ui.cluster.text import node_advice_line
from gpusight.ui.main.advice_panel import ADVICE_COMPONENTS, advice_text, summary_text

NO_FLEET_ADVICE = "No fleet advice."
"""Said instead of "nothing looks wrong" when the nodes raise advice of their own but the fleet rules raise none."""


class AdviceText(Static):
    """Advice items under optional lead lines; ``show`` redraws only when they changed."""

    COMPONENT_CLASSES = ADVICE_COMPONENTS
    """Styles of the severities and parts (gpusight.tcss)."""

    def __init__(self, *, ascii_mode: bool = False, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(Text(""), id=id, classes=classes)
        self.ascii_mode = ascii_mode
        """Use ASCII arrows."""
        self._state: tuple[object, ...] | None = None

    def _style(self, part: str) -> Style:
        return self.get_component_rich_style(f"advice--{part}", partial=True)

    def notify_style_update(self) -> None:
        """Rebuild the text with the new theme on the next ``show``."""
        super().notify_style_update()
        self._state = None

    def show(self, advice: Sequence[Advice], lead: Sequence[str] = (), *, summary: bool = False) -> None:
        """Show ``advice`` after the ``lead`` lines; ``summary``: one line of counts and the top title instead."""
        state = (tuple(advice), tuple(lead), summary)
        if state == self._state or not self.is_attached:  # a frame still queued while the app closes draws nothing
            return
        self._state = state
        if summary:
            if advice:
                text = self._fleet_summary(advice)
            else:  # "nothing looks wrong" only while the nodes raise nothing either
                text = self._none_summary() if lead else summary_text((), (), {}, self._style)
            for line in lead:
                text.append("  " + line, style=self._style("evidence"))
        else:
            text = Text()
            for line in lead:
                text.append(line + "\n\n", style=self._style("evidence"))
            if advice or not lead:
                text.append_text(advice_text(tuple(advice), (), {}, self._style, self.ascii_mode))
            else:  # "nothing looks wrong" would deny the node advice counted just above
                text.append(NO_FLEET_ADVICE, style=self._style("evidence"))
        self.update(text)

    def _fleet_summary(self, advice: Sequence[Advice]) -> Text:
        """The one-line summary, its counts named as the fleet's (a host row's counts are that node's own)."""
        text = Text("fleet ", style=self._style("evidence"), no_wrap=True, overflow="ellipsis")
        text.append_text(summary_text(tuple(advice), (), {}, self._style))
        return text

    def _none_summary(self) -> Text:
        """The one-line summary without fleet advice when the nodes raise their own."""
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(NO_FLEET_ADVICE + " ", style=self._style("evidence"))
        text.append("a", style=self._style("key"))
        text.append(" advice", style=self._style("evidence"))
        return text


def fleet_lead(frame: ClusterFrame) -> list[str]:
    """The line above the fleet advice: how much advice the nodes raise themselves."""
    line = node_advice_line(frame)
    return [] if line is None else [line]
