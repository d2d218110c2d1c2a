"""Filters: which GPUs to watch (``--gpus``, ``--cuda-visible``) and whose processes to show (``--user``).

GPU selection happens at the source, so the other GPUs are never polled: the NVML source opens
only the chosen GPUs, and :class:`GpuSelectingSource` drops the others from demo and replay data
before history and advice see them. The user filter is a view: the sampler applies
:meth:`Filters.apply` after the advice engine, so history, charts and the advice state stay whole
and the filter can change while the monitor runs.
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gputop.collect.model import DeviceSample, ErrorNote, ProcessRole, ProcessSample, ScopeKind, Snapshot
from gputop.collect.source import SnapshotSource

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


class UnknownUserError(ValueError):
    """A ``--user`` name that is neither a user of this host nor a numeric uid."""


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    """One GPU as a selection sees it: its NVML index, UUID and name (the last two None when unknown)."""

    index: int
    """NVML index."""
    uuid: str | None = None
    """``GPU-...`` identifier."""
    name: str | None = None
    """Marketing name, for messages."""


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
    where on the command line it ends gputop with an error."""

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
        return f"{CUDA_VISIBLE_DEVICES}={_cut(self.value, _SHOWN_VALUE)}"


GpuRequest = GpuIds | CudaVisible
"""A request for a set of GPUs."""


@dataclass(frozen=True, slots=True)
class SelectedGpu:
    """A GPU that is watched."""

    index: int
    """NVML index."""
    cuda_index: int | None = None
    """Its number in CUDA programs under ``CUDA_VISIBLE_DEVICES``, or None when that is not in use."""


@dataclass(frozen=True, slots=True)
class GpuSelection:
    """A request resolved against the GPUs present."""

    gpus: tuple[SelectedGpu, ...]
    """The GPUs to watch, in display order."""
    notes: tuple[str, ...] = ()
    """What the user should know about the selection (shown with every snapshot)."""
    error: str | None = None
    """Why the request names GPUs that do not exist (then ``gpus`` is empty); one line listing the GPUs there are."""


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

    def listing(self) -> str:
        """``GPUs here: 0 GPU-... (NVIDIA H100), 1 ...`` for an error message."""
        if not self._indexes:
            return "there are no GPUs here"
        parts = []
        for gpu in self.all():
            name = f" ({gpu.name})" if gpu.name else ""
            parts.append(f"{gpu.index} {gpu.uuid or 'no UUID'}{name}")
        return "GPUs here: " + ", ".join(parts)


def _resolve_ids(request: GpuIds, present: tuple[int, ...], inventory: _Inventory) -> GpuSelection:
    chosen: list[int] = []
    for token in request.ids:
        index, problem = _index_of(token, present, inventory)
        if problem is not None:
            message = f"{request.origin}: {problem}; {inventory.listing()}"
            if request.lenient:
                return GpuSelection(tuple(SelectedGpu(i) for i in present), notes=(message + "; showing all GPUs",))
            return GpuSelection((), error=message)
        if index is not None and index not in chosen:
            chosen.append(index)
    return GpuSelection(tuple(SelectedGpu(i) for i in chosen))


def _index_of(token: str, present: tuple[int, ...], inventory: _Inventory) -> tuple[int | None, str | None]:
    """(NVML index, None) for a ``--gpus`` id, or (None, why it names no single GPU)."""
    shown = _cut(token)
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
    return None, f"{shown!r} is neither a GPU index nor a UUID (GPU-...)"


