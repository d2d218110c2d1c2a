"""The monitor's main screen: the app, its header, and the panels each frame is drawn into.

:mod:`~gpusight.ui.main.app` holds :class:`~gpusight.ui.main.app.GpusightApp`; each panel (GPUs, host, processes,
advice, the playback bar) is a widget of its own module, drawn from the frame through one interface.
"""
