"""Shell completion as users get it: the scripts `gpusight --print-completion SHELL` prints, loaded in real shells.

Each shell is asked what TAB offers after a line, for both command names (see tests/support/completion_shells.py).
The zsh and fish tests skip when that shell is not installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpusight.cli.completion import DIRECTORY_OPTIONS, FILE_OPTIONS
from gpusight.cli.parser import build_parser, path_arg
from gpusight.demo.source import SCENARIOS
from support.completion_shells import bash_candidates, fish_candidates, zsh_candidates, zsh_output

GPUSIGHT = [sys.executable, "-m", "gpusight"]

COMMANDS = ("gpusight", "gps")
"""The names the completion scripts must serve."""


def needs(shell: str) -> None:
    """Skip the test when ``shell`` is not installed."""
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed (apt-get install {shell})")


def print_completion(shell: str) -> str:
    """What `gpusight --print-completion SHELL` prints (it must succeed quietly)."""
    out = subprocess.run([*GPUSIGHT, "--print-completion", shell], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr == "", (out.returncode, out.stderr)
    return out.stdout


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three scripts, written as the README installs them: bash's and fish's as files, zsh's as `_gpusight`."""
    folder = tmp_path_factory.mktemp("completion")
    paths = {"bash": folder / "gpusight.bash", "fish": folder / "gpusight.fish", "zsh": folder / "site-functions" / "_gpusight"}
    paths["zsh"].parent.mkdir()
    for shell, path in paths.items():
        path.write_text(print_completion(shell))
    return paths


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The shells' home folder (and working folder)."""
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.fixture
def recordings(tmp_path: Path) -> Path:
    """A folder holding a recording `run.gtop` and a folder `snapshots`."""
    folder = tmp_path / "work"
    (folder / "snapshots").mkdir(parents=True)
    (folder / "run.gtop").write_bytes(b"")
    return folder


# bash


@pytest.mark.parametrize("command", COMMANDS)
def test_bash_completes_option_names(scripts: dict[str, Path], command: str, home: Path) -> None:
    needs("bash")
    assert sorted(bash_candidates(scripts["bash"], [command, "--rep"], home)) == ["--replay", "--report"]


@pytest.mark.parametrize("command", COMMANDS)
def test_bash_completes_the_demo_scenarios(scripts: dict[str, Path], command: str, home: Path) -> None:
    needs("bash")
    assert sorted(bash_candidates(scripts["bash"], [command, "--demo", ""], home)) == sorted(SCENARIOS)


@pytest.mark.parametrize("command", COMMANDS)
def test_bash_completes_files_and_directories(scripts: dict[str, Path], command: str, recordings: Path, home: Path) -> None:
    needs("bash")
    replay = bash_candidates(scripts["bash"], [command, "--replay", f"{recordings}/"], home)
    assert sorted(replay) == [f"{recordings}/run.gtop", f"{recordings}/snapshots"]
    export_dir = bash_candidates(scripts["bash"], [command, "--export-dir", f"{recordings}/"], home)
    assert export_dir == [f"{recordings}/snapshots"]


def test_bash_completes_the_shells_and_the_conversion_format(scripts: dict[str, Path], home: Path) -> None:
    needs("bash")
    assert sorted(bash_candidates(scripts["bash"], ["gps", "--print-completion", ""], home)) == ["bash", "fish", "zsh"]
    assert bash_candidates(scripts["bash"], ["gpusight", "--convert", "run.gtop", "--to", "t"], home) == ["tensorboard"]


# zsh


