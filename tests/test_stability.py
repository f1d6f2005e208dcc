import random
import sys
from pathlib import Path

import dspy
import numpy as np
import pytest
from dspy.lm15 import Message, Response, TextPart, Usage

from calibration.fitting.stability import StabilityReport, stability
from judges import AspectCritic, SingleTurnSample

sys.path.insert(0, str(Path(__file__).parent))


class NoisyEngine:
    """Greedy (always "yes") at temperature 0; at temperature > 0 says "yes" with probability 0.7."""

    def __init__(self, seed=0):
        self.rng = random.Random(seed)

    def complete(self, request):
        temperature = request.config.temperature or 0.0
        verdict = True if temperature == 0 else self.rng.random() < 0.7
        text = f"[[ ## reason ## ]]\nr\n\n[[ ## verdict ## ]]\n{verdict}\n\n[[ ## completed ## ]]"
        return Response(id=None, model="noisy", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=1, output_tokens=1))

    def __deepcopy__(self, memo):
        return self


def test_flip_rate_and_the_remedies_from_the_same_rollouts():
    lm = dspy.LM("noisy/judge", engine=NoisyEngine(), cache=True)
    judge = AspectCritic(name="ok", definition="Is it ok?", lm=lm)
    samples = [SingleTurnSample(response=f"answer {i}") for i in range(40)]
    report = stability(judge, samples, k=9, temperature=0.8)
    assert report.scores.shape == (40, 9) and not np.isnan(report.scores).any()
    single = report.summary()
    majority = report.summary(report.grouped(3, "majority"))
    mean = report.summary(report.grouped(3, "mean"))
    assert single["flip_rate"] > 0.8
    assert majority["flip_rate"] < single["flip_rate"] and majority["pairwise_disagreement"] < single["pairwise_disagreement"]
    assert mean["score_std"] < single["score_std"]
    assert "majority of 3" in report.table(group=3)
    greedy = judge.score(samples[0]).score
    assert greedy == 1.0  # the judge itself is untouched: temperature 0 again


def test_stability_by_hand_and_argument_checks():
    report = StabilityReport("x", np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 1.0, 0.0]]))
    s = report.summary()
    assert s["flip_rate"] == 0.5
    assert s["pairwise_disagreement"] == pytest.approx((0 + 4 / 6) / 2)
    assert report.grouped(2, "majority").tolist() == [[1.0, 1.0], [0.0, 0.0]]  # ties are not a majority
    with pytest.raises(ValueError, match="2 groups"):
        report.grouped(3, "mean")
    with pytest.raises(ValueError, match="temperature"):
        stability(AspectCritic(name="a", definition="b"), [], temperature=0)
