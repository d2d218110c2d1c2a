"""``gpusight --serve``: the latest snapshot as Prometheus metrics, built with ``prometheus_client``.

Device metrics carry dcgm-exporter's names, units and labels; gpusight's own carry the ``gpusight_`` prefix
(all declared in :mod:`gpusight.metric_names`). A sampler thread polls; a scrape only reads the newest snapshot,
so it never waits on NVML. Pure: no Textual or Rich. See docs/exporter.md.
"""
