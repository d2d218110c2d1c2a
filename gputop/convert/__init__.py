"""Hand-offs of recordings: ``gputop --convert`` between formats and to TensorBoard, and JSON lines on stdout."""
