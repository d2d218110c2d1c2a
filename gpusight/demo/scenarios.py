"""The demo's simulated machines: how each kind of workload behaves, and which jobs run where.

A :class:`Workload` gives the ranges one GPU and its feeding processes move within; a :class:`Job` is one user's run (a trainer,
an inference server, a notebook kernel) on one or more GPUs; a :class:`Scenario` is a whole host. The
numbers are plausible for an H100 SXM (80 GiB HBM3, 700 W limit, 1980 MHz boost clock, PCIe gen5).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpusight.demo.gpu_models import H100, MI300X, GpuModel
from gpusight.snapshot.model import BatchSizeSource, FlopsSource, MathMode


@dataclass(frozen=True, slots=True)
class StepShares:
    """How a trainer's step time splits, as ``gpusight.torch``'s sampled profile reports it: ranges in percent the
    demo moves within; compute takes what the other parts leave."""

    data: tuple[float, float]
    """Waiting for the next batch (the input wait)."""
    comm: tuple[float, float] = (0.0, 0.0)
    """NCCL collectives not hidden behind compute (taken as 0 for a job of one rank)."""
    copy: tuple[float, float] = (0.5, 1.5)
    """Host-to-device copies not hidden behind compute."""
    idle: tuple[float, float] = (1.0, 3.0)
    """Nothing running: the host launching kernels, Python between steps."""


@dataclass(frozen=True, slots=True)
class Workload:
    """How a GPU under one kind of load behaves, and how busy its trainer and workers are."""

    util: tuple[float, float]
    """Range of GPU utilization percent."""
    bursty: bool
    """True when utilization comes in short spikes (a starving GPU) rather than wandering smoothly."""
    gpu_memory_gib: float
    """GPU memory the trainer holds."""
    sm_share: float
    """GPM SM-active percent as a fraction of utilization."""
    occupancy_share: float
    """GPM SM-occupancy percent as a fraction of utilization."""
    tensor_share: float
    """GPM tensor-active percent as a fraction of utilization."""
    dram_share: float
    """GPM DRAM-active percent as a fraction of utilization."""
    memory_util_share: float
    """Memory-controller utilization as a fraction of GPU utilization."""
    power: tuple[float, float]
    """Range of power draw in watts."""
    temperature: tuple[float, float]
    """Range of GPU temperature in degrees Celsius."""
    clock_sm: tuple[int, int]
    """Range of SM clock in MHz (multiples of 15, as the GPU steps)."""
    throttle: tuple[str, ...]
    """Clock-event reasons always active."""
    hot_throttle: str | None
    """Extra reason added while the temperature is within 1 C of the top of its range."""
    pcie_rx_gbs: tuple[float, float]
    """Range of host-to-GPU PCIe traffic in GB/s."""
    pcie_tx_gbs: tuple[float, float]
    """Range of GPU-to-host PCIe traffic in GB/s."""
    trainer_cpu: tuple[float, float]
    """Range of the trainer's CPU percent (100 = one core)."""
    worker_cpu: tuple[float, float]
    """Range of each DataLoader worker's CPU percent."""
    workers: int
    """DataLoader workers per trainer."""
    worker_running: float
    """Fraction of the time a worker is running rather than sleeping on a full queue."""
    stall: tuple[float, float] | None = None
    """``(period, idle)`` seconds of regular stalls: every ``period`` the GPU idles for ``idle`` seconds while the
    workers sleep on their full queues; None when the GPU never stalls."""
    nvlink_gbs: tuple[float, float] | None = None
    """Range of NVLink traffic each way in GB/s; None when NVML reports no NVLink rates."""
    server: bool = False
    """True for an inference server: it reserves its GPU memory once at start (weights and KV cache), so the
    amount never moves; it has no DataLoader workers."""
    shares: StepShares | None = None
    """How a trainer's step time splits under this load; None where no training loop runs."""
    decoder: tuple[float, float] | None = None
    """Range of video decoder (NVDEC) utilization percent; None where the demo reports no video engines."""
    jpeg: tuple[float, float] | None = None
    """Range of JPEG decoder (NVJPG) utilization percent; None where not reported."""


HEALTHY = Workload(
    util=(90, 98), bursty=False, gpu_memory_gib=66.5, sm_share=0.9, occupancy_share=0.42, tensor_share=0.58,
    dram_share=0.62, memory_util_share=0.55, power=(560, 665), temperature=(63, 72), clock_sm=(1935, 1980),
    throttle=(), hot_throttle=None, pcie_rx_gbs=(2.0, 7.5), pcie_tx_gbs=(0.2, 0.9), trainer_cpu=(105, 145),
    worker_cpu=(30, 55), workers=6, worker_running=0.45,
    shares=StepShares(data=(0.5, 3.0), comm=(4.0, 9.0)),
)
"""Well-fed training: GPU busy, workers keep up with CPU to spare."""