def _resolve_cuda_visible(request: CudaVisible, present: tuple[int, ...], inventory: _Inventory) -> GpuSelection:
    """The GPUs CUDA sees for ``request``, as CUDA reads it: the first entry that names no GPU ends the list."""
    value = request.value
    if value is None:
        return GpuSelection(tuple(SelectedGpu(i) for i in present))
    if not value.strip():
        return GpuSelection((), notes=(f"{CUDA_VISIBLE_DEVICES} is empty: CUDA programs see no GPU",))
    visible: list[int] = []
    notes: list[str] = []
    by_uuid: bool | None = None
    for raw in value.split(","):
        entry = raw.strip()
        index, problem, uuid_entry = _cuda_entry(entry, present, inventory)
        if problem is None and by_uuid is not None and uuid_entry != by_uuid:
            problem = "mixes UUIDs and indexes"
        if problem is not None:
            seen = ",".join(map(str, visible)) or "none"
            notes.append(f"{CUDA_VISIBLE_DEVICES}: entry {_cut(entry)!r} {problem}, so CUDA ignores it and every "
                         f"entry after it; GPUs visible to CUDA: {seen}")
            break
        assert index is not None
        if index in visible:
            return GpuSelection((), notes=(f"{CUDA_VISIBLE_DEVICES} names GPU {index} twice: CUDA programs see no GPU",))
        by_uuid = uuid_entry
        visible.append(index)
    if by_uuid is False and request.device_order != PCI_BUS_ID and len({gpu.name for gpu in inventory.all()}) > 1:
        notes.append(f"{CUDA_DEVICE_ORDER} is not {PCI_BUS_ID} and the GPUs differ: CUDA may number them fastest "
                     f"first, so its GPU numbers can name other GPUs than shown; set {CUDA_DEVICE_ORDER}={PCI_BUS_ID}")
    gpus = tuple(SelectedGpu(index, cuda) for cuda, index in enumerate(visible))
    return GpuSelection(gpus, notes=tuple(notes))


def _cuda_entry(entry: str, present: tuple[int, ...], inventory: _Inventory) -> tuple[int | None, str | None, bool]:
    """(NVML index, None, is a UUID) for one CUDA_VISIBLE_DEVICES entry, or (None, why it is invalid, ...).

    Like CUDA, an entry that starts with digits is read as the number they form.
    """
    digits = _LEADING_DIGITS.match(entry)
    if digits:
        index = int(digits.group())
        return (index, None, False) if index in present else (None, "names no GPU", False)
    if entry[: len(_UUID_PREFIX)].upper() == _UUID_PREFIX:
        matches = inventory.by_uuid(entry)
        if len(matches) == 1:
            return matches[0], None, True
        return None, ("matches no GPU" if not matches else "matches several GPUs"), True
    return None, "is not a GPU index or a GPU- UUID", False


def select_gpus(snapshot: Snapshot, selection: GpuSelection) -> Snapshot:
    """``snapshot`` with only the selected GPUs (in selection order, CUDA numbers set) and what belongs to them.

    Processes on other GPUs, and the advice and error notes scoped to other GPUs or to those
    processes, are dropped; the selection's notes are added to the errors.
    """
    wanted = {gpu.index for gpu in selection.gpus}
    by_index = {device.index: device for device in snapshot.devices}
    devices = tuple(
        dataclasses.replace(by_index[gpu.index], cuda_index=gpu.cuda_index)
        for gpu in selection.gpus
        if gpu.index in by_index
    )
    processes = tuple(p for p in snapshot.processes if p.device_index in wanted)
    pids = {p.pid for p in processes} | {p.ppid for p in processes if p.ppid is not None}
    advice = tuple(a for a in snapshot.advice if _scope_kept(a.scope, wanted, pids))
    errors = tuple(e for e in snapshot.errors if _scope_kept(e.scope, wanted, pids))
    notes = tuple(ErrorNote(FILTER_SCOPE, note) for note in selection.notes)
    return dataclasses.replace(snapshot, devices=devices, processes=processes, advice=advice, errors=errors + notes)


def _scope_kept(scope: str, gpus: set[int] | None, pids: set[int]) -> bool:
    """Whether something scoped ``scope`` stays: a GPU scope among ``gpus`` (None: any GPU), a pid among ``pids``."""
    parsed = ScopeKind.parse(scope)
    if parsed is None or parsed[1] is None:
        return True
    kind, number = parsed
    if kind is ScopeKind.GPU:
        return gpus is None or number in gpus
    return kind is not ScopeKind.PID or number in pids


