"""The host source: the machine's CPU and memory, and what ``/proc`` tells about the GPU processes.

- :mod:`~gpusight.collect.host.source`: :class:`HostSource`, one poll of the host and the GPU processes' details;
- :mod:`~gpusight.collect.host.cpu`: per-core busy and iowait between two polls;
- :mod:`~gpusight.collect.host.procinfo`, :mod:`~gpusight.collect.host.proctree`: one process's details, and the
  descendants of a few processes;
- :mod:`~gpusight.collect.host.dataloader_workers`: PyTorch DataLoader workers and the trainer each feeds;
- :mod:`~gpusight.collect.host.procenv`, :mod:`~gpusight.collect.host.containers`: the hints that group processes into
  jobs, and the container, pod or Slurm job a process runs in;
- :mod:`~gpusight.collect.host.trainer_status`: the status records instrumented trainers publish.
"""
