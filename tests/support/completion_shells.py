"""Ask real bash, zsh and fish what TAB offers after a command line, given a completion script.

- bash: source the script, set ``COMP_WORDS``/``COMP_CWORD``/``COMP_LINE``/``COMP_POINT`` as bash does on TAB, call
  the function ``complete -p COMMAND`` names and print ``COMPREPLY``;
- zsh: the script lies on ``$fpath`` as ``_gpusight``; an interactive ``zsh -f`` on a pty runs compinit, is typed the
  line and TAB; a ``compadd`` wrapper appends the matches to a file, and the TAB widget a marker when it is done;
- fish: ``complete -C LINE`` prints the candidates, each with a tab and its description.

Every shell runs with ``HOME`` and the XDG folders in a test folder, so no user's own setup takes part.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

from support.terminal import PtyTerminal

SHELL_TIMEOUT_S = 30.0
"""Seconds a shell may take to answer (a hang, not a speed measurement)."""

_BASH_ASK = r"""
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
spec=$(complete -p "$1") || exit 3
function=${spec##* -F }; function=${function%% *}
"$function" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""
"""bash program: ``$1`` the script, then the words of the line (the last one: the word being completed, maybe empty)."""

_ZSH_READY = "<ready>"
"""Written to the capture file once compinit and the wrappers are in place."""

_ZSH_DONE = "<done>"
"""Written to the capture file when the TAB widget has finished."""

_ZSH_SETUP = rf"""
fpath=("$COMPLETION_FPATH" $fpath)
autoload -Uz compinit && compinit -u -D
unsetopt autolist beep
compadd() {{
  local -a __capture_opts __capture_matches
  __capture_opts=("${{(@)argv[1,(i)(-|--)]}}")
  # -O, -A, -D: the completion system filtering matches into an array, not offering them
  if (( ${{__capture_opts[(I)-[OAD]*]}} )); then builtin compadd "$@"; return; fi
  builtin compadd -A __capture_matches "$@"
  (( $#__capture_matches )) && print -rl -- $__capture_matches >> "$COMPLETION_CAPTURE"
  builtin compadd "$@"
}}
_capture_complete() {{ zle complete-word; print -r -- '{_ZSH_DONE}' >> "$COMPLETION_CAPTURE"; }}
zle -N _capture_complete
bindkey '^I' _capture_complete
print -r -- '{_ZSH_READY}' >> "$COMPLETION_CAPTURE"
"""
"""zsh code sourced in the interactive shell: compinit from ``$COMPLETION_FPATH``, the ``compadd`` wrapper, TAB."""


def isolated_env(home: Path) -> dict[str, str]:
    """This process's environment with ``HOME`` and the XDG config, data and cache folders under ``home``."""
    folders = {name: home / folder for name, folder in
               (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"), ("XDG_CACHE_HOME", ".cache"))}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "HOME": str(home), **{name: str(folder) for name, folder in folders.items()}}


def bash_candidates(script: Path, words: Sequence[str], home: Path) -> list[str]:
    """What bash's completion function for ``words[0]`` puts in ``COMPREPLY`` for ``words`` (last: the word typed)."""
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", _BASH_ASK, "bash", str(script), *words],
                         capture_output=True, text=True, timeout=SHELL_TIMEOUT_S, env=isolated_env(home), cwd=home)
    assert out.returncode == 0 and out.stderr == "", (out.returncode, out.stderr)
    return [line for line in out.stdout.splitlines() if line]


def zsh_candidates(function_dir: Path, line: str, home: Path) -> set[str]:
    """The matches zsh's completion adds when TAB is pressed after ``line``, with ``function_dir`` on ``$fpath``."""
    capture = home / "zsh-matches"
    capture.write_text("")
    setup = home / "capture-completion.zsh"
    setup.write_text(_ZSH_SETUP)
    env = {**isolated_env(home), "TERM": "xterm", "COMPLETION_FPATH": str(function_dir), "COMPLETION_CAPTURE": str(capture)}
    with PtyTerminal(["zsh", "-f", "-i"], (200, 50), env=env, cwd=home) as terminal:
        terminal.send(f"source {shlex.quote(str(setup))}\n")
        terminal.wait_for(lambda: _ZSH_READY in capture.read_text(), "zsh to load compinit", timeout=SHELL_TIMEOUT_S)
        terminal.send(line + "\t")
        terminal.wait_for(lambda: _ZSH_DONE in capture.read_text(), f"zsh to complete {line!r}", timeout=SHELL_TIMEOUT_S)
    return set(capture.read_text().splitlines()) - {_ZSH_READY, _ZSH_DONE}


def zsh_output(code: str, home: Path) -> str:
    """What a non-interactive ``zsh -f`` prints running ``code`` (its errors fail the caller)."""
    out = subprocess.run(["zsh", "-f", "-c", code], capture_output=True, text=True, timeout=SHELL_TIMEOUT_S,
                         env=isolated_env(home), cwd=home)
    assert out.returncode == 0 and out.stderr == "", (out.returncode, out.stderr)
    return out.stdout


def fish_candidates(script: Path, line: str, home: Path) -> list[str]:
    """The candidates fish offers after ``line`` (``complete -C``) once ``script`` is sourced, without descriptions."""
    out = subprocess.run(["fish", "-c", "source $argv[1]; complete -C $argv[2]", str(script), line],
                         capture_output=True, text=True, timeout=SHELL_TIMEOUT_S, env=isolated_env(home), cwd=home)
    assert out.returncode == 0 and out.stderr == "", (out.returncode, out.stderr)
    return [candidate.split("\t")[0] for candidate in out.stdout.splitlines()]