@runtime_checkable
class GpuSelecting(Protocol):
    """A source asked for some GPUs, which can say when they do not exist."""

    @property
    def selection_error(self) -> str | None:
        """Why the GPUs asked for cannot be shown (one line listing the GPUs there are), or None."""
        ...


class GpuSelectingSource:
    """Demo or replay data limited to the requested GPUs (the NVML source selects GPUs itself).

    The request is resolved against the GPUs of the first snapshot; ``selection_error`` then says
    when it names a GPU that is not there.
    """

    def __init__(self, source: SnapshotSource, request: GpuRequest) -> None:
        self.source = source
        """The wrapped source."""
        self.request = request
        """The GPUs asked for."""
        self.kind = source.kind
        """The wrapped source's kind."""
        self._selection: GpuSelection | None = None

    @property
    def selection_error(self) -> str | None:
        """Why the request cannot be met (e.g. no GPU 7 in the data), or None; known after the first poll."""
        return None if self._selection is None else self._selection.error

    def poll(self) -> Snapshot:
        """The wrapped source's snapshot with only the selected GPUs."""
        snapshot = self.source.poll()
        if self._selection is None:
            identities = {d.index: GpuIdentity(d.index, d.uuid, d.name) for d in snapshot.devices}
            self._selection = resolve_gpus(self.request, identities, identities.__getitem__)
        return select_gpus(snapshot, self._selection)

    def close(self) -> None:
        """Close the wrapped source."""
        self.source.close()


