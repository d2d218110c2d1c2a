"""Build the fake ``libnvidia-ml.so.1`` (tests/fakenvml/fake_nvml.c) and write scenarios for it.

The fake is a real shared library, so the real pynvml ctypes calls run against it; only the
answers come from a scenario file named by ``FAKE_NVML_SCENARIO``. The file is re-read whenever
it changes, so a test can rewrite it mid-run (``FakeScenario.write`` replaces it atomically).

Scenario format (the C file's header is the reference), one statement per line::

    driver_version 550.54.15          # global keys
    cuda_driver_version 12040
    nvml_version 12.550.54.15
    init_error 9                      # nvmlInit* returns this NVML code
    device_count 2                    # default: 1 + highest device index mentioned
    pcie_delay_ms 20                  # nvmlDeviceGetPcieThroughput sleeps this long
    call_delay_ms 2000                # every per-device call sleeps this long (a hung driver)
    device 0 name NVIDIA H100 80GB HBM3
    device 0 pci_bus_id 00000000:3B:00.0   # nvmlDeviceGetPciInfo_v3
    device 0 minor 0                  # nvmlDeviceGetMinorNumber
    device 0 util_gpu 87              # any per-device key left out -> NVML_ERROR_NOT_SUPPORTED
    device 0 error fan 3              # that call returns code 3
    device 0 compute_proc 1234 1073741824
    device 0 graphics_proc 1234 na    # na = NVML_VALUE_NOT_AVAILABLE
    device 0 proc_util 1234 55 20 1700000000000000   # pid sm% mem% timestamp(us)
    device 0 gpm 2 61.5               # GPM metric id and value
    device 0 lost 1                   # every call on the device -> GPU_IS_LOST
    device 0 util_gpu square 100 0 3000 3000     # a wave of the wall clock: 3 s at 100, 3 s at 0
    device 0 gpm 1 sine 50 40 10000   # 50 +- 40 with a 10 s period
    device 0 nvlink_tx_rate 2e10      # bytes/s integrated into the cumulative NVLink KiB counter
    device 0 proc_util_live 1234 20 square 95 5 2000 2000 500    # pid mem% sm%, sampled at each call
    device 0 remap_corrected 0        # health: nvmlDeviceGetRemappedRows (with remap_pending 1 ...)
    device 0 pcie_gen 3               # PCIe link, replays, NVLink error fields, ECC counts, video engines
    device 0 dec_util 97              # nvmlDeviceGetDecoderUtilization
    device 0 proc_codec 1234 0 88     # pid enc% dec% in that pid's utilization samples
    device 0 event_types 8            # nvmlDeviceGetSupportedEventTypes (8 = Xid)
    device 0 xid 1 79                 # an Xid event (seq code [gi ci]), delivered once per event set

MIG (``FakeGpu.mig_devices`` of ``FakeMig``; the C header's "MIG" paragraph is the reference)::

    device 0 mig_mode 1
    device 0 mig 0 gi 2               # MIG device 0: GPU instance 2, compute instance 0
    device 0 mig 0 ci 0
    device 0 mig 0 uuid MIG-2c1e5a70-8d3b-5f0e-9a41-0c7d2b6e4f02
    device 0 mig 0 name NVIDIA H100 80GB HBM3 MIG 3g.40gb
    device 0 mig 0 mem_total 42144366592
    device 0 mig 0 compute_proc 4101 12884901888
    device 0 mig 0 gpm 2 71.5         # per GPU instance, through nvmlGpmMigSampleGet
    device 0 error compute_procs 4    # an unprivileged user: the MIG parent's list is refused

``tests/support/mig.py`` builds a three-instance H100 from these.

``Square`` and ``Sine`` write those waves; every process reading the scenario sees the same value at
the same moment (the C header has the details).

``FAKE_NVML_CALL_LOG`` (optional) names a file to which every entry point appends
``<symbol> <device index or -1> <thread id>``; ``nvmlDeviceGetProcessUtilization`` also logs
``nvmlDeviceGetProcessUtilization.lastSeen <device> <thread id> <lastSeenTimeStamp>``. A call that
blocks logs ``<symbol>.delay <device> <thread id> <ms>`` as it starts to wait, and ``nvmlShutdown``
logs how many calls were blocked at that moment as its argument. ``read_call_log`` parses it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

FAKENVML_DIR = Path(__file__).resolve().parents[1] / "fakenvml"
"""Folder holding the C source of the fake library."""

SOURCE = FAKENVML_DIR / "fake_nvml.c"
"""The C source."""

BUILD_DIR = FAKENVML_DIR / "build"
"""Git-ignored build folder; each source version builds into a sub-folder named by its hash."""

LIBRARY_NAME = "libnvidia-ml.so.1"
"""File name (and SONAME) of the built library, the name pynvml loads."""

SCENARIO_ENV = "FAKE_NVML_SCENARIO"
"""Environment variable naming the scenario file."""

CALL_LOG_ENV = "FAKE_NVML_CALL_LOG"
"""Environment variable naming the optional call log."""

NOT_SUPPORTED = 3
"""NVML_ERROR_NOT_SUPPORTED."""

NO_PERMISSION = 4
"""NVML_ERROR_NO_PERMISSION."""

DRIVER_NOT_LOADED = 9
"""NVML_ERROR_DRIVER_NOT_LOADED."""

TIMEOUT = 10
"""NVML_ERROR_TIMEOUT."""

FUNCTION_NOT_FOUND = 13
"""NVML_ERROR_FUNCTION_NOT_FOUND."""

GPU_IS_LOST = 15
"""NVML_ERROR_GPU_IS_LOST."""

LIB_RM_VERSION_MISMATCH = 18
"""NVML_ERROR_LIB_RM_VERSION_MISMATCH."""

UNKNOWN = 999
"""NVML_ERROR_UNKNOWN."""


@functools.cache
def build_fake_nvml() -> Path:
    """Compile the fake library with the system ``cc`` (once per source version) and return its path.

    Safe when several pytest processes build at once: each compiles to a private temporary name
    and renames it into place.
    """
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    target = BUILD_DIR / digest / LIBRARY_NAME
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    compiler = os.environ.get("CC") or shutil.which("cc") or "cc"
    temporary = target.parent / f".{LIBRARY_NAME}.{os.getpid()}.tmp"
    command = [compiler, "-shared", "-fPIC", "-O2", "-Wall", f"-Wl,-soname,{LIBRARY_NAME}",
               "-o", str(temporary), str(SOURCE), "-lpthread", "-lm"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        temporary.unlink(missing_ok=True)
        raise RuntimeError(f"building the fake NVML failed: {' '.join(command)}\n{result.stderr}")
    os.replace(temporary, target)
    return target


@dataclass(frozen=True)
class Square:
    """A square wave of the wall clock: ``high`` for ``on_ms``, then ``low`` for ``off_ms``, delayed by ``phase_ms``."""

    high: float
    """Value while on."""
    low: float
    """Value while off."""
    on_ms: float
    """Milliseconds at ``high`` per period."""
    off_ms: float
    """Milliseconds at ``low`` per period."""
    phase_ms: float = 0.0
    """Delay of the whole wave, milliseconds."""

    def spec(self) -> str:
        """The wave as the scenario file writes it."""
        return f"square {self.high!r} {self.low!r} {self.on_ms!r} {self.off_ms!r} {self.phase_ms!r}"


@dataclass(frozen=True)
class Sine:
    """A sine wave of the wall clock: ``mid + amplitude * sin(2 pi t / period_ms)``, delayed by ``phase_ms``."""

    mid: float
    """Mean value."""
    amplitude: float
    """Largest distance from the mean."""
    period_ms: float
    """Period, milliseconds."""
    phase_ms: float = 0.0
    """Delay of the whole wave, milliseconds."""

    def spec(self) -> str:
        """The wave as the scenario file writes it."""
        return f"sine {self.mid!r} {self.amplitude!r} {self.period_ms!r} {self.phase_ms!r}"


Wave = Square | Sine
"""A value that changes with the wall clock."""


def scenario_value(value: float | Wave) -> str:
    """A number or a wave as the scenario file writes it (integers without a decimal point)."""
    if isinstance(value, (Square, Sine)):
        return value.spec()
    return str(value) if isinstance(value, int) else repr(value)


@dataclass
class FakeMig:
    """One MIG device of a fake GPU (the C header's "MIG" paragraph); ``None`` leaves a key out (NOT_SUPPORTED)."""

    gpu_instance_id: int
    """GPU instance id (nvmlDeviceGetGpuInstanceId)."""
    compute_instance_id: int = 0
    """Compute instance id within the GPU instance."""
    uuid: str | None = None
    """``MIG-...``; None derives one from the parent's index and the MIG index."""
    name: str | None = None
    """The driver's name for it, e.g. ``NVIDIA H100 80GB HBM3 MIG 3g.40gb``."""
    mem_total: int | None = None
    """The instance's memory, bytes."""
    mem_used: int | None = 0
    """Memory used in the instance, bytes."""
    sm_count: int | None = None
    """Multiprocessors (nvmlDeviceGetAttributes_v2)."""
    slices: tuple[int, int, int] | None = None
    """(GPU instance slices, compute instance slices, memory MB) of nvmlDeviceGetAttributes_v2."""
    compute_processes: list[tuple[int, int | None]] = field(default_factory=list)
    """(pid, used bytes or None for NOT_AVAILABLE) running in this instance."""
    gpm: dict[int, float | Wave] = field(default_factory=dict)
    """GPM metric id -> value between two nvmlGpmMigSampleGet samples of this GPU instance."""
    errors: dict[str, int] = field(default_factory=dict)
    """Call name on the MIG handle -> NVML return code."""

    def lines(self, prefix: str, mig_index: int) -> list[str]:
        """The scenario lines of this MIG device at ``mig_index`` of the device written ``prefix``."""
        head = f"{prefix} mig {mig_index}"
        parent = int(prefix.split()[1])
        uuid = self.uuid or f"MIG-00000000-0000-0000-{parent:04d}-{mig_index:012d}"
        out = [f"{head} gi {self.gpu_instance_id}", f"{head} ci {self.compute_instance_id}", f"{head} uuid {uuid}"]
        if self.name is not None:
            out.append(f"{head} name {self.name}")
        for key in ("mem_total", "mem_used", "sm_count"):
            if getattr(self, key) is not None:
                out.append(f"{head} {key} {getattr(self, key)}")
        if self.slices is not None:
            out.append(f"{head} slices {' '.join(map(str, self.slices))}")
        out += [f"{head} compute_proc {pid} {'na' if used is None else used}" for pid, used in self.compute_processes]
        out += [f"{head} gpm {metric} {scenario_value(value)}" for metric, value in self.gpm.items()]
        out += [f"{head} error {call} {code}" for call, code in self.errors.items()]
        return out


@dataclass
class FakeGpu:
    """One fake GPU. ``None`` leaves the key out, so the matching NVML call answers NOT_SUPPORTED.

    Defaults describe an idle-ish H100 without GPM or NVLink, MIG off and ECC on. A field typed with
    ``Wave`` may be a ``Square`` or ``Sine`` of the wall clock instead of a number (the fake itself takes
    a wave for any plain number key).
    """

    name: str | None = "NVIDIA H100 80GB HBM3"
    """Marketing name."""
    uuid: str | None = None
    """UUID; None derives ``GPU-00000000-0000-0000-0000-0000000000NN`` from the index."""
    pci_bus_id: str | None = None
    """PCI bus id (nvmlDeviceGetPciInfo_v3); None derives ``00000000:NN:00.0`` (NN = index + 1, hex) from the index
    (``errors={"pci_info": 3}`` makes it unsupported)."""
    minor: int | None = None
    """Minor number (``/dev/nvidiaN``); None means the index (``errors={"minor": 3}`` makes it unsupported)."""
    util_gpu: int | Wave | None = 50
    """Percent of time a kernel ran."""
    util_mem: int | Wave | None = 20
    """Memory controller busy percent."""
    mem_total: int | None = 80 << 30
    """Total memory, bytes."""
    mem_used: int | None = 10 << 30
    """Used memory without the reserved part, bytes."""
    mem_reserved: int | None = 512 << 20
    """Driver-reserved memory, bytes."""
    power_mw: int | Wave | None = 250_000
    """Power draw, milliwatts."""
    power_limit_mw: int | None = 700_000
    """Enforced power limit, milliwatts."""
    temp: int | Wave | None = 45
    """Core temperature, Celsius."""
    fan: int | None = None
    """Fan percent; None = passively cooled (not supported)."""
    clock_sm: int | Wave | None = 1980
    """SM clock, MHz."""
    clock_mem: int | None = 2619
    """Memory clock, MHz."""
    pstate: int | None = 0
    """Performance state."""
    energy_mj: int | None = 123_456_789
    """Energy since driver load, millijoules."""
    throttle: int | None = 0
    """Clocks-event (throttle) reason mask."""
    pcie_tx_bytes: int | None = None
    """Cumulative PCIe TX counter (field 197)."""
    pcie_rx_bytes: int | None = None
    """Cumulative PCIe RX counter (field 198)."""
    pcie_counter_time_us: int | None = None
    """Timestamp the fake reports with the counters; None = the current time."""
    pcie_tx_kbps: int | None = None
    """nvmlDeviceGetPcieThroughput TX, KB/s."""
    pcie_rx_kbps: int | None = None
    """nvmlDeviceGetPcieThroughput RX, KB/s."""
    pcie_tx_rate: float | Wave | None = None
    """PCIe TX bytes/s the fake integrates into field 197 (on top of ``pcie_tx_bytes``)."""
    pcie_rx_rate: float | Wave | None = None
    """PCIe RX bytes/s the fake integrates into field 198 (on top of ``pcie_rx_bytes``)."""
    nvlink_tx_kib: int | None = None
    """Cumulative NVLink TX data counter in KiB (field 138, all links); None with no rate = no NVLink."""
    nvlink_rx_kib: int | None = None
    """Cumulative NVLink RX data counter in KiB (field 139, all links)."""
    nvlink_tx_rate: float | Wave | None = None
    """NVLink TX bytes/s the fake integrates into field 138."""
    nvlink_rx_rate: float | Wave | None = None
    """NVLink RX bytes/s the fake integrates into field 139."""
    ecc_mode: int | None = 1
    """ECC enabled (1) or disabled (0)."""
    ecc_uncorrected: int | None = 0
    """Volatile uncorrected ECC errors."""
    mig_mode: int | None = 0
    """MIG mode."""
    compute_capability: tuple[int, int] | None = (9, 0)
    """CUDA compute capability."""
    gpm_supported: int | None = None
    """1 when GPM is supported."""
    gpm: dict[int, float | Wave] = field(default_factory=dict)
    """GPM metric id -> value reported by nvmlGpmMetricsGet."""
    lost: bool = False
    """The GPU fell off the bus."""
    errors: dict[str, int] = field(default_factory=dict)
    """Call name (see the C header) -> NVML return code."""
    compute_processes: list[tuple[int, int | None]] = field(default_factory=list)
    """(pid, used bytes or None for NOT_AVAILABLE)."""
    graphics_processes: list[tuple[int, int | None]] = field(default_factory=list)
    """(pid, used bytes or None for NOT_AVAILABLE)."""
    process_samples: list[tuple[int, int, int, int]] = field(default_factory=list)
    """(pid, sm %, mem %, timestamp us) for nvmlDeviceGetProcessUtilization."""
    live_process_samples: list[tuple[int, int, int | Wave]] = field(default_factory=list)
    """(pid, mem %, sm %): one sample per nvmlDeviceGetProcessUtilization call, stamped with the call's time."""
    health: FakeHealth = field(default_factory=lambda: FakeHealth())
    """ECC counts, remapped rows, retired pages, PCIe link, NVLink errors, video engines and Xid events."""
    mig_devices: dict[int, FakeMig] = field(default_factory=dict)
    """MIG index -> MIG device (set ``mig_mode=1`` too); slots left out are empty."""
    max_mig_devices: int | None = None
    """nvmlDeviceGetMaxMigDeviceCount; None = 7 when ``mig_mode`` is given."""

    _SCALARS = ("util_gpu", "util_mem", "mem_total", "mem_used", "mem_reserved", "power_mw", "power_limit_mw",
                "temp", "fan", "clock_sm", "clock_mem", "pstate", "energy_mj", "throttle", "pcie_tx_bytes",
                "pcie_rx_bytes", "pcie_counter_time_us", "pcie_tx_kbps", "pcie_rx_kbps", "ecc_mode",
                "ecc_uncorrected", "mig_mode", "gpm_supported", "pcie_tx_rate", "pcie_rx_rate", "nvlink_tx_kib",
                "nvlink_rx_kib", "nvlink_tx_rate", "nvlink_rx_rate")

    def lines(self, index: int) -> list[str]:
        """The scenario lines describing this GPU as device ``index``."""
        prefix = f"device {index}"
        uuid = self.uuid if self.uuid is not None else f"GPU-00000000-0000-0000-0000-{index:012d}"
        bus_id = self.pci_bus_id if self.pci_bus_id is not None else f"00000000:{index + 1:02X}:00.0"
        minor = self.minor if self.minor is not None else index
        out = [f"{prefix} uuid {uuid}", f"{prefix} pci_bus_id {bus_id}", f"{prefix} minor {minor}"]
        if self.name is not None:
            out.append(f"{prefix} name {self.name}")
        out += [f"{prefix} {key} {scenario_value(getattr(self, key))}"
                for key in self._SCALARS if getattr(self, key) is not None]
        if self.compute_capability is not None:
            out.append(f"{prefix} compute_capability {self.compute_capability[0]} {self.compute_capability[1]}")
        out += [f"{prefix} gpm {metric} {scenario_value(value)}" for metric, value in self.gpm.items()]
        out.append(f"{prefix} lost {int(self.lost)}")
        out += [f"{prefix} error {call} {code}" for call, code in self.errors.items()]
        for kind, processes in (("compute_proc", self.compute_processes), ("graphics_proc", self.graphics_processes)):
            out += [f"{prefix} {kind} {pid} {'na' if used is None else used}" for pid, used in processes]
        out += [f"{prefix} proc_util {pid} {sm} {mem} {ts}" for pid, sm, mem, ts in self.process_samples]
        out += [f"{prefix} proc_util_live {pid} {mem} {scenario_value(sm)}" for pid, mem, sm in self.live_process_samples]
        out += self.health.lines(prefix)
        if self.max_mig_devices is not None:
            out.append(f"{prefix} max_mig_devices {self.max_mig_devices}")
        for mig_index, mig in self.mig_devices.items():
            out += mig.lines(prefix, mig_index)
        return out


@dataclass
class FakeHealth:
    """A fake GPU's health counters, video engines and Xid events; ``None`` leaves a key out (NOT_SUPPORTED).

    Defaults: an A100-or-later GPU that remaps rows (no retired pages), at its full PCIe link, without
    NVLink, whose video engines are unsupported, and that delivers Xid events (none yet).
    """

    ecc_corrected: int | Wave | None = None
    """Corrected ECC errors, volatile (with ECC on, left out reads 0)."""
    ecc_corrected_aggregate: int | Wave | None = None
    """Corrected ECC errors, aggregate."""
    ecc_uncorrected_aggregate: int | Wave | None = None
    """Uncorrected ECC errors, aggregate (left out: the volatile count)."""
    remap_corrected: int | None = 0
    """Rows remapped after correctable errors; None makes nvmlDeviceGetRemappedRows unsupported."""
    remap_uncorrected: int | None = 0
    """Rows remapped after uncorrectable errors."""
    remap_pending: int | None = 0
    """1 while a remap waits for a GPU reset."""
    remap_failed: int | None = 0
    """1 when a remap failed."""
    retired_sbe: int | None = None
    """Pages retired after multiple single-bit errors (older GPUs only)."""
    retired_dbe: int | None = None
    """Pages retired after a double-bit error."""
    retired_pending: int | None = None
    """1 while a retirement waits for a reset."""
    pcie_gen: int | Wave | None = 5
    """Current PCIe generation."""
    pcie_gen_max: int | None = 5
    """Highest PCIe generation of GPU and slot."""
    pcie_width: int | Wave | None = 16
    """Current PCIe width."""
    pcie_width_max: int | None = 16
    """Widest PCIe link of GPU and slot."""
    pcie_replay: int | Wave | None = 0
    """PCIe replay counter."""
    nvlink_crc_flit: int | None = None
    """NVLink flow-control CRC errors (field 38); None = no NVLink."""
    nvlink_crc_data: int | None = None
    """NVLink data CRC errors (field 45)."""
    nvlink_replay: int | None = None
    """NVLink replays (field 52)."""
    nvlink_recovery: int | None = None
    """NVLink recoveries (field 59)."""
    enc_util: int | Wave | None = None
    """Encoder utilization percent."""
    dec_util: int | Wave | None = None
    """Decoder utilization percent."""
    jpg_util: int | Wave | None = None
    """JPEG decoder utilization percent."""
    ofa_util: int | Wave | None = None
    """Optical flow accelerator utilization percent."""
    event_types: int | None = 0x8
    """Supported event mask (0x8 = Xid); None makes event registration unsupported."""
    xids: list[tuple[int, int] | tuple[int, int, int, int]] = field(default_factory=list)
    """Xid events as (seq, code) or (seq, code, gpu instance, compute instance); each seq is delivered once."""
    process_codecs: list[tuple[int, int, int]] = field(default_factory=list)
    """(pid, encoder %, decoder %) in that pid's process utilization samples."""

    _SCALARS = ("ecc_corrected", "ecc_corrected_aggregate", "ecc_uncorrected_aggregate", "remap_corrected",
                "remap_uncorrected", "remap_pending", "remap_failed", "retired_sbe", "retired_dbe", "retired_pending",
                "pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max", "pcie_replay", "nvlink_crc_flit",
                "nvlink_crc_data", "nvlink_replay", "nvlink_recovery", "enc_util", "dec_util", "jpg_util",
                "ofa_util", "event_types")

    def lines(self, prefix: str) -> list[str]:
        """The scenario lines of these keys for the device written ``prefix`` (``"device N"``)."""
        out = [f"{prefix} {key} {scenario_value(getattr(self, key))}"
               for key in self._SCALARS if getattr(self, key) is not None]
        out += [f"{prefix} xid {' '.join(str(v) for v in xid)}" for xid in self.xids]
        out += [f"{prefix} proc_codec {pid} {enc} {dec}" for pid, enc, dec in self.process_codecs]
        return out


UNSUPPORTED_HEALTH = FakeHealth(remap_corrected=None, remap_uncorrected=None, remap_pending=None, remap_failed=None,
                                pcie_gen=None, pcie_gen_max=None, pcie_width=None, pcie_width_max=None,
                                pcie_replay=None, event_types=None)
"""A GPU that answers NOT_SUPPORTED to every health and video engine call (pair it with ``ecc_mode=None``)."""


@dataclass
class FakeScenario:
    """A whole fake machine: driver versions, init behaviour and GPUs."""

    gpus: list[FakeGpu] = field(default_factory=lambda: [FakeGpu()])
    """The GPUs, index = position."""
    driver_version: str | None = "550.54.15"
    """Driver version string."""
    cuda_driver_version: int | None = 12040
    """CUDA driver version as NVML encodes it (1000*major + 10*minor)."""
    nvml_version: str | None = "12.550.54.15"
    """NVML library version string."""
    init_error: int | None = None
    """NVML code nvmlInit returns, or None for success."""
    device_count: int | None = None
    """Device count to report; None = len(gpus)."""
    pcie_delay_ms: int = 0
    """Blocking time of each nvmlDeviceGetPcieThroughput call."""
    call_delay_ms: int = 0
    """Blocking time of every per-device call (handles and device queries), milliseconds."""

    def text(self) -> str:
        """The scenario file's content."""
        out = []
        for key in ("driver_version", "cuda_driver_version", "nvml_version", "init_error", "device_count"):
            if getattr(self, key) is not None:
                out.append(f"{key} {getattr(self, key)}")
        out.append(f"pcie_delay_ms {self.pcie_delay_ms}")
        out.append(f"call_delay_ms {self.call_delay_ms}")
        if self.device_count is None:
            out.append(f"device_count {len(self.gpus)}")
        for index, gpu in enumerate(self.gpus):
            out += gpu.lines(index)
        return "\n".join(out) + "\n"

    def write(self, path: Path | str) -> Path:
        """Write the scenario to ``path`` atomically (temporary file, then rename) and return the path."""
        path = Path(path)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(self.text(), encoding="utf-8")
        os.replace(temporary, path)
        return path


@dataclass(frozen=True)
class FakeCall:
    """One line of the call log."""

    symbol: str
    """NVML symbol called."""
    device: int
    """Device index, or -1 for calls not about one device."""
    thread_id: int
    """Linux thread id of the caller (``threading.get_native_id()``)."""
    argument: int | None = None
    """Extra logged argument (lastSeenTimeStamp of process utilization, milliseconds of a ``.delay``, calls
    blocked at an ``nvmlShutdown``), else None."""


def read_call_log(path: Path | str) -> list[FakeCall]:
    """Parse a call log written by the fake; a missing file is an empty log."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    calls = []
    for line in text.splitlines():
        symbol, device, thread_id, *argument = line.split()
        calls.append(FakeCall(symbol, int(device), int(thread_id), int(argument[0]) if argument else None))
    return calls


def count_calls(path: Path | str, symbol: str, device: int | None = None) -> int:
    """How many times ``symbol`` was called (on ``device`` when given) according to the call log."""
    return sum(1 for c in read_call_log(path) if c.symbol == symbol and (device is None or c.device == device))


def fake_nvml_env(library: Path, scenario: Path | None, call_log: Path | None = None,
                  base: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for a child process that loads the fake by its plain name through ``LD_LIBRARY_PATH``."""
    env = dict(os.environ if base is None else base)
    env["LD_LIBRARY_PATH"] = str(library.parent)
    env.pop(SCENARIO_ENV, None)
    env.pop(CALL_LOG_ENV, None)
    if scenario is not None:
        env[SCENARIO_ENV] = str(scenario)
    if call_log is not None:
        env[CALL_LOG_ENV] = str(call_log)
    return env


def run_python_with_fake_nvml(code: str, library: Path, scenario: Path | None, call_log: Path | None = None,
                              args: Sequence[str] = (), timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code`` in a child whose default NVML is the fake; returns the finished process."""
    return subprocess.run([sys.executable, "-c", code, *args], env=fake_nvml_env(library, scenario, call_log),
                          capture_output=True, text=True, timeout=timeout, check=False)
