"""The host source: the machine's CPU and memory, and what ``/proc`` tells about the GPU processes.

- :mod:`~gputop.collect.host.source`: :class:`HostSource`, one poll of the host and the GPU processes' details;
- :mod:`~gputop.collect.host.cpu`: per-core busy and iowait between two polls;
- :mod:`~gputop.collect.host.procinfo`, :mod:`~gputop.collect.host.proctree`: one process's details, and the
  descendants of a few processes;
- :mod:`~gputop.collect.host.dataloader_workers`: PyTorch DataLoader workers and the trainer each feeds;
- :mod:`~gputop.collect.host.procenv`, :mod:`~gputop.collect.host.containers`: the hints that group processes into
  jobs, and the container, pod or Slurm job a process runs in;
- :mod:`~gputop.collect.host.trainer_status`: the status records instrumented trainers publish.
"""
