"""The demo's scenario names with one line on each, for ``--help`` (cheap to import: the scenarios
themselves, gpusight.demo.scenarios, are imported only when a demo runs)."""

from __future__ import annotations

SCENARIOS: dict[str, str] = {
    "mixed": "8-GPU shared server: healthy DDP, an input-bound run, an idle notebook, "
        "a small-batch run and a hot GPU, for different users",
    "healthy": "4x H100 DDP training at 90-98 % utilization, 6 DataLoader workers per GPU",
    "input-bound": "GPUs starved by the input pipeline: bursty 15-40 % utilization, "
        "DataLoader workers pinned at 100 % CPU",
    "small-batch": "two runs with tiny batches: about 12 % of GPU memory used, moderate utilization",
    "throttling": "clocks pulled down: two GPUs at 87-90 C (thermal), two at the 700 W power cap",
    "idle-holding": "a notebook kernel started two days ago holds 34 GiB on an idle GPU",
    "imbalance": "a 4-GPU DDP job with a straggler: rank 2 at about 57 % (its input is slower) while "
        "the other ranks wait in NCCL at about 96 %",
    "serving": "an inference host: vLLM under load on 2 GPUs, an idle TGI server holding its KV cache, "
        "and a Triton server busy with unbatched requests",
    "stalls": "a trainer idle 2.5 s of every 7 s while its main process evaluates (workers asleep), "
        "and a notebook kernel holding memory on a GPU another user's trainer keeps busy",
    "comm-bound": "a 4-GPU DDP job spending its steps in all-reduce: all ranks at about 96 % util, "
        "SMs about 35 % active, NVLink busy",
    "mig": "an H100 split into MIG slices 3g.40gb, 2g.20gb and two 1g.10gb (a fine-tuning run, an idle "
        "notebook holding memory, a model server, one slice free) beside a whole H100 in training",
    "faulty": "hardware faults: GPU 0 with Xid 48 and 94 and a row remap pending (Xid 94 again during the "
        "run), GPU 1 on a PCIe link at Gen3 x8 (can run Gen5 x16), GPU 2 healthy",
    "video-decode": "a video model whose DALI pipeline keeps the GPU's decoders at 91-99 % while SMs idle and "
        "the trainer waits for data; beside it an image model decoding JPEGs on NVJPG",
    "amd": "8x AMD Instinct MI300X: a DDP job with a straggler, an input-bound run, an idle notebook "
        "holding memory, and a ROCm run whose own GPU share /dev/kfd hides",
    "mixed-vendor": "a mixed machine: 4 NVIDIA H100 in DDP beside 4 AMD MI300X (input-bound, idle notebook, "
        "ROCm run of unknown share)",
}
"""Scenario name -> one-line description (gpusight.demo.scenarios.SCENARIO_SPECS has one spec for each)."""

DEFAULT_SCENARIO = "mixed"
"""The scenario ``--demo`` shows when none is named: a busy shared server."""