def test_zsh_script_parses(scripts: dict[str, Path]) -> None:
    needs("zsh")
    out = subprocess.run(["zsh", "-n", str(scripts["zsh"])], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stderr == "", out.stderr


def test_zsh_compinit_and_eval_register_both_names(scripts: dict[str, Path], home: Path) -> None:
    needs("zsh")
    show = 'print -r -- "$_comps[gpusight] $_comps[gps]"'
    on_fpath = zsh_output(f"fpath=({scripts['zsh'].parent} $fpath); autoload -Uz compinit; compinit -u -D; {show}", home)
    assert on_fpath.split() == ["_gpusight", "_gpusight"]
    evaluated = zsh_output(f'autoload -Uz compinit; compinit -u -D; eval "$(<{scripts["zsh"]})"; {show}', home)
    assert evaluated.split() == ["_shtab_gpusight", "_shtab_gpusight"]


@pytest.mark.parametrize("command", COMMANDS)
def test_zsh_completes_options_scenarios_files_and_directories(
    scripts: dict[str, Path], command: str, recordings: Path, home: Path
) -> None:
    needs("zsh")
    functions = scripts["zsh"].parent
    assert zsh_candidates(functions, f"{command} --rep", home) == {"--replay", "--report"}
    assert zsh_candidates(functions, f"{command} --demo ", home) == set(SCENARIOS)
    assert zsh_candidates(functions, f"{command} --replay {recordings}/", home) == {"run.gtop", "snapshots"}
    assert zsh_candidates(functions, f"{command} --export-dir {recordings}/", home) == {"snapshots"}


# fish


def test_fish_script_parses(scripts: dict[str, Path]) -> None:
    needs("fish")
    out = subprocess.run(["fish", "--no-execute", str(scripts["fish"])], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stderr == "", out.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_fish_completes_options_scenarios_files_and_directories(
    scripts: dict[str, Path], command: str, recordings: Path, home: Path
) -> None:
    needs("fish")
    script = scripts["fish"]
    assert sorted(fish_candidates(script, f"{command} --rep", home)) == ["--replay", "--report"]
    assert sorted(fish_candidates(script, f"{command} --demo ", home)) == sorted(SCENARIOS)
    replay = fish_candidates(script, f"{command} --replay {recordings}/", home)
    assert sorted(replay) == [f"{recordings}/run.gtop", f"{recordings}/snapshots/"]
    assert fish_candidates(script, f"{command} --export-dir {recordings}/", home) == [f"{recordings}/snapshots/"]


def test_fish_describes_each_option_and_choice_in_one_short_clause(scripts: dict[str, Path], home: Path) -> None:
    needs("fish")
    out = subprocess.run(["fish", "-c", "source $argv[1]; complete -C 'gps --demo '; complete -C 'gps --'",
                          str(scripts["fish"])], capture_output=True, text=True, timeout=30, env={"HOME": str(home)}, cwd=home)
    described = dict(line.split("\t", 1) for line in out.stdout.splitlines() if "\t" in line)
    assert described["healthy"] == described["--demo"] == "show simulated data instead of real GPUs"
    assert described["--replay"] == "play back a recording made with --record"
    assert max(len(text) for text in described.values()) <= 70
    assert "Scenarios: mixed" in subprocess.run([sys.executable, "-m", "gpusight", "--help"], capture_output=True,
                                                text=True, timeout=60).stdout  # --help keeps the whole text


# the flag itself


def test_every_path_option_completes_paths() -> None:
    marked = {*FILE_OPTIONS, *DIRECTORY_OPTIONS}
    path_options = [action.option_strings for action in build_parser()._actions if action.type in (path_arg, Path)]
    assert path_options
    for option_strings in path_options:
        assert marked.intersection(option_strings), f"{option_strings} takes a path: add it to FILE_OPTIONS or DIRECTORY_OPTIONS"


def test_an_unknown_shell_is_a_usage_error() -> None:
    out = subprocess.run([*GPUSIGHT, "--print-completion", "tcsh"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stdout == ""
    assert "invalid choice: 'tcsh'" in out.stderr


def test_shtab_is_loaded_only_for_completion_and_textual_not_even_then() -> None:
    code = (
        "import sys\nfrom gpusight.cli import main\nfrom gpusight.cli.parser import build_parser\n"
        "build_parser().parse_args(['--demo', '--once'])\nprint('shtab' in sys.modules)\n"
        "try:\n    main(['--print-completion', 'bash'])\nexcept SystemExit as exit:\n    assert exit.code == 0\n"
        "print('shtab' in sys.modules, 'textual' in sys.modules, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("False\n")  # before --print-completion
    assert out.stderr.split() == ["True", "False"]


def test_a_closed_pipe_ends_quietly() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        out = subprocess.run([*GPUSIGHT, "--print-completion", "zsh"], stdout=write_end, stderr=subprocess.PIPE,
                             text=True, timeout=60)
    finally:
        os.close(write_end)
    assert out.stderr == ""
    assert out.returncode == 141
