"""Recordings and replay: writing snapshots to a file, reading them back, and playing them as a source.

- :mod:`~gpusight.recordings.opening`: the front door that opens any recording, whatever its format;
- :mod:`~gpusight.recordings.formats`: the formats, telling them apart, and what every seekable recording offers;
- :mod:`~gpusight.recordings.compact`: the compact format (the default for ``--record``);
- :mod:`~gpusight.recordings.jsonl`: JSON lines, plain or gzip, and their index for seeking;
- :mod:`~gpusight.recordings.files`: opening only regular files;
- :mod:`~gpusight.recordings.progress`: how far a read of a whole recording has got, for a display elsewhere;
- :mod:`~gpusight.recordings.replay`: :class:`ReplaySource`, a recording played back as a steerable source;
- :mod:`~gpusight.recordings.playback`: replay speeds, the lead-in before a seek, jumping between advice events;
- :mod:`~gpusight.recordings.replay_time`: the times a user types (``03:10``, ``+1h20m``) and a recording's span;
- :mod:`~gpusight.recordings.start_at`: ``--at WHEN``, starting a replay at a given time.
"""
