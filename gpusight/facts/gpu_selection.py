"""Which GPUs to watch: ``--gpus`` ids and ``CUDA_VISIBLE_DEVICES`` resolved against the GPUs present.

A MIG device is named by its UUID (``MIG-...``), as CUDA accepts it: its parent GPU is polled, and only
the MIG devices named (and their processes) are kept.

Selection happens at the source, so the other GPUs are never polled: the NVML source opens only the
chosen GPUs (see :class:`gpusight.backends.nvml.backend.NvmlBackend`), and :class:`~gpusight.sampling.gpu_selecting_source.GpuSelectingSource` drops the
others from demo and replay data before history and advice see them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from gpusight.facts.jobs import trim_jobs
from gpusight.snapshot.model import DeviceSample, ErrorNote, MigDeviceSample, ProcessSample, ScopeKind, Snapshot

CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
"""The environment variable that tells CUDA programs which GPUs they see, and in which order."""

CUDA_DEVICE_ORDER = "CUDA_DEVICE_ORDER"
"""The environment variable that says how CUDA numbers the GPUs (``FASTEST_FIRST`` by default, or ``PCI_BUS_ID``)."""

PCI_BUS_ID = "PCI_BUS_ID"
"""The ``CUDA_DEVICE_ORDER`` under which CUDA numbers GPUs as NVML does."""

FILTER_SCOPE = "filters"
"""Scope of the notes a GPU selection adds to every snapshot (e.g. a truncated CUDA_VISIBLE_DEVICES)."""

_SHOWN_ENTRY = 40
"""Longest piece of a user-given id quoted back in a message."""

_SHOWN_VALUE = 200
"""Longest CUDA_VISIBLE_DEVICES value quoted in a description (room for a few full UUIDs)."""

_LEADING_DIGITS = re.compile(r"[0-9]+")
_UUID_PREFIX = "GPU-"
_MIG_PREFIX = "MIG-"


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    """One GPU as a selection sees it: its NVML index, UUID and name (the last two None when unknown)."""

    index: int
    """NVML index."""
    uuid: str | None = None
    """``GPU-...`` identifier."""
    name: str | None = None
    """Marketing name, for messages."""
    mig_uuids: tuple[str, ...] = ()
    """The ``MIG-...`` UUIDs of its MIG devices (none outside MIG mode)."""


GpuLookup = Callable[[int], GpuIdentity]
"""The identity of the GPU at an NVML index; only called when an id names a UUID, or for an error message."""


@dataclass(frozen=True, slots=True)
class GpuIds:
    """GPUs named by the user: NVML indexes or unique prefixes of UUIDs (``GPU-5f3a``), shown in that order."""

    ids: tuple[str, ...]
    """The ids as given."""
    origin: str = "--gpus"
    """Where they come from, named in messages: ``--gpus`` or the config file's ``[filters] gpus``."""
    lenient: bool = False
    """True for ids from the config file: an id that names no GPU is a warning and the filter is dropped,
    where on the command line it ends gpusight with an error."""

    def describe(self) -> str:
        """``GPUs 0,3`` for the header."""
        return "GPUs " + ",".join(self.ids)


@dataclass(frozen=True, slots=True)
class CudaVisible:
    """The GPUs ``CUDA_VISIBLE_DEVICES`` shows to CUDA programs, in CUDA's order and with CUDA's numbers.

    Integer entries are read as NVML indexes, which is CUDA's numbering when ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
    (and on machines whose GPUs are all alike); otherwise the selection says that CUDA may number them
    differently.
    """

    value: str | None
    """The variable's value; None when it is not set (CUDA then sees every GPU)."""
    device_order: str | None = None
    """The value of ``CUDA_DEVICE_ORDER``, or None when it is not set."""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> CudaVisible:
        """The request ``environ`` makes (``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER``)."""
        return cls(environ.get(CUDA_VISIBLE_DEVICES), environ.get(CUDA_DEVICE_ORDER))

    def describe(self) -> str:
        """``CUDA_VISIBLE_DEVICES=3,0`` (or that it is unset or empty) for the header."""
        if self.value is None:
            return f"{CUDA_VISIBLE_DEVICES} unset: all GPUs"
        if not self.value.strip():
            return f"{CUDA_VISIBLE_DEVICES} empty: no GPU"
        return f"{CUDA_VISIBLE_DEVICES}={cut_text(self.value, _SHOWN_VALUE)}"


