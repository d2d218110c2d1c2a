"""The command line, ``gputop`` / ``gps``: the live TUI by default, one-shot output, checks, recordings and services.

- :mod:`~gputop.cli.parser`: every flag and its usage rules;
- :mod:`~gputop.cli.main`: :func:`main`, which dispatches to the mode asked for;
- :mod:`~gputop.cli.pipeline`: the sampler the flags and the config file ask for (source, filters, advice, recorder);
- :mod:`~gputop.cli.runners`: the modes that sample (``--once``, ``--check``, headless ``--record``, the TUI);
- :mod:`~gputop.cli.output`: writing to a stdout whose reader may go away, and one-line errors.
"""

from gputop.cli.main import main

__all__ = ["main"]
