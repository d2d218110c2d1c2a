"""Shared fixtures: the fake NVML library and scenario files.

Fixtures
- ``fake_nvml_lib`` (session): path of the built fake ``libnvidia-ml.so.1``.
- ``nvml_scenario``: a ``ScenarioFile`` bound to a temporary file; ``FAKE_NVML_SCENARIO`` and
  ``FAKE_NVML_CALL_LOG`` point at it for this test. ``nvml_scenario.write(FakeScenario(...))``.
- ``fake_pynvml``: the in-process ``pynvml`` module with ``pynvml.nvmlLib`` set to the fake; every
  init left over is shut down afterwards and pynvml's library and function cache are reset.
- ``make_nvml_source``: factory ``make_nvml_source(**kwargs) -> NvmlBackend`` loading the fake; every
  source it made is closed after the test.
- ``make_device_reader``: factory ``make_device_reader() -> (DeviceReader, SteppedClock)`` for GPU 0 of the
  current scenario, on a clock the test sets by hand (for the per-device read periods); closed afterwards.

Tests that need an outside program (Prometheus, Chromium, a shell) skip, with the reason, where it is not
installed. CI names them in ``GPUSIGHT_REQUIRE_TOOLS`` (``.ci/run``): there a missing one stops the run instead,
so those tests cannot be skipped there unnoticed.

A session-wide guard (autouse) loads the fake before anything else, so a plain
``CDLL("libnvidia-ml.so.1")`` in this process resolves to it (the dynamic loader matches the
already-loaded SONAME) and puts its folder first in ``LD_LIBRARY_PATH`` for child processes. A real
NVIDIA library is therefore never touched by the tests; without ``FAKE_NVML_SCENARIO`` the fake
answers ``nvmlInit`` with NVML_ERROR_DRIVER_NOT_LOADED, like a machine without a running driver.
"""

from __future__ import annotations

import ctypes
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpusight.backends.interface import FDINFO_ROOT_VARIABLE, SYSFS_ROOT_VARIABLE
from support.fake_nvml import (
    CALL_LOG_ENV,
    SCENARIO_ENV,
    FakeCall,
    FakeScenario,
    build_fake_nvml,
    count_calls,
    read_call_log,
)

REQUIRED_TOOLS_ENV = "GPUSIGHT_REQUIRE_TOOLS"
"""Programs (space-separated) that must be on PATH for this run; set by CI."""


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop the run when a program ``GPUSIGHT_REQUIRE_TOOLS`` names is missing (CI must not skip its tests)."""
    missing = [tool for tool in os.environ.get(REQUIRED_TOOLS_ENV, "").split() if shutil.which(tool) is None]
    if missing:
        pytest.exit(f"{REQUIRED_TOOLS_ENV} needs {', '.join(missing)} on PATH; install them first (see README.md)",
                    returncode=4)


@pytest.fixture(scope="session")
def fake_nvml_lib() -> Path:
    """Path of the fake ``libnvidia-ml.so.1``, compiled once per source version."""
    return build_fake_nvml()


@pytest.fixture(scope="session", autouse=True)
def _no_real_nvml(fake_nvml_lib: Path) -> Iterator[None]:
    """Make every NVML load in this run, in process or in children, find the fake instead of a real driver."""
    for name in (SCENARIO_ENV, CALL_LOG_ENV):
        os.environ.pop(name, None)
    preloaded = ctypes.CDLL(str(fake_nvml_lib))
    previous = os.environ.get("LD_LIBRARY_PATH")
    os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(fake_nvml_lib.parent), previous) if p)
    yield
    del preloaded
    if previous is None:
        os.environ.pop("LD_LIBRARY_PATH", None)
    else:
        os.environ["LD_LIBRARY_PATH"] = previous


@pytest.fixture(scope="session", autouse=True)
def _no_real_sysfs_gpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Point the amdgpu and Intel backends at empty trees, in process and in children: a real AMD card or an Intel
    integrated GPU on the test machine must not join the fake NVML's GPUs. Their own tests name fixture trees."""
    empty = tmp_path_factory.mktemp("no-sysfs-gpus")
    saved = {name: os.environ.get(name) for name in (SYSFS_ROOT_VARIABLE, FDINFO_ROOT_VARIABLE)}
    os.environ[SYSFS_ROOT_VARIABLE] = str(empty)
    os.environ[FDINFO_ROOT_VARIABLE] = str(empty)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@dataclass