GpuRequest = GpuIds | CudaVisible
"""A request for a set of GPUs."""


@dataclass(frozen=True, slots=True)
class SelectedMig:
    """A MIG device named by its UUID."""

    uuid: str
    """Its full ``MIG-...`` UUID."""
    cuda_index: int | None = None
    """Its number in CUDA programs under ``CUDA_VISIBLE_DEVICES``, or None when that is not in use."""


@dataclass(frozen=True, slots=True)
class SelectedGpu:
    """A GPU that is watched."""

    index: int
    """NVML index."""
    cuda_index: int | None = None
    """Its number in CUDA programs under ``CUDA_VISIBLE_DEVICES``, or None when that is not in use."""
    mig: tuple[SelectedMig, ...] | None = None
    """Only these of its MIG devices are kept (the GPU was named through them); None keeps them all."""


@dataclass(frozen=True, slots=True)
class GpuSelection:
    """A request resolved against the GPUs present."""

    gpus: tuple[SelectedGpu, ...]
    """The GPUs to watch, in display order."""
    notes: tuple[str, ...] = ()
    """What the user should know about the selection (shown with every snapshot)."""
    error: str | None = None
    """Why the request names GPUs that do not exist (then ``gpus`` is empty); one line listing the GPUs there are."""


def names_mig(request: GpuRequest) -> bool:
    """True when ``request`` names a MIG device (a ``MIG-`` id or entry), so the MIG devices' UUIDs must be read."""
    values = request.ids if isinstance(request, GpuIds) else (request.value or "").split(",")
    return any(value.strip()[: len(_MIG_PREFIX)].upper() == _MIG_PREFIX for value in values)


def resolve_gpus(request: GpuRequest, indexes: Iterable[int], lookup: GpuLookup) -> GpuSelection:
    """Resolve ``request`` against the GPUs at ``indexes`` (NVML indexes); ``lookup`` tells their UUIDs."""
    present = tuple(indexes)
    if isinstance(request, CudaVisible):
        return _resolve_cuda_visible(request, present, _Inventory(present, lookup))
    return _resolve_ids(request, present, _Inventory(present, lookup))


class _Inventory:
    """The GPUs' identities, asked for once and only when needed."""

    def __init__(self, indexes: tuple[int, ...], lookup: GpuLookup) -> None:
        self._indexes = indexes
        self._lookup = lookup
        self._known: tuple[GpuIdentity, ...] | None = None

    def all(self) -> tuple[GpuIdentity, ...]:
        if self._known is None:
            self._known = tuple(self._lookup(index) for index in self._indexes)
        return self._known

    def by_uuid(self, prefix: str) -> list[int]:
        """Indexes of the GPUs whose UUID starts with ``prefix`` (case does not matter)."""
        wanted = prefix.lower()
        return [gpu.index for gpu in self.all() if gpu.uuid is not None and gpu.uuid.lower().startswith(wanted)]

    def by_mig_uuid(self, prefix: str) -> list[tuple[int, str]]:
        """(parent index, full UUID) of the MIG devices whose UUID starts with ``prefix`` (case does not matter)."""
        wanted = prefix.lower()
        return [(gpu.index, uuid) for gpu in self.all() for uuid in gpu.mig_uuids if uuid.lower().startswith(wanted)]

    def listing(self) -> str:
        """``GPUs here: 0 GPU-... (NVIDIA H100) with MIG devices MIG-..., MIG-...; 1 ...`` for an error message."""
        if not self._indexes:
            return "there are no GPUs here"
        parts = []
        for gpu in self.all():
            name = f" ({gpu.name})" if gpu.name else ""
            migs = f" with MIG devices {', '.join(gpu.mig_uuids)}" if gpu.mig_uuids else ""
            parts.append(f"{gpu.index} {gpu.uuid or 'no UUID'}{name}{migs}")
        separator = "; " if any(gpu.mig_uuids for gpu in self.all()) else ", "
        return "GPUs here: " + separator.join(parts)


