"""Facts derived from snapshot rows: pure functions of the model that every layer above shares.

- :mod:`~gpusight.facts.jobs`, :mod:`~gpusight.facts.workload`: GPU processes grouped into jobs and ranks;
- :mod:`~gpusight.facts.health`, :mod:`~gpusight.facts.xid_catalog`: a GPU's health verdict and what each Xid means;
- :mod:`~gpusight.facts.speed`: a job's training speed from its ranks' status records;
- :mod:`~gpusight.facts.peak_flops`: datasheet peaks per GPU model, for MFU;
- :mod:`~gpusight.facts.gpu_selection`: which GPUs ``--gpus`` and ``CUDA_VISIBLE_DEVICES`` name, and a snapshot cut
  down to them.

Imports only :mod:`gpusight.snapshot` (and the shared helpers); reads no device and keeps no state.
"""