@dataclass(frozen=True, slots=True)
class UserFilter:
    """Only one user's GPU processes (their DataLoader workers follow them) and the advice about them."""

    name: str
    """User name as the process table shows it."""
    uid: int | None = None
    """Numeric uid, also matched (a process whose owner has no name shows the uid); None when unknown."""

    def matches(self, user: str | None) -> bool:
        """True when a process owned by ``user`` (a name or a numeric uid) belongs to this user."""
        return user is not None and (user == self.name or (self.uid is not None and user == str(self.uid)))

    def apply(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with only this user's processes, and without advice about other processes.

        GPUs and the advice about GPUs and the host stay: the filter hides people, not hardware.
        Advice scoped to a process (``pid<N>``) stays when N is a kept process or the parent of a
        kept GPU process (a launcher such as torchrun).
        """
        owners = {p.pid for p in snapshot.processes if p.role is not ProcessRole.DATALOADER_WORKER and self.matches(p.user)}
        processes = tuple(p for p in snapshot.processes if _belongs(p, owners))
        pids = {p.pid for p in processes} | {p.ppid for p in processes if p.ppid is not None and p.pid in owners}
        advice = tuple(a for a in snapshot.advice if _scope_kept(a.scope, None, pids))
        return dataclasses.replace(snapshot, processes=processes, advice=advice)


def _belongs(process: ProcessSample, owners: set[int]) -> bool:
    """A GPU process of the user, or a worker feeding one."""
    if process.role is ProcessRole.DATALOADER_WORKER:
        return process.trainer_pid in owners
    return process.pid in owners


def user_filter(name: str, *, must_exist: bool = True) -> UserFilter:
    """The filter for user ``name`` (a user name or a numeric uid).

    Raises UnknownUserError for a name this host does not know, unless ``must_exist`` is False
    (demo and replay data name users of other hosts).
    """
    if name.isdigit() and name.isascii():
        uid = int(name)
        try:
            return UserFilter(pwd.getpwuid(uid).pw_name, uid)
        except KeyError:
            return UserFilter(name, uid)
    try:
        return UserFilter(name, pwd.getpwnam(name).pw_uid)
    except KeyError:
        if must_exist or not name:
            raise UnknownUserError(f"no user {_cut(name)!r} on this host") from None
        return UserFilter(name)


def current_user_filter() -> UserFilter:
    """The filter for the user running gputop (by real uid, as the process table names owners)."""
    uid = os.getuid()
    try:
        return UserFilter(pwd.getpwuid(uid).pw_name, uid)
    except KeyError:
        return UserFilter(str(uid), uid)


@dataclass(frozen=True, slots=True)
class Filters:
    """The filters in force: a GPU request (applied by the source) and a user filter (a view)."""

    gpus: GpuRequest | None = None
    """The GPUs asked for, or None for all."""
    user: UserFilter | None = None
    """Whose processes are shown, or None for everyone's."""

    def apply(self, snapshot: Snapshot) -> Snapshot:
        """The view of ``snapshot`` these filters show (the GPU part was already applied by the source)."""
        return snapshot if self.user is None else self.user.apply(snapshot)

    def describe(self) -> str | None:
        """``GPUs 0,3, user alice`` for the header and the one-shot report; None when nothing is filtered."""
        parts = []
        if self.gpus is not None:
            parts.append(self.gpus.describe())
        if self.user is not None:
            parts.append(f"user {self.user.name}")
        return ", ".join(parts) or None


def filters_from_config(
    section: object, where: str, environ: Mapping[str, str], *, users_must_exist: bool = True
) -> tuple[Filters, list[str]]:
    """Filters from the config file's ``[filters]`` table; a bad value is a warning and that filter is ignored.

    Keys: ``gpus`` (a list such as ``[0, 3]`` or a string ``"0,3"``), ``cuda_visible`` (true to use
    ``CUDA_VISIBLE_DEVICES`` from ``environ``) and ``user`` (a user name; one this host does not know
    is a warning when ``users_must_exist``). ``where`` names the file in warnings.
    """
    if not isinstance(section, dict):
        return Filters(), [f"{where}: [filters] must be a table; filters ignored"]
    warnings: list[str] = []
    ids: tuple[str, ...] | None = None
    cuda_visible = False
    user: UserFilter | None = None
    for key, value in section.items():
        problem: str | None = None
        if key == "gpus":
            ids, problem = _config_gpu_ids(value)
        elif key == "cuda_visible":
            if isinstance(value, bool):
                cuda_visible = value
            else:
                problem = f"cuda_visible must be true or false, not {type(value).__name__}"
        elif key == "user":
            user, problem = _config_user(value, users_must_exist)
        else:
            problem = f"unknown key {_cut(str(key))!r}"
        if problem is not None:
            warnings.append(f"{where}: [filters] {problem}; ignored")
    gpus: GpuRequest | None = None
    if ids is not None:
        gpus = GpuIds(ids, origin=f"{where}: [filters] gpus", lenient=True)
        if cuda_visible:
            warnings.append(f"{where}: [filters] gpus and cuda_visible are both set; only gpus is used")
    elif cuda_visible:
        gpus = CudaVisible.from_environment(environ)
    return Filters(gpus, user), warnings


def _config_gpu_ids(value: object) -> tuple[tuple[str, ...] | None, str | None]:
    if isinstance(value, str):
        ids = tuple(part.strip() for part in value.split(","))
    elif isinstance(value, list) and all(isinstance(v, (int, str)) and not isinstance(v, bool) for v in value):
        ids = tuple(str(v).strip() for v in value)
    else:
        return None, f"gpus must be a list such as [0, 3] or a string such as \"0,3\", not {type(value).__name__}"
    if not ids or any(not part for part in ids):
        return None, "gpus must name at least one GPU, without empty entries"
    return ids, None


def _config_user(value: object, must_exist: bool) -> tuple[UserFilter | None, str | None]:
    if not isinstance(value, str):
        return None, f"user must be a user name, not {type(value).__name__}"
    try:
        return user_filter(value, must_exist=must_exist), None
    except UnknownUserError as exc:
        return None, f"user: {exc}"


def gpu_number(device: DeviceSample) -> str:
    """How a GPU is numbered on screen: its NVML index ``3``, or ``3 (cuda:0)`` with its CUDA number when it has one."""
    return str(device.index) if device.cuda_index is None else f"{device.index} (cuda:{device.cuda_index})"


def _cut(text: str, most: int = _SHOWN_ENTRY) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"