INPUT_BOUND = Workload(
    util=(15, 40), bursty=True, gpu_memory_gib=41.0, sm_share=0.85, occupancy_share=0.38, tensor_share=0.5,
    dram_share=0.55, memory_util_share=0.5, power=(150, 330), temperature=(40, 49), clock_sm=(1980, 1980),
    throttle=(), hot_throttle=None, pcie_rx_gbs=(0.3, 11.5), pcie_tx_gbs=(0.05, 0.4), trainer_cpu=(55, 90),
    worker_cpu=(95, 100), workers=6, worker_running=0.97,
    shares=StepShares(data=(45.0, 80.0), copy=(1.0, 4.0)),
)
"""Starved GPU: short bursts of work whenever a batch arrives; every worker pinned on a core."""

SMALL_BATCH = Workload(
    util=(45, 65), bursty=False, gpu_memory_gib=9.8, sm_share=0.42, occupancy_share=0.18, tensor_share=0.12,
    dram_share=0.2, memory_util_share=0.25, power=(210, 290), temperature=(47, 55), clock_sm=(1980, 1980),
    throttle=(), hot_throttle=None, pcie_rx_gbs=(0.4, 1.6), pcie_tx_gbs=(0.05, 0.2), trainer_cpu=(97, 101),
    worker_cpu=(8, 22), workers=4, worker_running=0.15,
    shares=StepShares(data=(1.0, 5.0), idle=(22.0, 34.0)),
)
"""Tiny batches: most of the memory unused, small kernels, the trainer's launch thread pegged on one core."""

THERMAL = Workload(
    util=(95, 99), bursty=False, gpu_memory_gib=70.2, sm_share=0.9, occupancy_share=0.46, tensor_share=0.62,
    dram_share=0.66, memory_util_share=0.6, power=(520, 590), temperature=(87, 90), clock_sm=(1275, 1440),
    throttle=("sw_thermal",), hot_throttle="hw_thermal", pcie_rx_gbs=(1.5, 5.5), pcie_tx_gbs=(0.2, 0.7),
    trainer_cpu=(100, 135), worker_cpu=(25, 45), workers=6, worker_running=0.35,
    shares=StepShares(data=(0.5, 2.5), comm=(5.0, 10.0)),
)
"""Overheating GPU: clocks pulled down by the thermal limits."""

POWER_CAP = Workload(
    util=(96, 99), bursty=False, gpu_memory_gib=70.2, sm_share=0.92, occupancy_share=0.47, tensor_share=0.66,
    dram_share=0.68, memory_util_share=0.62, power=(689, 707), temperature=(76, 81), clock_sm=(1605, 1755),
    throttle=("sw_power_cap",), hot_throttle=None, pcie_rx_gbs=(1.5, 5.5), pcie_tx_gbs=(0.2, 0.7),
    trainer_cpu=(100, 135), worker_cpu=(25, 45), workers=6, worker_running=0.35,
    shares=StepShares(data=(0.5, 2.5), comm=(5.0, 10.0)),
)
"""GPU at its 700 W limit: clocks held down by the power cap."""

IDLE_HOLD = Workload(
    util=(0, 0), bursty=False, gpu_memory_gib=34.2, sm_share=0.0, occupancy_share=0.0, tensor_share=0.0,
    dram_share=0.0, memory_util_share=0.0, power=(68, 73), temperature=(31, 34), clock_sm=(345, 345),
    throttle=("gpu_idle",), hot_throttle=None, pcie_rx_gbs=(0.0, 0.0004), pcie_tx_gbs=(0.0, 0.0002),
    trainer_cpu=(0.0, 0.6), worker_cpu=(0, 0), workers=0, worker_running=0.0,
)
"""A forgotten notebook kernel: no work at all, but tens of GiB held."""

STRAGGLER = Workload(
    util=(50, 64), bursty=False, gpu_memory_gib=58.0, sm_share=0.88, occupancy_share=0.4, tensor_share=0.52,
    dram_share=0.58, memory_util_share=0.52, power=(330, 430), temperature=(55, 61), clock_sm=(1980, 1980),
    throttle=(), hot_throttle=None, pcie_rx_gbs=(1.0, 4.0), pcie_tx_gbs=(0.2, 0.8), trainer_cpu=(60, 85),
    worker_cpu=(95, 100), workers=6, worker_running=0.97,
    shares=StepShares(data=(34.0, 46.0), comm=(1.0, 3.0)),
)
"""The slow rank of a DDP job: its input is slower (its workers pinned at 100 % CPU), so every step waits for it."""

STRAGGLER_PEER = Workload(
    util=(94, 98), bursty=False, gpu_memory_gib=58.0, sm_share=0.7, occupancy_share=0.36, tensor_share=0.4,
    dram_share=0.5, memory_util_share=0.45, power=(430, 520), temperature=(60, 67), clock_sm=(1950, 1980),
    throttle=(), hot_throttle=None, pcie_rx_gbs=(1.0, 4.0), pcie_tx_gbs=(0.2, 0.8), trainer_cpu=(100, 120),
    worker_cpu=(30, 50), workers=6, worker_running=0.35,
    shares=StepShares(data=(1.0, 3.5), comm=(33.0, 45.0)),
)
"""The other ranks of that job: they finish their part early and wait in NCCL's all-reduce, whose
kernels NVML counts as busy, so they read about 96 % while doing less work than that."""

