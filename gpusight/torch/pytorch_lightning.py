"""``GpusightCallback`` for trainers of the ``pytorch_lightning`` package (``import pytorch_lightning as pl``).

The same callback as :mod:`gpusight.torch.lightning`, built on ``pytorch_lightning.Callback``: a
``pytorch_lightning.Trainer`` takes only callbacks of its own package.
"""

from __future__ import annotations

from pytorch_lightning.callbacks import Callback

from gpusight.torch.lightning_hooks import LightningHooks


class GpusightCallback(LightningHooks, Callback):  # type: ignore[misc]  # pytorch_lightning is not type-checked here
    """A ``pytorch_lightning`` ``Callback`` measuring the fit loop; keyword arguments as for
    :class:`~gpusight.torch.lightning_hooks.LightningHooks`."""
