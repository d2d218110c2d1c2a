"""Smooth, seeded, deterministic noise for the demo source: a pure function of time.

Each channel mixes three slow sines with interpolated value noise (random values at fixed knots,
eased between them), so a channel wanders like a real metric, never repeats visibly, and gives the
same value for the same seed, channel and time whatever order the times are asked in.
"""

from __future__ import annotations

import math
import random

_MASK = (1 << 64) - 1


def _knot_value(key: int, knot: int) -> float:
    """A pseudo-random value in [-1, 1] for integer ``knot`` (splitmix64 finaliser)."""
    z = (key + knot * 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    z ^= z >> 31
    return z / _MASK * 2.0 - 1.0


class SmoothNoise:
    """One noise channel: ``value(t)`` in [-1, 1] and ``unit(t)`` in [0, 1], smooth over ``period`` seconds."""

    __slots__ = ("_key", "_period", "_w1", "_p1", "_w2", "_p2", "_w3", "_p3")

    def __init__(self, seed: int, channel: str, period: float) -> None:
        rng = random.Random(f"{seed}/{channel}")
        self._key = rng.getrandbits(64)
        self._period = period
        (self._w1, self._p1), (self._w2, self._p2), (self._w3, self._p3) = (
            (2.0 * math.pi / (period * rng.uniform(2.0, 9.0)), rng.uniform(0.0, 2.0 * math.pi)) for _ in range(3)
        )

    def value(self, t: float) -> float:
        """Noise at time ``t``, in [-1, 1]."""
        position = t / self._period
        knot = math.floor(position)
        frac = position - knot
        ease = frac * frac * (3.0 - 2.0 * frac)
        a = _knot_value(self._key, knot)
        b = _knot_value(self._key, knot + 1)
        wander = a + (b - a) * ease
        waves = math.sin(self._w1 * t + self._p1) + math.sin(self._w2 * t + self._p2)
        waves += math.sin(self._w3 * t + self._p3)
        return 0.55 * wander + 0.15 * waves

    def unit(self, t: float) -> float:
        """Noise at time ``t``, in [0, 1]."""
        return (self.value(t) + 1.0) * 0.5
