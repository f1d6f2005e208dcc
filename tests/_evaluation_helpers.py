"""Metrics used by the evaluate() tests, importable from a subprocess."""

import time
from typing import ClassVar

import dspy

from judges import Metric


class SlowLength(Metric):
    """Deterministic and slow: the response length modulo 7, scaled to [0, 1]; counts its calls."""

    required_fields: ClassVar[tuple[str, ...]] = ("response",)
    calls = 0

    def __init__(self, delay: float = 0.05):
        self.delay = delay

    def _score(self, sample):
        type(self).calls += 1
        time.sleep(self.delay)
        return dspy.Prediction(score=(len(sample.response) % 7) / 6, length=len(sample.response))


def samples(n):
    return [{"user_input": f"question {i}", "response": "x" * (i * 3 % 11 + 1)} for i in range(n)]
