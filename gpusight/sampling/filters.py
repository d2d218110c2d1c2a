"""Filters: the GPUs asked for (applied by the source) and whose processes to show (``--user``, a view).

The user filter is a view: the sampler applies :meth:`Filters.apply` after the advice engine, so
history, charts and the advice state stay whole and the filter can change while the monitor runs.
The config file's ``[filters]`` section is read here too.
"""

from __future__ import annotations

import dataclasses
import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass

from gpusight.facts.gpu_selection import CudaVisible, GpuIds, GpuRequest, cut_text, scope_kept
from gpusight.facts.jobs import trim_jobs
from gpusight.snapshot.model import ProcessRole, ProcessSample, ScopeKind, Snapshot


class UnknownUserError(ValueError):
    """A ``--user`` name that is neither a user of this host nor a numeric uid."""


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
        kept GPU process (a launcher such as torchrun); jobs keep only the user's processes, and
        advice about a job (``job<N>``) stays while the job has some.
        """
        owners = {p.pid for p in snapshot.processes if p.role != ProcessRole.DATALOADER_WORKER and self.matches(p.user)}
        processes = tuple(p for p in snapshot.processes if _belongs(p, owners))
        pids = {p.pid for p in processes} | {p.ppid for p in processes if p.ppid is not None and p.pid in owners}
        jobs = trim_jobs(snapshot.jobs, processes)
        kept = {ScopeKind.PID: pids, ScopeKind.JOB: {job.id for job in jobs}}
        advice = tuple(a for a in snapshot.advice if scope_kept(a.scope, kept))
        return dataclasses.replace(snapshot, processes=processes, jobs=jobs, advice=advice)


def _belongs(process: ProcessSample, owners: set[int]) -> bool:
    """A GPU process of the user, or a worker feeding one."""
    if process.role == ProcessRole.DATALOADER_WORKER:
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
            raise UnknownUserError(f"no user {cut_text(name)!r} on this host") from None
        return UserFilter(name)


def current_user_filter() -> UserFilter:
    """The filter for the user running gpusight (by real uid, as the process table names owners)."""
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
            problem = f"unknown key {cut_text(str(key))!r}"
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