FREE = Workload(
    util=(0, 0), bursty=False, gpu_memory_gib=0.0, sm_share=0.0, occupancy_share=0.0, tensor_share=0.0,
    dram_share=0.0, memory_util_share=0.0, power=(62, 66), temperature=(28, 31), clock_sm=(345, 345),
    throttle=("gpu_idle",), hot_throttle=None, pcie_rx_gbs=(0.0, 0.0), pcie_tx_gbs=(0.0, 0.0),
    trainer_cpu=(0, 0), worker_cpu=(0, 0), workers=0, worker_running=0.0,
)
"""A GPU nobody uses."""

VLLM_LOAD = Workload(
    util=(60, 99), bursty=False, gpu_memory_gib=71.6, sm_share=0.82, occupancy_share=0.34, tensor_share=0.45,
    dram_share=0.78, memory_util_share=0.7, power=(380, 640), temperature=(58, 70), clock_sm=(1935, 1980),
    throttle=(), hot_throttle=None, pcie_rx_gbs=(0.02, 0.3), pcie_tx_gbs=(0.01, 0.15), trainer_cpu=(85, 101),
    worker_cpu=(0, 0), workers=0, worker_running=0.0, server=True,
)
"""An LLM server under load with continuous batching: utilization swings with the requests, 90 % of the memory
reserved at start (``--gpu-memory-utilization 0.9``, most of it KV cache), its worker spinning on one core."""

SERVER_IDLE = Workload(
    util=(0, 0), bursty=False, gpu_memory_gib=69.8, sm_share=0.0, occupancy_share=0.0, tensor_share=0.0,
    dram_share=0.0, memory_util_share=0.0, power=(70, 76), temperature=(32, 36), clock_sm=(345, 345),
    throttle=("gpu_idle",), hot_throttle=None, pcie_rx_gbs=(0.0, 0.0002), pcie_tx_gbs=(0.0, 0.0001),
    trainer_cpu=(0.3, 2.5), worker_cpu=(0, 0), workers=0, worker_running=0.0, server=True,
)
"""An LLM server nobody sends requests to: idle for hours, still holding its KV-cache reserve."""

SERVER_SMALL_BATCH = Workload(
    util=(55, 88), bursty=False, gpu_memory_gib=9.6, sm_share=0.33, occupancy_share=0.12, tensor_share=0.2,
    dram_share=0.3, memory_util_share=0.3, power=(190, 280), temperature=(45, 53), clock_sm=(1980, 1980),
    throttle=(), hot_throttle=None, pcie_rx_gbs=(0.5, 2.2), pcie_tx_gbs=(0.2, 0.9), trainer_cpu=(70, 130),
    worker_cpu=(0, 0), workers=0, worker_running=0.0, server=True,
)
"""A model server answering many requests one at a time (no dynamic batching): busy, yet few SMs active."""

STALLING = Workload(
    util=(90, 98), bursty=False, gpu_memory_gib=38.5, sm_share=0.88, occupancy_share=0.4, tensor_share=0.55,
    dram_share=0.6, memory_util_share=0.55, power=(480, 620), temperature=(55, 66), clock_sm=(1935, 1980),
    throttle=(), hot_throttle=None, pcie_rx_gbs=(1.5, 6.0), pcie_tx_gbs=(0.2, 0.8), trainer_cpu=(96, 112),
    worker_cpu=(25, 45), workers=6, worker_running=0.4, stall=(7.0, 2.5),
    shares=StepShares(data=(1.0, 4.0), idle=(2.0, 5.0)),
)
"""A trainer that evaluates on its main process every few seconds: busy for 4.5 s, then idle for 2.5 s while the
main process computes metrics on the CPU and the workers sleep on their full queues."""

COMM_BOUND = Workload(
    util=(93, 99), bursty=False, gpu_memory_gib=61.0, sm_share=0.36, occupancy_share=0.16, tensor_share=0.22,
    dram_share=0.3, memory_util_share=0.3, power=(300, 390), temperature=(52, 60), clock_sm=(1980, 1980),
    throttle=(), hot_throttle=None, pcie_rx_gbs=(0.5, 2.0), pcie_tx_gbs=(0.1, 0.5), trainer_cpu=(100, 115),
    worker_cpu=(8, 20), workers=4, worker_running=0.12, nvlink_gbs=(95, 160),
    shares=StepShares(data=(0.5, 2.0), comm=(40.0, 55.0), copy=(1.0, 2.0), idle=(2.0, 4.0)),
)
"""A DDP rank whose steps are mostly gradient all-reduce: NCCL kernels keep it "busy" with few SMs active
while NVLink carries 95-160 GB/s each way."""


