"""Hand-offs of recordings: ``gputop --convert`` between formats and to TensorBoard event files."""
