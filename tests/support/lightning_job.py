"""A tiny real PyTorch Lightning run (an MLP, CPU) with ``GpusightCallback``, for the tests.

``python lightning_job.py FOLDER [--pytorch-lightning] [--fail] [--checkpoint]`` trains until FOLDER/stop exists,
writes FOLDER/done, and sleeps until killed (so a test can see the status record go while the process lives). Every
15 batches it validates or, with ``--checkpoint``, saves a checkpoint, each as slowly as the batches before it took
(:class:`~support.pace.Pace`): time the loop spends away from its steps, which must count neither as waiting for data nor as stepping. ``--pytorch-lightning`` trains
with the ``pytorch_lightning`` package instead of ``lightning``; ``--fail`` ends training in an error that the script
catches. The sizes are :data:`BATCH`, :data:`INPUTS`, :data:`HIDDEN` and :data:`OUTPUTS` (two bias-carrying linear
layers)."""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

import torch

from support.pace import Pace

PACKAGE = "pytorch_lightning" if "--pytorch-lightning" in sys.argv else "lightning"
"""Which of the two packages Lightning ships as trains the model."""
L = importlib.import_module(PACKAGE)

BATCH = 64
"""Samples per batch."""
INPUTS, HIDDEN, OUTPUTS = 512, 2048, 16
"""The MLP's widths."""
EVERY = 15
"""Batches between two validations (or two checkpoints)."""
PACE = Pace()
"""A validation or a checkpoint takes as long as the batches before it."""


class Regression(L.LightningModule):
    """Linear, ReLU, linear; mean squared error; SGD."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(INPUTS, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUTPUTS))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features)

    def training_step(self, batch, batch_idx):
        features, targets = batch
        return torch.nn.functional.mse_loss(self(features), targets)

    def validation_step(self, batch, batch_idx):
        if batch_idx == 0:
            PACE.away()
        features, targets = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self(features), targets))

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        PACE.away()  # slow storage

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Pairs(torch.utils.data.Dataset):
    """``size`` (features, targets) pairs cycling through 1024 random ones."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.features, self.targets = torch.randn(1024, INPUTS), torch.randn(1024, OUTPUTS)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.features[index % 1024], self.targets[index % 1024]


class StopOnFile(L.Callback):
    """Ends training once FOLDER/stop exists: as asked, or by raising ``Stopped`` when ``fail``."""

    def __init__(self, folder: Path, fail: bool) -> None:
        self.stop, self.fail = folder / "stop", fail

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.stop.exists():
            if self.fail:
                raise Stopped("stop file")
            trainer.should_stop = True


class Stopped(Exception):
    """Training failed (on purpose)."""


def main() -> None:
    folder = Path(sys.argv[1])
    gpusight = importlib.import_module(f"gpusight.torch.{PACKAGE}")
    callbacks = [StopOnFile(folder, "--fail" in sys.argv),
                 gpusight.GpusightCallback(peak_tflops=1.0, window_seconds=3.0, publish_interval=0.1, profile_every=50)]
    torch.manual_seed(0)
    train = torch.utils.data.DataLoader(Pairs(10_000_000), batch_size=BATCH)
    validation = None
    if "--checkpoint" in sys.argv:
        checkpoints = importlib.import_module("lightning.pytorch.callbacks" if PACKAGE == "lightning" else "pytorch_lightning.callbacks")
        callbacks.append(checkpoints.ModelCheckpoint(dirpath=folder / "checkpoints", every_n_train_steps=EVERY))
    else:
        validation = torch.utils.data.DataLoader(Pairs(8), batch_size=4)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=1, val_check_interval=EVERY, num_sanity_val_steps=0,
                        callbacks=callbacks, logger=False, enable_checkpointing="--checkpoint" in sys.argv,
                        enable_progress_bar=False, enable_model_summary=False)
    try:
        trainer.fit(Regression(), train, validation)
    except Stopped:
        pass  # the process lives on, as in a notebook
    (folder / "done").write_text("done")
    time.sleep(120)


if __name__ == "__main__":
    main()
