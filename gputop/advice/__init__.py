"""The live advice engine: why a training job under-uses its GPU, with evidence and a concrete action.

:class:`~gputop.advice.engine.AdviceEngine` turns each snapshot plus the history into
:class:`~gputop.collect.model.Advice`; :func:`~gputop.advice.config.load_thresholds` reads the
user's overrides. Each rule lives in its own module under :mod:`gputop.advice.rules`, and
``docs/advice.md`` explains every rule's signals, thresholds and reasoning.
"""
