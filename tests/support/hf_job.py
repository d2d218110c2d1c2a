"""A tiny real Hugging Face Trainer run (GPT-2 from a config, CPU) with ``GpusightTrainerCallback``, for the tests.

``python hf_job.py FOLDER`` trains until FOLDER/stop exists, writes FOLDER/done, and sleeps until
killed (so a test can see the status record go while the process lives); gpusight logs into a SummaryWriter in
FOLDER/tensorboard, and FOLDER/steps gets the number of optimizer steps made. An evaluation every 8 steps reads a slow
dataset: time the loop spends away from its steps, which must not count as waiting for data. Model sizes are in
:data:`CONFIG`, the batch in :data:`BATCH`, :data:`ACCUMULATE` and :data:`SEQUENCE`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from torch.utils.tensorboard import SummaryWriter
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

from gpusight.torch.huggingface import GpusightTrainerCallback
from support.pace import Pace

CONFIG = {"n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 256, "n_positions": 64}
"""The GPT-2's size: 2 layers, width 64, a 256-token vocabulary."""
BATCH = 4
"""Samples per micro-batch (per_device_train_batch_size)."""
ACCUMULATE = 2
"""Micro-batches per optimizer step (gradient_accumulation_steps)."""
SEQUENCE = 32
"""Tokens per sample."""
PACE = Pace()
"""An evaluation takes as long as the steps before it."""


class Tokens(torch.utils.data.Dataset):
    """Random token sequences as a language-model dataset (labels = inputs); ``slow``: the first is as slow to load as
    the training steps before it took (an evaluation set on slow storage)."""

    def __init__(self, size: int, slow: bool = False) -> None:
        self.size, self.slow = size, slow

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if self.slow and index == 0:
            PACE.away()
        ids = torch.randint(0, CONFIG["vocab_size"], (SEQUENCE,), generator=torch.Generator().manual_seed(index))
        return {"input_ids": ids, "labels": ids}


class StopOnFile(TrainerCallback):
    """Ends training once FOLDER/stop exists."""

    def __init__(self, folder: Path) -> None:
        self.stop = folder / "stop"

    def on_step_end(self, args, state, control, **kwargs):
        if self.stop.exists():
            control.should_training_stop = True


def main() -> None:
    folder = Path(sys.argv[1])
    writer = SummaryWriter(str(folder / "tensorboard"))
    callbacks = [StopOnFile(folder), GpusightTrainerCallback(peak_tflops=1.0, window_seconds=3.0, publish_interval=0.1,
                                                             profile_every=50, log_to=writer)]
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**CONFIG))
    args = TrainingArguments(
        output_dir=str(folder / "out"), per_device_train_batch_size=BATCH, gradient_accumulation_steps=ACCUMULATE,
        per_device_eval_batch_size=4, max_steps=1_000_000, eval_strategy="steps", eval_steps=8, save_strategy="no",
        logging_steps=5, report_to=[], use_cpu=True, disable_tqdm=True, dataloader_num_workers=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=Tokens(100_000), eval_dataset=Tokens(8, slow=True),
                      callbacks=callbacks)
    trainer.train()
    writer.close()
    (folder / "steps").write_text(str(trainer.state.global_step))
    (folder / "done").write_text("done")
    time.sleep(120)


if __name__ == "__main__":
    main()
