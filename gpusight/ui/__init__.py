"""The Textual user interface: thin widgets drawn from the sampler's frames, in folders by screen.

- :mod:`~gpusight.ui.main`: the monitor's main screen (:class:`~gpusight.ui.main.app.GpusightApp`): header, the
  panels of one frame (GPUs, host, processes, advice, playback bar) and how they are laid out;
- :mod:`~gpusight.ui.detail`: the detail screens of one GPU and of one process;
- :mod:`~gpusight.ui.dialogs`: the help screen and the small dialogs (go to a time, send a signal);
- :mod:`~gpusight.ui.cluster`: the cluster app (``--cluster``), a second app on the same widgets;
- :mod:`~gpusight.ui.widgets`: what the screens share: charts, formatting, the footer, a row cursor;
- :mod:`~gpusight.ui.terminal`: the terminal plumbing: partial output, draw pacing, the hang-up watchdog;
- :mod:`~gpusight.ui.actions`: every action and its key, declared once; :mod:`~gpusight.ui.messages`: what the
  sampler thread and the watchdog post to the app.
"""

from __future__ import annotations

from pathlib import Path

STYLESHEET = Path(__file__).with_name("gpusight.tcss")
"""The styles every gpusight app shares (the cluster app adds its own)."""
