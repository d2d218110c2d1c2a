"""Sampling: the one thread that polls a source, what it keeps, and how the screen and replays steer it.

- :mod:`~gpusight.sampling.source`: what a snapshot source (live, demo, replay) offers the sampler;
- :mod:`~gpusight.sampling.sampler`: the sampler thread, which hands out one immutable
  :mod:`~gpusight.sampling.frame` per poll;
- :mod:`~gpusight.sampling.history`, :mod:`~gpusight.sampling.speed_history`, :mod:`~gpusight.sampling.timegrid`,
  :mod:`~gpusight.sampling.chart_settings`: the snapshots kept, and the charts' time grid;
- :mod:`~gpusight.sampling.steering`: pausing, speeding and seeking a replay through the sampler;
- :mod:`~gpusight.sampling.filters`, :mod:`~gpusight.sampling.gpu_selecting_source`: which GPUs and processes are shown.

Nothing here imports textual or rich: it is the pure-Python API the screens, the one-shot output, the exporter and
the tools build on.
"""
