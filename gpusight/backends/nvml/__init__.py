"""The NVML source: NVIDIA GPUs and their processes, read through pynvml (``nvidia-ml-py``).

- :mod:`~gpusight.backends.nvml.backend`: :class:`NvmlBackend`, one poll of every GPU;
- :mod:`~gpusight.backends.nvml.device`: one GPU per poll, into a ``DeviceSample`` and its processes;
- :mod:`~gpusight.backends.nvml.calls`: one guarded call per metric (unsupported, lost GPU, other faults);
- :mod:`~gpusight.backends.nvml.errors`: NVML return codes and one-line reasons;
- :mod:`~gpusight.backends.nvml.processes`: a GPU's processes and their per-process use;
- :mod:`~gpusight.backends.nvml.gpm`: GPU performance monitoring (Hopper and later);
- :mod:`~gpusight.backends.nvml.pcie`: PCIe traffic without stalling the sampler.
"""
