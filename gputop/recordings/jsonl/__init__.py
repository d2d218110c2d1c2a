"""JSON-lines recordings (``.jsonl``, ``.jsonl.gz``): one snapshot per line in the ``--json`` layout.

- :mod:`~gputop.recordings.jsonl.writer`: :class:`JsonlWriter`, appending to a file;
- :mod:`~gputop.recordings.jsonl.stream`: :class:`JsonLinesStream`, writing to stdout (``--record -``);
- :mod:`~gputop.recordings.jsonl.reader`: streaming the lines back, damage and gzip members included;
- :mod:`~gputop.recordings.jsonl.index`: :class:`JsonlRecording`, random access by time.
"""
