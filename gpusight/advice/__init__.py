"""The live advice engine: why a training job under-uses its GPU, with evidence and a concrete action.

:class:`~gpusight.advice.engine.AdviceEngine` turns each snapshot plus the history into
:class:`~gpusight.snapshot.model.Advice`; :func:`~gpusight.advice.config.load_thresholds` reads the
user's overrides. Each rule lives in its own module under :mod:`gpusight.advice.rules`, and
``docs/advice.md`` explains every rule's signals, thresholds and reasoning.
"""
