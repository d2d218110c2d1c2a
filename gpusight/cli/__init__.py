"""The command line, ``gpusight`` / ``gps``: the live TUI by default, one-shot output, checks, recordings and services.

- :mod:`~gpusight.cli.parser`: every flag and its usage rules;
- :mod:`~gpusight.cli.main`: :func:`main`, which dispatches to the mode asked for;
- :mod:`~gpusight.cli.pipeline`: the sampler the flags and the config file ask for (source, filters, advice, recorder);
- :mod:`~gpusight.cli.runners`: the modes that sample (``--once``, ``--check``, headless ``--record``, the TUI);
- :mod:`~gpusight.cli.output`: writing to a stdout whose reader may go away, and one-line errors;
- :mod:`~gpusight.cli.completion`: ``--print-completion``, the bash, zsh and fish completion scripts (made by shtab);
- :mod:`~gpusight.cli.progress`: the progress bar on stderr while a whole recording is read.
"""

from gpusight.cli.main import main

__all__ = ["main"]
