"""The NVML source: NVIDIA GPUs and their processes, read through pynvml (``nvidia-ml-py``).

- :mod:`~gpusight.collect.nvml.source`: :class:`NvmlSource`, one poll of every GPU;
- :mod:`~gpusight.collect.nvml.device`: one GPU per poll, into a ``DeviceSample`` and its processes;
- :mod:`~gpusight.collect.nvml.calls`: one guarded call per metric (unsupported, lost GPU, other faults);
- :mod:`~gpusight.collect.nvml.errors`: NVML return codes and one-line reasons;
- :mod:`~gpusight.collect.nvml.processes`: a GPU's processes and their per-process use;
- :mod:`~gpusight.collect.nvml.gpm`: GPU performance monitoring (Hopper and later);
- :mod:`~gpusight.collect.nvml.pcie`: PCIe traffic without stalling the sampler.
"""