VIDEO_DECODE = Workload(
    util=(28, 46), bursty=False, gpu_memory_gib=22.5, sm_share=0.8, occupancy_share=0.3, tensor_share=0.4,
    dram_share=0.35, memory_util_share=0.45, power=(210, 300), temperature=(44, 52), clock_sm=(1980, 1980),
    throttle=(), hot_throttle=None, pcie_rx_gbs=(0.6, 2.4), pcie_tx_gbs=(0.05, 0.3), trainer_cpu=(60, 95),
    worker_cpu=(20, 40), workers=2, worker_running=0.3,
    shares=StepShares(data=(48.0, 66.0), copy=(0.5, 1.5)), decoder=(91.0, 99.0), jpeg=(0.0, 3.0),
)
"""A video model fed by DALI/torchvision decoding on the GPU: the NVDEC engines near their limit, the SMs two-thirds
idle, and the trainer waiting for its next clip half of every step (its CPU workers have little to do)."""

JPEG_DECODE = replace(
    HEALTHY, util=(80, 94), decoder=(0.0, 0.0), jpeg=(35.0, 60.0), workers=3, worker_cpu=(15, 35),
    shares=StepShares(data=(2.0, 6.0)),
)
"""An image model whose JPEGs DALI decodes on NVJPG: the engine busy but not the bottleneck; the GPU well fed."""

MIG_PARENT = replace(FREE, power=(180, 260), temperature=(41, 49), clock_sm=(1755, 1980), throttle=(),
                     pcie_rx_gbs=(0.4, 3.0), pcie_tx_gbs=(0.05, 0.4))
"""A MIG-enabled GPU's own readings: power and temperature of its busy slices; NVML gives it no utilization."""

MIG_TRAIN = replace(HEALTHY, gpu_memory_gib=31.5, workers=4, trainer_cpu=(95, 120))
"""A fine-tuning run filling most of its 3g.40gb slice."""

MIG_SERVE = replace(SERVER_SMALL_BATCH, gpu_memory_gib=7.4)
"""A small model server on a 1g.10gb slice."""

MIG_NOTEBOOK = replace(IDLE_HOLD, gpu_memory_gib=14.2)
"""A forgotten notebook kernel holding most of a 2g.20gb slice."""

MI300X_STRAGGLER_PEER = replace(STRAGGLER_PEER, gpu_memory_gib=151.0)
"""A rank of a DDP job on an MI300X, its 192 GB filled by a larger batch than an H100 holds."""

MI300X_STRAGGLER = replace(STRAGGLER, gpu_memory_gib=151.0)
"""The slow rank of that job."""

MI300X_ROCM = replace(HEALTHY, gpu_memory_gib=122.0, workers=4)
"""A busy ROCm trainer whose own GPU share its fdinfo cannot tell (``Job.usage_unknown``)."""


@dataclass(frozen=True, slots=True)
class Faults:
    """A simulated GPU's hardware health: its counters and the Xid events it reports (all quiet by default)."""

    xids_before: tuple[tuple[float, int], ...] = ()
    """Xid events received before the demo started: (seconds before the start, code)."""
    xid_during: tuple[float, int] | None = None
    """``(period, code)``: an Xid of ``code`` arrives every ``period`` seconds of the run; None for none."""
    ecc_volatile_uncorrected: int = 0
    """Uncorrected ECC errors since the driver loaded."""
    ecc_aggregate_uncorrected: int = 0
    """Uncorrected ECC errors over the GPU's life."""
    ecc_corrected: int = 0
    """Corrected ECC errors since the driver loaded (the lifetime count is ten times as many)."""
    remapped_correctable: int = 0
    """Rows remapped after correctable errors."""
    remapped_uncorrectable: int = 0
    """Rows remapped after uncorrectable errors."""
    remap_pending: bool = False
    """A remap waits for a GPU reset."""
    pcie_link: tuple[int, int] = (5, 16)
    """(generation, width) the link runs at; an H100 SXM can run Gen5 x16."""
    pcie_replays_per_min: float = 0.0
    """PCIe replays a minute (a marginal link)."""


@dataclass(frozen=True, slots=True)
class MigSlice:
    """One MIG device of a simulated GPU: a GPU instance with one compute instance."""

    gpu: int
    """The parent GPU's index."""
    gpu_instance_id: int
    """Its GPU instance id (H100 numbers them by placement: 3g at 2, 2g at 3, 1g from 9)."""
    profile: str
    """Its profile, e.g. ``"3g.40gb"``."""
    sm_count: int
    """SMs in the instance."""
    memory_mib: int
    """Its memory in MiB, as NVML reports it."""


