"""Memory alignment (fit(optimizer="memory")) on a scripted LM built so that the right demos or the right
guidelines change its verdicts: each half alone beats no alignment on held-out items, and both survive
save/load without pickle."""

import json
import re
import sys
from pathlib import Path
from zlib import crc32

import numpy as np
import pytest

from calibration.agreement.stats import agreement
from calibration.data.labelled import LabelledSet
from calibration.fitting.compiled import CompiledJudge
from calibration.fitting.fit import fit, judge_scores
from calibration.fitting.memory import GUIDELINES_HEADER, EpisodicMemory
from judges import AspectCritic, Faithfulness, SingleTurnSample

sys.path.insert(0, str(Path(__file__).parent))
from scripted import scripted_lm  # noqa: E402


def words_embedder(texts):
    """Bag of words hashed into 64 buckets: items sharing their words are near."""
    out = np.zeros((len(texts), 64))
    for row, text in enumerate(texts):
        for word in re.findall(r"[a-z]+", text.lower()):
            out[row, crc32(word.encode()) % 64] += 1
    return out


def memory_following_lm():
    """An idealised judge LM. Judging: with demos in the prompt it copies the verdict of the last (nearest)
    one; with guidelines of the form "a reply that says 'W' lacks the aspect" it answers False for replies
    containing W; else it says True. Distilling: one such guideline per case from the person's reason."""

    def respond(prompt):
        if "[[ ## cases ## ]]" in prompt:
            words = re.findall(r"The person's reason: the reply says '(\w+)'", prompt)
            return {"guidelines": json.dumps([f"A reply that says '{w}' lacks the aspect." for w in dict.fromkeys(words)])}
        response = re.findall(r"\[\[ ## response ## \]\]\n(.*?)\n", prompt)[-1]
        demo_verdicts = re.findall(r"\[\[ ## verdict ## \]\]\n(True|False)", prompt)
        if demo_verdicts:
            return {"reason": "like the nearest case", "verdict": demo_verdicts[-1]}
        banned = re.findall(r"A reply that says '(\w+)' lacks the aspect", prompt)
        return {"reason": "scripted", "verdict": str(not any(w in response for w in banned))}

    return scripted_lm(respond)


def polite_set(n, offset=0, rationale=True):
    rows = []
    for i in range(offset, offset + n):
        polite = i % 2 == 0
        text = f"reply {i}: thanks for asking, happy to help" if polite else f"reply {i}: rude answer, go away now"
        row = {"response": text, "label": int(polite)}
        if rationale and not polite:
            row["rationale"] = "the reply says 'rude', which no polite reply does"
        rows.append(row)
    return LabelledSet.from_records(rows, name="polite")


def critic(lm):
    return AspectCritic(name="polite", definition="Is the reply polite?", lm=lm)


def accuracy(judge, data):
    return agreement(data.labels, judge_scores(judge, data)[0], n_bootstrap=20).value("accuracy")


def test_episodic_memory_alone_beats_no_alignment_on_held_out_items():
    lm, test = memory_following_lm(), polite_set(10, offset=100)
    aligned = fit(critic(lm), polite_set(16), optimizer="memory", calibrator=None, semantic=False,
                  embeddings=words_embedder, max_demos=2)
    assert accuracy(critic(lm), test) == pytest.approx(0.5)  # says "polite" to everything
    assert accuracy(aligned, test) == 1.0
    memory = aligned.report["memory"]
    assert memory["guidelines"] == [] and memory["episodes_kept"] == 12 and memory["agreed"] == 6  # 4 held back
    assert aligned.report["guard"]["decision"].startswith("compiled kept")
    assert aligned.judge.judge_aspect.demos == []  # demos come per input, the program itself is unchanged


def test_semantic_memory_alone_distils_guidelines_from_rationales_into_the_instructions():
    lm, test = memory_following_lm(), polite_set(10, offset=100)
    aligned = fit(critic(lm), polite_set(16), optimizer="memory", calibrator=None, episodic=False)
    assert aligned.report["memory"]["guidelines"] == ["A reply that says 'rude' lacks the aspect."]
    instructions = aligned.judge.judge_aspect.signature.instructions
    assert GUIDELINES_HEADER in instructions and instructions.endswith("- A reply that says 'rude' lacks the aspect.")
    assert aligned.memory is None and accuracy(aligned, test) == 1.0
    unexplained = fit(critic(lm), polite_set(16, rationale=False), optimizer="memory", calibrator=None,
                      episodic=False, guard=0)
    assert unexplained.report["memory"]["guidelines"] == [] and "no item" in unexplained.report["memory"]["note"]
    with pytest.raises(ValueError, match="both off"):
        fit(critic(lm), polite_set(8), optimizer="memory", episodic=False, semantic=False)


