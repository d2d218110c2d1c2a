"""The compact recording format (the default for ``--record``); see ``docs/recording.md``.

- :mod:`~gpusight.recordings.compact.layout`: tables and columns derived from the snapshot dataclasses;
- :mod:`~gpusight.recordings.compact.codec`: varints, number cells, static dictionary entries;
- :mod:`~gpusight.recordings.compact.encoder` / :mod:`~gpusight.recordings.compact.decoder`: snapshots to records and back;
- :mod:`~gpusight.recordings.compact.framing`: segment headers, checksummed chunks, resynchronising after damage;
- :mod:`~gpusight.recordings.compact.writer`: :class:`CompactWriter`;
- :mod:`~gpusight.recordings.compact.reader`: :func:`read_compact`;
- :mod:`~gpusight.recordings.compact.index`: :class:`CompactRecording` (seeking and advice events).
"""

from gpusight.recordings.compact.index import CompactRecording
from gpusight.recordings.compact.reader import read_compact
from gpusight.recordings.compact.writer import CompactWriter

__all__ = ["CompactRecording", "CompactWriter", "read_compact"]
