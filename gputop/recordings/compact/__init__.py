"""The compact recording format (the default for ``--record``); see ``docs/recording.md``.

- :mod:`~gputop.recordings.compact.layout`: tables and columns derived from the snapshot dataclasses;
- :mod:`~gputop.recordings.compact.codec`: varints, number cells, static dictionary entries;
- :mod:`~gputop.recordings.compact.encoder` / :mod:`~gputop.recordings.compact.decoder`: snapshots to records and back;
- :mod:`~gputop.recordings.compact.framing`: segment headers, checksummed chunks, resynchronising after damage;
- :mod:`~gputop.recordings.compact.writer`: :class:`CompactWriter`;
- :mod:`~gputop.recordings.compact.reader`: :func:`read_compact`;
- :mod:`~gputop.recordings.compact.index`: :class:`CompactRecording` (seeking and advice events).
"""

from gputop.recordings.compact.index import CompactRecording
from gputop.recordings.compact.reader import read_compact
from gputop.recordings.compact.writer import CompactWriter

__all__ = ["CompactRecording", "CompactWriter", "read_compact"]
