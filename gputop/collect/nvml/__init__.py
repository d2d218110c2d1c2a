"""The NVML source: NVIDIA GPUs and their processes, read through pynvml (``nvidia-ml-py``).

- :mod:`~gputop.collect.nvml.source`: :class:`NvmlSource`, one poll of every GPU;
- :mod:`~gputop.collect.nvml.device`: one GPU per poll, into a ``DeviceSample`` and its processes;
- :mod:`~gputop.collect.nvml.calls`: one guarded call per metric (unsupported, lost GPU, other faults);
- :mod:`~gputop.collect.nvml.errors`: NVML return codes and one-line reasons;
- :mod:`~gputop.collect.nvml.processes`: a GPU's processes and their per-process use;
- :mod:`~gputop.collect.nvml.gpm`: GPU performance monitoring (Hopper and later);
- :mod:`~gputop.collect.nvml.pcie`: PCIe traffic without stalling the sampler.
"""