class _Chosen:
    """GPUs in the order first named, each whole (None) or through some of its MIG devices."""

    def __init__(self) -> None:
        self.migs: dict[int, list[SelectedMig] | None] = {}
        self.cuda: dict[int, int] = {}

    def add(self, index: int, mig: SelectedMig | None = None, cuda_index: int | None = None) -> None:
        if mig is None:
            self.migs[index] = None
            if cuda_index is not None:
                self.cuda[index] = cuda_index
            return
        kept = self.migs.setdefault(index, [])
        if kept is not None and all(m.uuid != mig.uuid for m in kept):
            kept.append(mig)

    def gpus(self) -> tuple[SelectedGpu, ...]:
        return tuple(SelectedGpu(index, self.cuda.get(index), None if migs is None else tuple(migs))
                     for index, migs in self.migs.items())


def _resolve_ids(request: GpuIds, present: tuple[int, ...], inventory: _Inventory) -> GpuSelection:
    chosen = _Chosen()
    for token in request.ids:
        if token[: len(_MIG_PREFIX)].upper() == _MIG_PREFIX:
            found, problem = _mig_of(token, inventory)
            if found is not None:
                chosen.add(found[0], SelectedMig(found[1]))
        else:
            index, problem = _index_of(token, present, inventory)
            if index is not None:
                chosen.add(index)
        if problem is not None:
            message = f"{request.origin}: {problem}; {inventory.listing()}"
            if request.lenient:
                return GpuSelection(tuple(SelectedGpu(i) for i in present), notes=(message + "; showing all GPUs",))
            return GpuSelection((), error=message)
    return GpuSelection(chosen.gpus())


def _mig_of(token: str, inventory: _Inventory) -> tuple[tuple[int, str] | None, str | None]:
    """((parent index, full UUID), None) for a ``MIG-`` id, or (None, why it names no single MIG device)."""
    shown = cut_text(token)
    matches = inventory.by_mig_uuid(token)
    if len(matches) == 1:
        return matches[0], None
    if not matches:
        return None, f"no MIG device has a UUID starting with {shown!r}"
    return None, f"{shown!r} matches {len(matches)} MIG devices; give more of the UUID"


def _index_of(token: str, present: tuple[int, ...], inventory: _Inventory) -> tuple[int | None, str | None]:
    """(NVML index, None) for a ``--gpus`` id, or (None, why it names no single GPU)."""
    shown = cut_text(token)
    if not token:
        return None, "empty GPU id"
    if _LEADING_DIGITS.fullmatch(token):
        if int(token) in present:
            return int(token), None
        return None, f"there is no GPU {shown}"
    if token[: len(_UUID_PREFIX)].upper() == _UUID_PREFIX:
        matches = inventory.by_uuid(token)
        if len(matches) == 1:
            return matches[0], None
        if not matches:
            return None, f"no GPU has a UUID starting with {shown!r}"
        return None, f"{shown!r} matches GPUs {', '.join(map(str, matches))}; give more of the UUID"
    return None, f"{shown!r} is neither a GPU index nor a UUID (GPU-... or MIG-...)"


