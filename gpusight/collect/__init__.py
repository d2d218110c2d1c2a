"""Data collection: the snapshot model, the live sources, and the sampler with its history and chart grid.

- :mod:`~gpusight.collect.model`, :mod:`~gpusight.collect.schema`, :mod:`~gpusight.collect.serialize`: the immutable
  snapshot dataclasses, the JSON Schema derived from them, and their JSON form;
- :mod:`~gpusight.collect.nvml`: the NVML source (GPUs and their processes);
- :mod:`~gpusight.collect.host`: the host source (CPU, memory, process details, containers, DataLoader workers,
  trainers' status records);
- :mod:`~gpusight.collect.live`: NVML and host together, the live source;
- :mod:`~gpusight.collect.jobs`, :mod:`~gpusight.collect.workload`: grouping GPU processes into jobs and ranks;
- :mod:`~gpusight.collect.sampler`: the one thread that polls a source and hands out frames
  (:mod:`~gpusight.collect.frame`), with :mod:`~gpusight.collect.history` and :mod:`~gpusight.collect.timegrid`;
- :mod:`~gpusight.collect.source`, :mod:`~gpusight.collect.steering`: what a source offers the sampler, and how a
  replay is steered through it;
- :mod:`~gpusight.collect.filters`, :mod:`~gpusight.collect.gpu_selection`: which GPUs and processes are shown.

Nothing in this package may import textual or rich (an import-linter contract enforces it): it is the
pure-Python API that the UI, the one-shot output, the advice engine and other tools build on.
"""
