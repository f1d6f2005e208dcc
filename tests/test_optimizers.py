"""SIMBA, MIPROv2 and GEPA compile a judge through fit() on a scripted LM. The scripted LM answers the
judge's own step only correctly when the prompt carries demos, and answers the optimizers' internal
signatures (instruction proposals, reflections) with type-correct placeholders."""

import re
import sys
from pathlib import Path

import pytest

from calibration.data.labelled import LabelledSet
from calibration.fitting.fit import fit, judge_scores
from judges import AspectCritic

sys.path.insert(0, str(Path(__file__).parent))
from scripted import scripted_lm  # noqa: E402


def placeholder_fields(prompt):
    section = prompt.split("Your output fields are:")[1].split("All interactions")[0]
    out = {}
    for name, kind in re.findall(r"^\d+\. `(\w+)` \(([^)]*)\)", section, re.M):
        k = kind.lower()
        out[name] = ("True" if k.startswith("bool") else "1" if k.startswith("int") else "0.5" if k.startswith("float")
                     else "[]" if k.startswith("list") else "{}" if k.startswith("dict")
                     else "Judge carefully: a response saying good has the aspect.")
    return out


def respond(prompt):
    if "[[ ## definition ## ]]" in prompt:  # the judge's step
        responses = [r for r in re.findall(r"\[\[ ## response ## \]\]\n(.*?)\n", prompt) if r != "{response}"]
        verdict = ("good" in responses[-1]) if len(responses) > 1 else True
        return {"reason": "scripted", "verdict": str(verdict)}
    return placeholder_fields(prompt)


def synthetic(n, offset=0):
    rows = [{"response": f"item {i + offset}: {'good' if i % 2 else 'bad'}", "label": i % 2} for i in range(n)]
    return LabelledSet.from_records(rows)


@pytest.mark.parametrize("optimizer, options", [
    ("simba", {"max_steps": 2, "num_candidates": 2}),
    ("mipro", {"auto": "light"}),
])
def test_demo_adding_optimizers_fix_the_judge(optimizer, options):
    lm = scripted_lm(respond)
    compiled = fit(AspectCritic(name="good", definition="Does it say good?", lm=lm), synthetic(10),
                   optimizer=optimizer, calibrator=None, **options)
    assert judge_scores(compiled, synthetic(6, offset=50))[0].tolist() == [0.0, 1.0] * 3
    assert compiled.report["demos"]["judge_aspect"] >= 1
    assert callable(compiled.judge.score)  # MIPROv2's program.score does not shadow the method


def test_gepa_runs_with_feedback_and_a_reflection_lm():
    lm = scripted_lm(respond)
    compiled = fit(AspectCritic(name="good", definition="Does it say good?", lm=lm), synthetic(10),
                   optimizer="gepa", calibrator=None, reflection_lm=lm, max_metric_calls=40)
    scores = judge_scores(compiled, synthetic(4, offset=50))[0]
    assert len(scores) == 4 and all(0.0 <= s <= 1.0 for s in scores)
