"""Data collection: the snapshot model, the live sources, and the sampler with its history and chart grid.

- :mod:`~gputop.collect.model`, :mod:`~gputop.collect.schema`, :mod:`~gputop.collect.serialize`: the immutable
  snapshot dataclasses, the JSON Schema derived from them, and their JSON form;
- :mod:`~gputop.collect.nvml`: the NVML source (GPUs and their processes);
- :mod:`~gputop.collect.host`: the host source (CPU, memory, process details, containers, DataLoader workers,
  trainers' status records);
- :mod:`~gputop.collect.live`: NVML and host together, the live source;
- :mod:`~gputop.collect.jobs`, :mod:`~gputop.collect.workload`: grouping GPU processes into jobs and ranks;
- :mod:`~gputop.collect.sampler`: the one thread that polls a source and hands out frames
  (:mod:`~gputop.collect.frame`), with :mod:`~gputop.collect.history` and :mod:`~gputop.collect.timegrid`;
- :mod:`~gputop.collect.source`, :mod:`~gputop.collect.steering`: what a source offers the sampler, and how a
  replay is steered through it;
- :mod:`~gputop.collect.filters`, :mod:`~gputop.collect.gpu_selection`: which GPUs and processes are shown.

Nothing in this package may import textual or rich (an import-linter contract enforces it): it is the
pure-Python API that the UI, the one-shot output, the advice engine and other tools build on.
"""
