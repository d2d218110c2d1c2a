"""The sources of live data: one subpackage per GPU vendor, all of one shape, and the host; a new vendor is a new
subpackage here (docs/backends.md has the checklist).

- :mod:`~gpusight.backends.interface`: what every vendor's backend implements, and its registry entry's shape;
- :mod:`~gpusight.backends.registry`: the list of vendors' entries and how ``--backend`` picks among them;
- :mod:`~gpusight.backends.joined`: several backends read as one (NVIDIA's indexes first, the others after);
- :mod:`~gpusight.backends.live`: the joined GPUs and the host, as the live snapshot source;
- :mod:`~gpusight.backends.cadence`: which poll a slow read is due on;
- the vendors :mod:`~gpusight.backends.nvml`, :mod:`~gpusight.backends.amdgpu` and :mod:`~gpusight.backends.intel`,
  each with an ``entry`` module (its line in the registry, importing none of its reading code) and a ``backend``
  module (its backend class); :mod:`~gpusight.backends.drm` holds what the DRM drivers share;
- :mod:`~gpusight.backends.host`: the host's CPU and memory, and what ``/proc`` tells about the GPU processes.

No module outside this package imports a vendor's subpackage, and the vendors import nothing of each other
(import-linter contracts). docs/backends.md has the checklist for a new vendor.
"""