@dataclass(frozen=True, slots=True)
class Model:
    """What an instrumented trainer knows of its model and batch: the FLOPs of one sample and how they are known."""

    flops_per_sample: float
    """FLOPs of one sample's forward and backward pass."""
    batch_size: int
    """Samples per step on each rank."""
    tokens_per_sample: int | None
    """Tokens in a sample (sequence length) for a language model; None where the batch holds no token ids."""
    flops_source: FlopsSource
    """How the trainer knows its FLOPs per step (counted: HFU; given or 6N estimate: MFU)."""
    math_mode: MathMode
    """The arithmetic of its matrix multiplications, which picks the peak."""
    compute_utilization: float
    """Share of the GPU's peak the model reaches while it computes: the utilization of a step spent all in compute."""
    batch_size_source: BatchSizeSource = BatchSizeSource.BATCH
    """How the trainer knows its batch size."""


def _lm(params: float, sequence: int, batch: int, utilization: float) -> Model:
    """A decoder-only language model of ``params`` parameters in bf16, its FLOPs estimated as 6 x N x tokens."""
    return Model(6.0 * params * sequence, batch, sequence, FlopsSource.ESTIMATE_6N, MathMode.BF16, utilization)


@dataclass(frozen=True, slots=True)
class Job:
    """One user's run: a GPU process per GPU (a trainer with its DataLoader workers, a server, a kernel)."""

    user: str
    """Owner's user name."""
    gpus: tuple[int, ...]
    """GPU indices, one trainer (rank) on each."""
    workloads: tuple[Workload, ...]
    """Behaviour of each GPU in ``gpus``."""
    cmdline: str
    """Command line of each trainer (workers are forked, so they share it)."""
    launcher: str | None
    """Command line of the launcher (torchrun) that is every trainer's parent; None for a plain run."""
    age_hours: float
    """How long ago the job started."""
    rss_gib: float
    """Resident host memory of each trainer."""
    parent: str = "-bash"
    """Command line of the trainers' parent when there is no launcher: a login shell, a Jupyter server, or the
    process that started an inference server's GPU workers."""
    guest: bool = False
    """True when the job only holds memory on GPUs whose behaviour another job sets (a notebook kernel next to
    someone's trainer): its workloads give only its processes' memory and CPU, and its processes use no SMs."""
    model: Model | None = None
    """What its trainers report of their model through ``gpusight.torch`` (speed, FLOPs, MFU, step-time
    breakdown); None for a process that runs no instrumented training loop."""
    mig_instance: int | None = None
    """The GPU instance id of the MIG slice its one GPU process runs in; None on a whole GPU."""
    usage_unknown: bool = False
    """True for a ROCm run whose compute goes through ``/dev/kfd`` with the fdinfo engine counters flat: its GPU
    share is unknown (None, with the reason), though its GPU is busy."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A simulated host: its size and the jobs on its GPUs (GPUs with no job are free)."""

    gpu_count: int
    """Number of GPUs."""
    cores: int
    """Logical CPU cores."""
    memory_gib: int
    """Host memory."""
    hostname: str
    """Host name shown in the header."""
    iowait: tuple[float, float]
    """Range of host iowait percent."""
    jobs: tuple[Job, ...]
    """The runs on this host."""
    prefill_s: float = 120.0
    """Simulated history run before the demo shows, so charts are full and advice has held long enough to appear."""
    mig: tuple[MigSlice, ...] = ()
    """MIG devices of the MIG-enabled GPUs; a GPU with none is whole."""
    faults: tuple[Faults, ...] = ()
    """Hardware health of each GPU by index (GPUs past the end are healthy); empty when the demo reads no health."""
    gpus: tuple[GpuModel, ...] = ()
    """The kind of each GPU by index, NVIDIA first as the backends number them; GPUs past the end are H100s."""

    def gpu_model(self, index: int) -> GpuModel:
        """The kind of GPU ``index``."""
        return self.gpus[index] if index < len(self.gpus) else H100


def _ddp(
    user: str, gpus: tuple[int, ...], workloads: tuple[Workload, ...], script: str, hours: float, rss: float,
    model: Model,
) -> Job:
    """A torchrun job with one rank per GPU."""
    return Job(
        user=user, gpus=gpus, workloads=workloads, cmdline=f"/usr/bin/python3 -u {script}",
        launcher=f"/usr/bin/python3 /usr/local/bin/torchrun --standalone --nproc_per_node={len(gpus)} {script}",
        age_hours=hours, rss_gib=rss, model=model,
    )


