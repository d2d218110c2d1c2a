"""The main screen's panels, registered once: what the app builds, where each goes, and the order they draw in.

A new panel is a module with a widget implementing :class:`~gpusight.ui.main.panel.FramePanel`, one
:class:`~gpusight.ui.main.panel.PanelEntry` here, and its styles in ``gpusight.tcss``.
"""

from __future__ import annotations

from gpusight.ui.main.advice_panel import AdvicePanel, AdviceSummary
from gpusight.ui.main.gpu_panel import GpuArea
from gpusight.ui.main.header import HeaderBar
from gpusight.ui.main.host_panel import HostPanel
from gpusight.ui.main.panel import PanelEntry, Place
from gpusight.ui.main.playback_bar import PlaybackBar
from gpusight.ui.main.process_table import ProcessTable
from gpusight.ui.widgets.chart_choice import ChartChoice

MAIN_PANELS: tuple[PanelEntry, ...] = (
    PanelEntry(Place.MAIN, lambda o: GpuArea(ascii_mode=o.ascii_mode, choice=ChartChoice(paged=o.paged_charts), id="gpus")),
    PanelEntry(Place.MAIN, lambda o: HostPanel(ascii_mode=o.ascii_mode, id="host")),
    PanelEntry(Place.TABLE, lambda o: ProcessTable(ascii_mode=o.ascii_mode, id="processes")),
    PanelEntry(Place.SIDE, lambda o: AdvicePanel(ascii_mode=o.ascii_mode, id="advice")),
    PanelEntry(Place.BOTTOM, lambda o: AdviceSummary(id="advice-summary")),
    PanelEntry(Place.TOP, lambda o: HeaderBar(ascii_mode=o.ascii_mode, refresh=o.refresh, id="header")),
    PanelEntry(Place.BOTTOM, lambda o: PlaybackBar(ascii_mode=o.ascii_mode, id="playback")),
)
"""Every panel of the main screen, in drawing order (each frame); within an area they are placed in this order too.

The GPU area draws first (it may mount panels for a new set of GPUs) and the header late, as they always have.
"""