def test_memory_is_saved_and_loaded_as_json_and_scores_the_same(tmp_path):
    lm, test = memory_following_lm(), polite_set(6, offset=200)
    aligned = fit(critic(lm), polite_set(16), optimizer="memory", calibrator="platt", embeddings=words_embedder)
    path = aligned.save(tmp_path / "polite.json")
    body = json.loads(path.read_text())
    assert len(body["memory"]["episodes"]) == 12 and "pickle" not in path.read_text()
    loaded = CompiledJudge.load(path, lm=lm, embeddings=words_embedder)
    assert loaded.to_dict() == aligned.to_dict()
    assert judge_scores(loaded, test)[0].tolist() == judge_scores(aligned, test)[0].tolist()
    assert GUIDELINES_HEADER in loaded.judge.judge_aspect.signature.instructions
    body["memory"]["episodes"][0]["demos"] = "nope"
    from calibration.fitting.compiled import checksum

    body["checksum"] = checksum({k: v for k, v in body.items() if k != "checksum"})
    with pytest.raises(ValueError, match="memory episode 0"):
        CompiledJudge.from_dict(body, lm=lm)


def test_an_item_never_retrieves_itself_and_retrieval_is_deterministic():
    from calibration.fitting.memory import Episode

    episodes = [Episode(f"response: reply {i} {'thanks' if i % 2 else 'rude'}", float(i % 2), True,
                        {"judge_aspect": {"n": i}}) for i in range(6)]
    memory = EpisodicMemory(episodes, k=2, embeddings=words_embedder)
    assert memory.nearest(episodes[1].text) == [3, 5]  # its own text is skipped, ties go by order
    assert memory.demos_for("response: reply 9 thanks") == {"judge_aspect": [{"n": 3}, {"n": 1}]}  # nearest last
    judge = critic(memory_following_lm())
    program = memory.program_for(judge, SingleTurnSample(response="reply 9 thanks"))
    assert len(program.judge_aspect.demos) == 2 and judge.judge_aspect.demos == []  # the judge is not touched


def test_faithfulness_verdicts_are_made_to_agree_with_the_persons_label():
    judge = Faithfulness(lm="embedded")
    steps = {"extract_claims": {"question": "", "text": "t", "claims": ["a", "b", "c"]},
             "verify": {"context": "Paris is the capital of France",
                        "claims": ["Paris is the capital", "Lyon is big", "France has a capital"],
                        "verdicts": [{"claim": "Paris is the capital", "reason": "r", "supported": True},
                                     {"claim": "Lyon is big", "reason": "r", "supported": True},
                                     {"claim": "France has a capital", "reason": "r", "supported": False}]}}
    one_third = judge.label_consistent_demos({}, steps, 1 / 3)
    assert list(one_third) == ["verify"]  # the claims are left to the judge; only the verdict step changes
    assert [v["supported"] for v in one_third["verify"]["verdicts"]] == [True, False, False]
    assert one_third["verify"]["verdicts"][1]["reason"].startswith("A person found that")
    assert [v["supported"] for v in judge.label_consistent_demos({}, steps, 1.0)["verify"]["verdicts"]] == [True] * 3
    assert steps["verify"]["verdicts"][1]["supported"] is True  # the trace itself is not modified
    assert judge.label_consistent_demos({}, {"extract_claims": {}}, 0.0) == {}
    critic_demo = critic(None).label_consistent_demos({"response": "x"}, {}, 0.0)
    assert critic_demo["judge_aspect"]["verdict"] is False


def test_the_held_out_comparison_scores_test_items_through_the_memory_and_says_what_it_holds():
    from calibration.fitting.heldout import compare_on_heldout

    lm = memory_following_lm()
    compiled, run = compare_on_heldout(lambda: critic(lm), polite_set(16), polite_set(10, offset=100),
                                       optimizers=["memory"], calibrator=None, baselines=[], progress=False,
                                       n_bootstrap=20, embeddings=words_embedder, max_demos=2)
    assert run.agreement["compiled (memory)"].value("accuracy") == 1.0
    assert run.agreement["judge as shipped"].value("accuracy") == pytest.approx(0.5)
    finding = next(f for f in run.findings(n_bootstrap=20) if f.startswith("Memory (memory)"))
    assert "12 of 12 train items remembered" in finding and "A reply that says 'rude' lacks the aspect." in finding