_ALICE_LLM = "train.py --config configs/llama3_8b_sft.yaml --bf16"
_BOB_VISION = "train.py --config configs/resnet50_imagenet.yaml --data /mnt/nfs/imagenet --batch-size 256"
_CAROL_NOTEBOOK = (
    "/opt/conda/bin/python -m ipykernel_launcher -f "
    "/home/carol/.local/share/jupyter/runtime/kernel-5e1c2b7a-3f0d-4c8e-9a61-2d7b4f0e8c13.json"
)
_JUPYTER_LAB = "/opt/conda/bin/python /opt/conda/bin/jupyter-lab --no-browser --port 8888"
_DAVE_SWEEP = "/home/dave/venv/bin/python finetune.py --config configs/vit_b16_cifar.yaml --batch-size 8 --lr {lr}"
_ERIN_PRETRAIN = "pretrain.py --config configs/gpt2_xl.yaml --grad-accum 4"
_FRANK_SEG = "train.py --config configs/unet_seg.yaml --eval-every 50"
_VLLM = (
    "/usr/bin/python3 /opt/venv/bin/vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 2 "
    "--gpu-memory-utilization 0.9 --port 8000"
)
_TGI_LAUNCHER = "/usr/local/bin/text-generation-launcher --model-id mistralai/Mistral-7B-Instruct-v0.3 --port 8080"
_TGI_SHARD = (
    "/opt/conda/bin/python3.11 /opt/conda/bin/text-generation-server serve mistralai/Mistral-7B-Instruct-v0.3 "
    "--uds-path /tmp/text-generation-server --json-output"
)
_TRITON = "/opt/tritonserver/bin/tritonserver --model-repository=/models --http-port 8000 --grpc-port 8001"
_IVAN_EVAL = "/usr/bin/python3 train.py --config configs/dlrm_criteo.yaml --eval-every 40"
_JUDY_VIT = "/usr/bin/python3 train.py --config configs/vit_l16_in21k.yaml --bf16"
_KIM_FULL_FT = "train.py --config configs/qwen2_5_3b_full_ft.yaml --per-device-batch-size 1"
_LEO_VIDEO = "/usr/bin/python3 train.py --config configs/videomae_k400.yaml --decoder dali --bf16"
_MIA_IMAGES = "/usr/bin/python3 train.py --config configs/convnext_in1k.yaml --decoder nvjpeg"
_NINA_LORA = "/usr/bin/python3 finetune.py --config configs/mistral_7b_lora.yaml --bf16"
_TRITON_SMALL = "/opt/tritonserver/bin/tritonserver --model-repository=/models/small --http-port 8000"
_OSCAR_ROCM = "/opt/conda/envs/py_3.10/bin/python pretrain.py --config configs/mixtral_8x7b.yaml --bf16"

# What each run's trainer reports through gpusight.torch. FLOPs per sample: 6 x parameters x tokens for the
# language models; forward FLOPs (2 per multiply-add) times 3 for forward and backward for the others.
_ALICE_MODEL = _lm(8.03e9, 4096, 2, 0.52)
"""Llama 3 8B, sequences of 4096 tokens, 2 per GPU: MFU from the 6N estimate."""
_BOB_MODEL = Model(2.46e10, 256, None, FlopsSource.GIVEN, MathMode.TF32, 0.3)
"""ResNet-50 at 224 px (4.1 GMACs forward), FLOPs per step given by the user."""
_DAVE_MODEL = Model(5.28e10, 8, None, FlopsSource.COUNTED, MathMode.FP32, 0.3)
"""ViT-B/16 at 224 px (8.8 GMACs forward), in plain FP32, FLOPs counted by FlopCounterMode: HFU."""
_ERIN_MODEL = _lm(1.56e9, 1024, 8, 0.5)
"""GPT-2 XL, sequences of 1024 tokens, 8 per micro-batch."""
_FRANK_MODEL = Model(3.9e11, 16, None, FlopsSource.COUNTED, MathMode.TF32, 0.4)
"""A U-Net at 512x512 px (65 GMACs forward), FLOPs counted: HFU."""
_IVAN_MODEL = Model(1.2e8, 8192, None, FlopsSource.GIVEN, MathMode.TF32, 0.12, BatchSizeSource.GIVEN)
"""DLRM on Criteo: embedding lookups, few FLOPs per sample; its batches are dicts, so the batch size is given."""
_JUDY_MODEL = Model(1.85e11, 64, None, FlopsSource.COUNTED, MathMode.BF16, 0.5)
"""ViT-L/16 at 224 px (30.8 GMACs forward) in bf16, FLOPs counted: HFU."""
_KIM_MODEL = _lm(3.09e9, 2048, 1, 0.5)
"""Qwen2.5 3B, full fine-tuning, one sequence of 2048 tokens per GPU."""
_LEO_MODEL = Model(5.4e11, 16, None, FlopsSource.COUNTED, MathMode.BF16, 0.45)
"""VideoMAE-B on 16-frame clips at 224 px (about 180 GMACs forward), FLOPs counted: HFU."""
_MIA_MODEL = Model(2.7e10, 256, None, FlopsSource.GIVEN, MathMode.BF16, 0.4)
"""ConvNeXt-T at 224 px (4.5 GMACs forward), FLOPs per step given."""