def _resolve_cuda_visible(request: CudaVisible, present: tuple[int, ...], inventory: _Inventory) -> GpuSelection:
    """The GPUs CUDA sees for ``request``, as CUDA reads it: the first entry that names no GPU ends the list."""
    value = request.value
    if value is None:
        return GpuSelection(tuple(SelectedGpu(i) for i in present))
    if not value.strip():
        return GpuSelection((), notes=(f"{CUDA_VISIBLE_DEVICES} is empty: CUDA programs see no GPU",))
    visible: list[int | str] = []
    chosen = _Chosen()
    notes: list[str] = []
    by_uuid: bool | None = None
    for raw in value.split(","):
        entry = raw.strip()
        index, problem, uuid_entry, mig_uuid = _cuda_entry(entry, present, inventory)
        if problem is None and by_uuid is not None and uuid_entry != by_uuid:
            problem = "mixes UUIDs and indexes"
        if problem is not None:
            seen = ",".join(map(str, visible)) or "none"
            notes.append(f"{CUDA_VISIBLE_DEVICES}: entry {cut_text(entry)!r} {problem}, so CUDA ignores it and every "
                         f"entry after it; GPUs visible to CUDA: {seen}")
            break
        assert index is not None
        if (mig_uuid or index) in visible:
            twice = f"MIG device {mig_uuid}" if mig_uuid else f"GPU {index}"
            return GpuSelection((), notes=(f"{CUDA_VISIBLE_DEVICES} names {twice} twice: CUDA programs see no GPU",))
        by_uuid = uuid_entry
        cuda = len(visible)
        visible.append(mig_uuid or index)
        chosen.add(index, None if mig_uuid is None else SelectedMig(mig_uuid, cuda), cuda)
    if by_uuid is False and request.device_order != PCI_BUS_ID and len({gpu.name for gpu in inventory.all()}) > 1:
        notes.append(f"{CUDA_DEVICE_ORDER} is not {PCI_BUS_ID} and the GPUs differ: CUDA may number them fastest "
                     f"first, so its GPU numbers can name other GPUs than shown; set {CUDA_DEVICE_ORDER}={PCI_BUS_ID}")
    return GpuSelection(chosen.gpus(), notes=tuple(notes))


def _cuda_entry(entry: str, present: tuple[int, ...],
                inventory: _Inventory) -> tuple[int | None, str | None, bool, str | None]:
    """(NVML index, None, is a UUID, the MIG device's full UUID or None) for one CUDA_VISIBLE_DEVICES entry, or
    (None, why it is invalid, ...).

    Like CUDA, an entry that starts with digits is read as the number they form; a ``MIG-`` entry names the
    MIG device (its parent GPU is the index).
    """
    digits = _LEADING_DIGITS.match(entry)
    if digits:
        index = int(digits.group())
        return (index, None, False, None) if index in present else (None, "names no GPU", False, None)
    if entry[: len(_MIG_PREFIX)].upper() == _MIG_PREFIX:
        migs = inventory.by_mig_uuid(entry)
        if len(migs) == 1:
            return migs[0][0], None, True, migs[0][1]
        return None, ("matches no MIG device" if not migs else "matches several MIG devices"), True, None
    if entry[: len(_UUID_PREFIX)].upper() == _UUID_PREFIX:
        matches = inventory.by_uuid(entry)
        if len(matches) == 1:
            return matches[0], None, True, None
        return None, ("matches no GPU" if not matches else "matches several GPUs"), True, None
    return None, "is not a GPU index or a GPU- or MIG- UUID", False, None


def keep_migs(selected: tuple[SelectedMig, ...], migs: Iterable[MigDeviceSample],
              processes: Iterable[ProcessSample]) -> tuple[list[MigDeviceSample], list[ProcessSample]]:
    """Of one GPU's MIG devices and processes, those of the ``selected`` MIG devices (CUDA numbers set).

    A process stays when it runs in a kept instance (same GPU and compute instance ids).
    """
    cuda = {mig.uuid: mig.cuda_index for mig in selected}
    kept = [dataclasses.replace(m, cuda_index=cuda[m.uuid]) for m in migs if m.uuid in cuda]
    instances = {(m.gpu_instance_id, m.compute_instance_id) for m in kept}
    return kept, [p for p in processes if (p.gpu_instance_id, p.compute_instance_id) in instances]


