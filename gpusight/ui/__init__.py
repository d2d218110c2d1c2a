"""The Textual user interface: thin widgets fed by the sampler's snapshots."""
