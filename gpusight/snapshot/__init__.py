"""The snapshot model: what one poll of a machine holds, as immutable dataclasses, and its JSON form; a new metric
starts here, as a field.

- :mod:`~gpusight.snapshot.model`: the dataclasses (a missing metric is None, shown as N/A, never 0);
- :mod:`~gpusight.snapshot.throttle`: the names of the reasons a GPU slows its clocks, and their bits;
- :mod:`~gpusight.snapshot.schema`: the JSON Schema derived from the dataclasses, and the top-level keys of ``--json``;
- :mod:`~gpusight.snapshot.serialize`: snapshots to and from JSON.

A new metric goes here first: a field in the model, which the schema and the JSON form follow.
Imports nothing else of gpusight's but the shared helpers below every layer, and never textual or rich.
"""
