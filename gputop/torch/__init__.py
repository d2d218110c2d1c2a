"""PyTorch integration: measure a training loop's input wait from the inside and publish it to gputop.

``for batch in gputop.torch.watch(loader): ...`` yields the loader's batches unchanged, measures the
time spent waiting for each, and publishes a small status record (input-wait share, steps per second,
loader settings, CUDA memory, autocast) that a running ``gputop`` shows beside the process;
``watch(loader, log_to=writer)`` also logs the GPUs' metrics into the run's SummaryWriter or MLflow run. Needs the
``gputop[torch]`` extra; importing ``gputop`` alone never imports torch.
"""

from gputop.torch.system_metrics import SystemMetrics
from gputop.torch.watch import Watched, watch
from gputop.torch.window import WindowStats

__all__ = ["SystemMetrics", "Watched", "WindowStats", "watch"]
