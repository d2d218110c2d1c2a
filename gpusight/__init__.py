"""gpusight: a live GPU monitor for deep-learning training that says why a GPU is under-used."""

__version__ = "0.2.0"