_AMD_JOBS = (
    _ddp("frank", (0, 1, 2, 3), (MI300X_STRAGGLER_PEER, MI300X_STRAGGLER_PEER, MI300X_STRAGGLER, MI300X_STRAGGLER_PEER),
         _FRANK_SEG, 2.1, 9.0, _FRANK_MODEL),
    _ddp("bob", (4,), (INPUT_BOUND,), _BOB_VISION, 1.2, 7.5, _BOB_MODEL),
    Job("carol", (5,), (IDLE_HOLD,), _CAROL_NOTEBOOK, None, 51.0, 5.2, _JUPYTER_LAB),
    Job("oscar", (6,), (MI300X_ROCM,), _OSCAR_ROCM, None, 6.5, 12.0, usage_unknown=True),
)
"""An 8x MI300X host: a DDP job with a straggler on GPUs 0-3, an input-bound run, an idle notebook holding memory,
a ROCm run whose own GPU share is unknown, GPU 7 free."""

_MIXED_VENDOR_JOBS = (
    _ddp("alice", (0, 1, 2, 3), (HEALTHY,) * 4, _ALICE_LLM, 7.5, 11.0, _ALICE_MODEL),
    _ddp("bob", (4,), (INPUT_BOUND,), _BOB_VISION, 1.2, 7.5, _BOB_MODEL),
    Job("carol", (5,), (IDLE_HOLD,), _CAROL_NOTEBOOK, None, 51.0, 5.2, _JUPYTER_LAB),
    Job("oscar", (6,), (MI300X_ROCM,), _OSCAR_ROCM, None, 6.5, 12.0, usage_unknown=True),
)
"""4 H100 (GPUs 0-3, numbered first as NVML's are) in healthy DDP beside 4 MI300X: an input-bound run, an idle
notebook, a ROCm run of unknown share, one free."""

_H100_MIG = (
    MigSlice(0, 2, "3g.40gb", 60, 40320),
    MigSlice(0, 3, "2g.20gb", 32, 20096),
    MigSlice(0, 9, "1g.10gb", 16, 9856),
    MigSlice(0, 10, "1g.10gb", 16, 9856),
)
"""An H100 80GB split as a shared cluster splits it: one 3g, one 2g and two 1g slices."""

