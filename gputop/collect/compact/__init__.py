"""The compact recording format (the default for ``--record``); see ``docs/recording.md``.

- :mod:`~gputop.collect.compact.layout`: tables and columns derived from the snapshot dataclasses;
- :mod:`~gputop.collect.compact.codec`: varints, number cells, static dictionary entries;
- :mod:`~gputop.collect.compact.encoder` / :mod:`~gputop.collect.compact.decoder`: snapshots to records and back;
- :mod:`~gputop.collect.compact.framing`: segment headers, checksummed chunks, resynchronising after damage;
- :mod:`~gputop.collect.compact.writer`: :class:`CompactWriter`;
- :mod:`~gputop.collect.compact.reader`: :func:`read_compact`;
- :mod:`~gputop.collect.compact.index`: :class:`CompactRecording` (seeking and advice events).
"""

from gputop.collect.compact.index import CompactRecording
from gputop.collect.compact.reader import read_compact
from gputop.collect.compact.writer import CompactWriter

__all__ = ["CompactRecording", "CompactWriter", "read_compact"]
