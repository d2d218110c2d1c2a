"""``--print-completion SHELL``: the bash, zsh or fish completion script of ``gpusight`` and its other names.

shtab writes the script from the real parser, so the options, their choices and their help are those of ``--help``.
shtab is imported only when a script is asked for: other runs never load it. The options that take a file or a
directory are marked here, in the command line's layer, because the packages that add them must not know shtab.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence

from gpusight.cli.output import reader_gone, write_stdout
from gpusight.convert.command import TENSORBOARD

FILE_OPTIONS = (
    "--replay", "--record", "--config", "--convert", "--report", "--output",
    "--serve-web-config", "--serve-tls-cert", "--serve-tls-key", "--serve-basic-auth",
    "--cluster-config",
)
"""Options whose values are files (read, or written as with ``--record``): the shells offer file names.

zsh and fish complete only an option's first word (shtab's scripts), so there ``--convert IN OUT`` offers files for IN only.
"""

DIRECTORY_OPTIONS = ("--export", "--export-dir")
"""Options whose values are directories: the shells offer directory names."""

FORMAT_OPTION = "--to"
"""``--to FORMAT DIR``: the shells offer the one format for FORMAT. shtab completes every word of an option alike, and
zsh and fish only its first, so DIR is left to the user."""


SHORT_HELP_LENGTH = 70
"""Longest description a shell shows beside an option or a choice; ``--help`` keeps the whole text."""


def short_help(text: str) -> str:
    """The first clause of an option's help (up to ``;``, ``.`` or ``(``), at most :data:`SHORT_HELP_LENGTH` characters."""
    clause = re.split(r";\s|\.\s|\s\(", text, maxsplit=1)[0].strip()
    return clause if len(clause) <= SHORT_HELP_LENGTH else clause[: SHORT_HELP_LENGTH - 1].rstrip() + "…"


def _rewrite(script: str, pattern: str, replacement: str) -> str:
    """``script`` with every line matching ``pattern`` replaced; an error when none does (shtab changed its layout)."""
    rewritten, count = re.subn(pattern, replacement, script, flags=re.MULTILINE)
    if not count:
        raise RuntimeError(f"shtab's completion script has no line matching {pattern!r}: cannot add the other command names")
    return rewritten


def _register_bash(script: str, prog: str, other_names: Sequence[str]) -> str:
    """bash: the ``complete -F FUNCTION prog`` line names the other commands too."""
    return _rewrite(script, rf"^(complete .*-F \S+ {re.escape(prog)})$", rf"\1 {' '.join(other_names)}")


def _register_zsh(script: str, prog: str, other_names: Sequence[str]) -> str:
    """zsh: the ``#compdef`` tag (read by compinit from ``$fpath``) and the ``compdef`` call (when eval'd) name them too."""
    names = " ".join(other_names)
    script = _rewrite(script, rf"\A(#compdef {re.escape(prog)})$", rf"\1 {names}")
    return _rewrite(script, rf"^(\s*compdef \S+ -N {re.escape(prog)})$", rf"\1 {names}")


def _register_fish(script: str, prog: str, other_names: Sequence[str]) -> str:
    """fish: every ``complete -c prog`` command applies to the other commands too."""
    commands = " ".join(f"-c {name}" for name in other_names)
    return _rewrite(script, rf"^complete -c {re.escape(prog)} ", rf"complete -c {prog} {commands} ")


_REGISTER_OTHER_NAMES: dict[str, Callable[[str, str, Sequence[str]], str]] = {
    "bash": _register_bash,
    "zsh": _register_zsh,
    "fish": _register_fish,
}

SHELLS = tuple(_REGISTER_OTHER_NAMES)
"""The shells ``--print-completion`` writes a script for."""


def completion_script(parser: argparse.ArgumentParser, shell: str, other_names: Sequence[str]) -> str:
    """The ``shell`` completion script of ``parser.prog``, registered for ``other_names`` as well.

    Marks the file, directory and format options of ``parser`` for shtab (an attribute on their actions) first.
    """
    import shtab

    completions = {
        **dict.fromkeys(FILE_OPTIONS, shtab.FILE),
        **dict.fromkeys(DIRECTORY_OPTIONS, shtab.DIRECTORY),
        FORMAT_OPTION: shtab.cmd(f"echo {TENSORBOARD}"),
    }
    for option, completion in completions.items():
        parser._option_string_actions[option].complete = completion  # type: ignore[attr-defined]
    for action in parser._actions:  # zsh and fish show the help beside every option and choice: its first clause
        if action.help and action.help != argparse.SUPPRESS:
            action.help = short_help(action.help)
    return _REGISTER_OTHER_NAMES[shell](shtab.complete(parser, shell), parser.prog, other_names)


class PrintCompletionAction(argparse.Action):
    """``--print-completion SHELL``: print the completion script for SHELL and exit 0.

    ``other_names`` (a keyword of ``add_argument``): the other commands that run this program, completed the same way.
    """

    def __init__(self, option_strings: list[str], dest: str, other_names: Sequence[str] = (),
                 help: str | None = None) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, choices=SHELLS,
                         metavar="SHELL", help=help)
        self.other_names = tuple(other_names)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        script = completion_script(parser, str(values), self.other_names)
        parser.exit(0 if write_stdout(script.rstrip("\n") + "\n") else reader_gone())
