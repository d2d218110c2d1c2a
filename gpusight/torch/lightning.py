"""``GpusightCallback``: gpusight's training-loop measurements for a PyTorch Lightning ``Trainer`` (``lightning``).

``L.Trainer(callbacks=[GpusightCallback()])`` measures what :func:`gpusight.torch.watch` measures: the wait for
data, steps, samples and tokens per second, the FLOPs per step and MFU/HFU, the step-time breakdown, and publishes
the status record that a running ``gpusight`` shows beside the process. Where the hooks fall:
:mod:`gpusight.torch.lightning_hooks`. For ``import pytorch_lightning as pl`` use
:mod:`gpusight.torch.pytorch_lightning`.
"""

from __future__ import annotations

from lightning.pytorch.callbacks import Callback

from gpusight.torch.lightning_hooks import LightningHooks


class GpusightCallback(LightningHooks, Callback):  # type: ignore[misc]  # lightning is not type-checked here
    """A ``lightning.pytorch`` ``Callback`` measuring the fit loop; keyword arguments as for
    :class:`~gpusight.torch.lightning_hooks.LightningHooks`."""