SCENARIO_SPECS: dict[str, Scenario] = {
    "mixed": Scenario(
        gpu_count=8, cores=96, memory_gib=2048, hostname="dgx-h100-01", iowait=(1.0, 4.5),
        jobs=(
            _ddp("alice", (0, 1, 2, 3), (HEALTHY,) * 4, _ALICE_LLM, 7.5, 11.0, _ALICE_MODEL),
            _ddp("bob", (4,), (INPUT_BOUND,), _BOB_VISION, 1.2, 7.5, _BOB_MODEL),
            Job("carol", (5,), (IDLE_HOLD,), _CAROL_NOTEBOOK, None, 51.0, 5.2, _JUPYTER_LAB),
            Job("dave", (6,), (SMALL_BATCH,), _DAVE_SWEEP.format(lr="3e-4"), None, 0.8, 4.1, model=_DAVE_MODEL),
            _ddp("erin", (7,), (THERMAL,), _ERIN_PRETRAIN, 3.4, 12.5, _ERIN_MODEL),
        ),
    ),
    "healthy": Scenario(
        gpu_count=4, cores=64, memory_gib=1024, hostname="h100-node-03", iowait=(0.2, 1.2),
        jobs=(_ddp("alice", (0, 1, 2, 3), (HEALTHY,) * 4, _ALICE_LLM, 7.5, 11.0, _ALICE_MODEL),),
    ),
    "input-bound": Scenario(
        gpu_count=4, cores=32, memory_gib=512, hostname="h100-node-11", iowait=(4.0, 11.0),
        jobs=(_ddp("bob", (0, 1, 2, 3), (INPUT_BOUND,) * 4, _BOB_VISION, 1.2, 7.5, _BOB_MODEL),),
    ),
    "small-batch": Scenario(
        gpu_count=2, cores=32, memory_gib=512, hostname="h100-node-05", iowait=(0.1, 0.8),
        jobs=(
            Job("dave", (0,), (SMALL_BATCH,), _DAVE_SWEEP.format(lr="3e-4"), None, 0.8, 4.1, model=_DAVE_MODEL),
            Job("dave", (1,), (SMALL_BATCH,), _DAVE_SWEEP.format(lr="1e-4"), None, 0.8, 4.1, model=_DAVE_MODEL),
        ),
    ),
    "throttling": Scenario(
        gpu_count=4, cores=64, memory_gib=1024, hostname="h100-node-09", iowait=(0.2, 1.2),
        jobs=(_ddp("erin", (0, 1, 2, 3), (THERMAL, THERMAL, POWER_CAP, POWER_CAP), _ERIN_PRETRAIN, 3.4, 12.5, _ERIN_MODEL),),
    ),
    "idle-holding": Scenario(
        gpu_count=4, cores=64, memory_gib=1024, hostname="h100-node-02", iowait=(0.2, 1.0),
        jobs=(
            Job("carol", (0,), (IDLE_HOLD,), _CAROL_NOTEBOOK, None, 51.0, 5.2, _JUPYTER_LAB),
            _ddp("dave", (1, 2), (HEALTHY,) * 2, _ALICE_LLM, 2.5, 11.0, _ALICE_MODEL),
        ),
    ),
    "imbalance": Scenario(
        gpu_count=4, cores=64, memory_gib=1024, hostname="h100-node-06", iowait=(0.2, 1.2),
        jobs=(
            _ddp(
                "frank", (0, 1, 2, 3), (STRAGGLER_PEER, STRAGGLER_PEER, STRAGGLER, STRAGGLER_PEER), _FRANK_SEG, 2.1, 9.0, _FRANK_MODEL
            ),
        ),
    ),
    "serving": Scenario(
        gpu_count=4, cores=64, memory_gib=1024, hostname="h100-infer-02", iowait=(0.1, 0.6), prefill_s=330.0,
        jobs=(
            Job("svc-llm", (0, 1), (VLLM_LOAD,) * 2, _VLLM, None, 19.0, 6.8, _VLLM),
            Job("henry", (2,), (SERVER_IDLE,), _TGI_SHARD, None, 26.0, 4.9, _TGI_LAUNCHER),
            Job("svc-embed", (3,), (SERVER_SMALL_BATCH,), _TRITON, None, 52.0, 3.6, "/usr/bin/tini -- " + _TRITON),
        ),
    ),
    "stalls": Scenario(
        gpu_count=2, cores=32, memory_gib=512, hostname="h100-node-14", iowait=(0.2, 1.0),
        jobs=(
            Job("ivan", (0,), (STALLING,), _IVAN_EVAL, None, 0.6, 9.5, model=_IVAN_MODEL),
            Job("judy", (1,), (replace(HEALTHY, gpu_memory_gib=52.0),), _JUDY_VIT, None, 5.5, 8.2, model=_JUDY_MODEL),
            Job("carol", (1,), (replace(IDLE_HOLD, gpu_memory_gib=11.4),), _CAROL_NOTEBOOK, None, 3.0, 4.6,
                _JUPYTER_LAB, guest=True),
        ),
    ),
    "comm-bound": Scenario(
        gpu_count=4, cores=64, memory_gib=1024, hostname="h100-node-08", iowait=(0.2, 1.0),
        jobs=(_ddp("kim", (0, 1, 2, 3), (COMM_BOUND,) * 4, _KIM_FULL_FT, 4.2, 14.0, _KIM_MODEL),),
    ),
    "mig": Scenario(
        gpu_count=2, cores=64, memory_gib=1024, hostname="h100-mig-04", iowait=(0.2, 1.0), mig=_H100_MIG,
        jobs=(
            Job("nina", (0,), (MIG_TRAIN,), _NINA_LORA, None, 3.2, 9.0, mig_instance=2),
            Job("carol", (0,), (MIG_NOTEBOOK,), _CAROL_NOTEBOOK, None, 27.0, 4.4, _JUPYTER_LAB, mig_instance=3),
            Job("svc-embed", (0,), (MIG_SERVE,), _TRITON_SMALL, None, 40.0, 3.1, "/usr/bin/tini -- " + _TRITON_SMALL,
                mig_instance=9),
            _ddp("alice", (1,), (HEALTHY,), _ALICE_LLM, 7.5, 11.0, _ALICE_MODEL),
        ),
    ),
    "faulty": Scenario(
        gpu_count=3, cores=64, memory_gib=1024, hostname="h100-node-17", iowait=(0.2, 1.0),
        faults=(
            Faults(xids_before=((5400.0, 48), (5399.0, 94)), xid_during=(90.0, 94), ecc_volatile_uncorrected=2,
                   ecc_aggregate_uncorrected=3, ecc_corrected=41, remapped_correctable=1, remapped_uncorrectable=2,
                   remap_pending=True),
            Faults(pcie_link=(3, 8), pcie_replays_per_min=6.0),
        ),
        jobs=(_ddp("erin", (0, 1, 2), (HEALTHY,) * 3, _ERIN_PRETRAIN, 3.4, 12.5, _ERIN_MODEL),),
    ),
    "video-decode": Scenario(
        gpu_count=2, cores=32, memory_gib=512, hostname="h100-node-21", iowait=(0.2, 1.0),
        jobs=(
            Job("leo", (0,), (VIDEO_DECODE,), _LEO_VIDEO, None, 2.2, 14.0, model=_LEO_MODEL),
            Job("mia", (1,), (JPEG_DECODE,), _MIA_IMAGES, None, 5.1, 9.5, model=_MIA_MODEL),
        ),
    ),
    "amd": Scenario(
        gpu_count=8, cores=128, memory_gib=2048, hostname="mi300x-node-01", iowait=(1.0, 4.5), jobs=_AMD_JOBS,
        gpus=(MI300X,) * 8,
    ),
    "mixed-vendor": Scenario(
        gpu_count=8, cores=128, memory_gib=2048, hostname="mixed-node-01", iowait=(1.0, 4.5),
        jobs=_MIXED_VENDOR_JOBS, gpus=(H100,) * 4 + (MI300X,) * 4,
    ),
}
"""Every scenario by name, the default first."""
