"""The report of a run: its numbers (``summary``), plots (``series``, ``html``) and ``gpusight --report``."""
