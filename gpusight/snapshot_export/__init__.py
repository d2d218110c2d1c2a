"""The snapshot export (the ``s`` key and ``--once --export DIR``): what is on screen, as a set of files.

- :mod:`~gpusight.snapshot_export.export_set`: writes the set under one stem, atomically: the SVG screenshot, the
  snapshot with the chart history as JSON, the Markdown, and the HTML run report of the session's history;
- :mod:`~gpusight.snapshot_export.markdown`: the Markdown of one snapshot and the recent history, for an issue or a chat.
"""
