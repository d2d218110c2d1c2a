"""JSON-lines recordings (``.jsonl``, ``.jsonl.gz``): one snapshot per line in the ``--json`` layout.

- :mod:`~gpusight.recordings.jsonl.writer`: :class:`JsonlWriter`, appending to a file;
- :mod:`~gpusight.recordings.jsonl.stream`: :class:`JsonLinesStream`, writing to stdout (``--record -``);
- :mod:`~gpusight.recordings.jsonl.reader`: streaming the lines back, damage and gzip members included;
- :mod:`~gpusight.recordings.jsonl.index`: :class:`JsonlRecording`, random access by time.
"""
