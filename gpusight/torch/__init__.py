"""PyTorch integration: measure a training loop's input wait from the inside and publish it to gpusight.

``for batch in gpusight.torch.watch(loader): ...`` yields the loader's batches unchanged, measures the
time spent waiting for each, and publishes a small status record (input-wait share, steps per second,
loader settings, CUDA memory, autocast, samples and tokens per second, FLOPs per step and MFU/HFU, the step-time
breakdown) that a running ``gpusight`` shows beside the process; :class:`LoopMeter` does the same for loops
driven by a framework (its callbacks call ``batch_requested``/``batch_arrived``);
``watch(loader, log_to=writer)`` also logs the GPUs' metrics into the run's SummaryWriter or MLflow run. Needs the
``gpusight[torch]`` extra; importing ``gpusight`` alone never imports torch.
"""

from gpusight.torch.meter import LoopMeter
from gpusight.torch.system_metrics import SystemMetrics
from gpusight.torch.watch import Watched, watch
from gpusight.torch.window import WindowStats

__all__ = ["LoopMeter", "SystemMetrics", "Watched", "WindowStats", "watch"]