class ScenarioFile:
    """A scenario file and call log for one test; the environment already points the fake at both."""

    path: Path
    """The scenario file."""
    call_log: Path
    """The fake's call log."""

    def write(self, scenario: FakeScenario) -> Path:
        """Replace the scenario atomically; the fake picks it up on its next call."""
        return scenario.write(self.path)

    def calls(self) -> list[FakeCall]:
        """Every call logged so far."""
        return read_call_log(self.call_log)

    def count(self, symbol: str, device: int | None = None) -> int:
        """How many times ``symbol`` was called (on ``device`` when given)."""
        return count_calls(self.call_log, symbol, device)

    def clear_log(self) -> None:
        """Forget the calls logged so far."""
        self.call_log.unlink(missing_ok=True)


@pytest.fixture
def nvml_scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ScenarioFile:
    """A scenario writer bound to a temporary file, with ``FAKE_NVML_SCENARIO``/``FAKE_NVML_CALL_LOG`` set."""
    scenario = ScenarioFile(tmp_path / "nvml-scenario.txt", tmp_path / "nvml-calls.log")
    monkeypatch.setenv(SCENARIO_ENV, str(scenario.path))
    monkeypatch.setenv(CALL_LOG_ENV, str(scenario.call_log))
    return scenario


def _reset_pynvml() -> None:
    """Shut down every NVML init still open in pynvml and forget its library and function pointers."""
    import pynvml

    while pynvml._nvmlLib_refcount > 0 and pynvml.nvmlLib is not None:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pynvml._nvmlLib_refcount = 0
    pynvml.nvmlLib = None
    pynvml._nvmlGetFunctionPointer_cache.clear()


@pytest.fixture
def fake_pynvml(fake_nvml_lib: Path, nvml_scenario: ScenarioFile) -> Iterator[object]:
    """The ``pynvml`` module pointed at the fake library (init not done yet); reset after the test."""
    import pynvml

    _reset_pynvml()
    pynvml.nvmlLib = ctypes.CDLL(str(fake_nvml_lib))
    yield pynvml
    _reset_pynvml()


class SteppedClock:
    """A monotonic clock the test sets by hand: ``clock.now = ...``."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def make_device_reader(fake_pynvml: object) -> Iterator[Callable[[], tuple[object, SteppedClock]]]:
    """Factory for a ``DeviceReader`` of GPU 0 (NVML started on the fake) and its hand-set clock."""
    from gpusight.backends.nvml.device import DeviceReader
    from gpusight.backends.nvml.pcie import PcieThroughputPoller

    readers: list[DeviceReader] = []
    poller = PcieThroughputPoller()

    def make() -> tuple[DeviceReader, SteppedClock]:
        fake_pynvml.nvmlInit()  # type: ignore[attr-defined]
        clock = SteppedClock()
        handle = fake_pynvml.nvmlDeviceGetHandleByIndex(0)  # type: ignore[attr-defined]
        reader = DeviceReader(0, handle, poller, clock=clock)
        readers.append(reader)
        return reader, clock

    yield make
    for reader in readers:
        reader.close()
    poller.close()


@pytest.fixture
def make_nvml_source(fake_nvml_lib: Path, nvml_scenario: ScenarioFile) -> Iterator[Callable[..., object]]:
    """Factory for ``NvmlBackend(library_path=<fake>, **kwargs)``; all sources are closed after the test."""
    from gpusight.backends.nvml.backend import NvmlBackend

    sources: list[NvmlBackend] = []

    def make(**kwargs: object) -> NvmlBackend:
        source = NvmlBackend(library_path=str(fake_nvml_lib), **kwargs)
        sources.append(source)
        return source

    _reset_pynvml()
    yield make
    for source in sources:
        source.close()
    _reset_pynvml()