def selected_parts(selection: GpuSelection, mig_devices: Iterable[MigDeviceSample],
                   processes: Iterable[ProcessSample]) -> tuple[list[MigDeviceSample], list[ProcessSample]]:
    """The MIG devices and processes of the selected GPUs, in selection order (only the selected MIG devices of a GPU
    chosen through some of them, with their processes)."""
    migs: list[MigDeviceSample] = []
    kept: list[ProcessSample] = []
    all_migs, all_processes = tuple(mig_devices), tuple(processes)
    for gpu in selection.gpus:
        gpu_migs = [m for m in all_migs if m.device_index == gpu.index]
        gpu_processes = [p for p in all_processes if p.device_index == gpu.index]
        if gpu.mig is not None:
            gpu_migs, gpu_processes = keep_migs(gpu.mig, gpu_migs, gpu_processes)
        migs += gpu_migs
        kept += gpu_processes
    return migs, kept


def select_gpus(snapshot: Snapshot, selection: GpuSelection) -> Snapshot:
    """``snapshot`` with only the selected GPUs (in selection order, CUDA numbers set) and what belongs to them.

    A GPU selected through some of its MIG devices keeps only those, their processes and what is scoped to them.

    Processes on other GPUs, and the advice and error notes scoped to other GPUs or to those
    processes, are dropped; jobs keep only their processes and GPUs that are shown (a job with none
    is dropped, with its advice); the selection's notes are added to the errors.
    """
    wanted = {gpu.index for gpu in selection.gpus}
    by_index = {device.index: device for device in snapshot.devices}
    devices = tuple(
        dataclasses.replace(by_index[gpu.index], cuda_index=gpu.cuda_index)
        for gpu in selection.gpus
        if gpu.index in by_index
    )
    migs, kept_processes = selected_parts(selection, snapshot.mig_devices, snapshot.processes)
    kept_ids = {id(p) for p in kept_processes}
    processes = tuple(p for p in snapshot.processes if id(p) in kept_ids)
    pids = {p.pid for p in processes} | {p.ppid for p in processes if p.ppid is not None}
    jobs = trim_jobs(snapshot.jobs, processes)
    kept = {ScopeKind.GPU: wanted, ScopeKind.PID: pids, ScopeKind.JOB: {job.id for job in jobs}}
    instances = {(m.device_index, m.gpu_instance_id) for m in migs}
    advice = tuple(a for a in snapshot.advice if scope_kept(a.scope, kept) and _instance_kept(a.scope, instances))
    errors = tuple(e for e in snapshot.errors if scope_kept(e.scope, kept) and _instance_kept(e.scope, instances))
    notes = tuple(ErrorNote(FILTER_SCOPE, note) for note in selection.notes)
    return dataclasses.replace(
        snapshot, devices=devices, processes=processes, jobs=jobs, advice=advice, errors=errors + notes,
        mig_devices=tuple(migs),
    )


def scope_kept(scope: str, kept: Mapping[ScopeKind, set[int]]) -> bool:
    """Whether something scoped ``scope`` stays: a scope of a kind in ``kept`` only when its number is kept."""
    parsed = ScopeKind.parse(scope)
    if parsed is None or parsed[1] is None or parsed[0] not in kept:
        return True
    return parsed[1] in kept[parsed[0]]


def _instance_kept(scope: str, instances: set[tuple[int, int | None]]) -> bool:
    """Whether something scoped ``scope`` stays: a MIG scope only when its instance is kept."""
    mig = ScopeKind.parse_mig(scope)
    return mig is None or mig in instances


def gpu_number(device: DeviceSample) -> str:
    """How a GPU is numbered on screen: its NVML index ``3``, or ``3 (cuda:0)`` with its CUDA number when it has one."""
    return str(device.index) if device.cuda_index is None else f"{device.index} (cuda:{device.cuda_index})"


def cut_text(text: str, most: int = _SHOWN_ENTRY) -> str:
    """``text``, cut to ``most`` characters with an ellipsis (user-given text quoted back in a message)."""
    return text if len(text) <= most else text[: most - 1] + "…"
