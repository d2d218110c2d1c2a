"""The host source: the machine's CPU and memory, and what ``/proc`` tells about the GPU processes.

- :mod:`~gpusight.backends.host.source`: :class:`HostSource`, one poll of the host and the GPU processes' details;
- :mod:`~gpusight.backends.host.cpu`: per-core busy and iowait between two polls;
- :mod:`~gpusight.backends.host.procinfo`, :mod:`~gpusight.backends.host.proctree`: one process's details, and the
  descendants of a few processes;
- :mod:`~gpusight.backends.host.dataloader_workers`: PyTorch DataLoader workers and the trainer each feeds;
- :mod:`~gpusight.backends.host.procenv`, :mod:`~gpusight.backends.host.containers`: the hints that group processes into
  jobs, and the container, pod or Slurm job a process runs in;
- :mod:`~gpusight.backends.host.trainer_status`: the status records instrumented trainers publish.
"""
