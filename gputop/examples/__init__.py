"""Runnable examples: ``python -m gputop.examples.train`` is a small instrumented PyTorch training job."""
