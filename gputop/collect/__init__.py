"""Data collection: snapshot model, sources (NVML, host, demo, replay), history and the sampler.

Nothing in this package may import textual or rich: it is the pure-Python API that the UI,
the one-shot output, the advice engine and other tools build on.
"""
