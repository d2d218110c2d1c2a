"""Hand-offs of recordings: ``gpusight --convert`` between formats and to TensorBoard event files."""
