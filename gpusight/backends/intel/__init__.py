"""Intel GPUs under the ``xe`` and ``i915`` kernel drivers, read from sysfs, hwmon and DRM fdinfo.

- :mod:`~gpusight.backends.intel.names`: marketing names by PCI device id (the drivers have no product-name file);
- :mod:`~gpusight.backends.intel.card`: one card's sysfs figures (energy, power limit, temperatures, clock, VRAM size);
- :mod:`~gpusight.backends.intel.engines`: the drivers' engine classes and memory regions, and per-process figures
  from the DRM clients;
- :mod:`~gpusight.backends.intel.backend`: :class:`~gpusight.backends.intel.backend.IntelBackend`, the backend.

Nothing here was verified on real hardware: the formats come from the kernel's documentation (see
tests/data/intel/README.md).
"""
