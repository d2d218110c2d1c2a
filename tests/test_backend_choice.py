"""``--backend``: how a user names the backends, and the one-line usage errors for names that do not exist."""

from __future__ import annotations

import subprocess

import pytest

from gpusight.backends.registry import AUTO, BACKEND_NAMES, BackendChoiceError, parse_backend_choice
from support.terminal import gpusight_argv


@pytest.mark.parametrize(("text", "chosen"), [
    ("auto", (AUTO,)),
    ("amdgpu", ("amdgpu",)),
    ("intel,nvml", ("nvml", "intel")),  # registry order: NVIDIA keeps the first indexes
    (" nvml , amdgpu ,", ("nvml", "amdgpu")),
])
def test_choices_are_read_in_registry_order(text: str, chosen: tuple[str, ...]) -> None:
    assert parse_backend_choice(text) == chosen


@pytest.mark.parametrize(("text", "named"), [("rocm", "rocm"), ("nvml,cuda", "cuda"), ("auto,nvml", "auto goes alone")])
def test_an_unknown_choice_names_itself_and_the_choices(text: str, named: str) -> None:
    with pytest.raises(BackendChoiceError) as caught:
        parse_backend_choice(text)
    assert named in str(caught.value) and all(name in str(caught.value) for name in BACKEND_NAMES)


@pytest.mark.parametrize("args", [("--backend", "rocm", "--once"), ("--backend", "amdgpu", "--demo", "--once"),
                                  ("--backend", "nvml", "--replay", "x.jsonl")])
def test_the_command_line_refuses_them_in_one_line(args: tuple[str, ...]) -> None:
    done = subprocess.run(gpusight_argv(*args), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--backend" in done.stderr.strip().splitlines()[-1]  # the error line, after argparse's usage
