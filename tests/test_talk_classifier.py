"""The learned talk classifier (``judges.lm.talk``) and ``claims="checkable-learned"``: what a unit it keeps or
sets aside checks, its weights file and its errors, on a fake embedder; and the shipped weights on the real one."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from judges import FaithfulnessWithVerifier, SingleTurnSample
from judges.data.claim_units import checkable_claims
from judges.lm.embeddings import Embedder
from judges.lm.talk import TALK_WEIGHTS, TalkClassifier, rule_feature
from judges.metrics.rag.answer import Faithfulness

sys.path.insert(0, str(Path(__file__).parent))
from test_claim_fallback import CONTEXT, WordLM  # noqa: E402


def test_a_decider_keeps_the_rules_claim_inside_a_hedge_and_names_what_it_sets_aside():
    reply = "Oh no, poor little thing! I'm not sure, but I think it was finished in 1889. Have you been?"
    decided = []

    def checkable(sentences):
        decided.append(sentences)
        return ["1889" in s for s in sentences]

    claims, aside = checkable_claims(reply, checkable)
    assert decided == [["Oh no, poor little thing!", "I'm not sure, but I think it was finished in 1889.",
                        "Have you been?"]]
    assert claims == ["it was finished in 1889."]  # the rules' claim inside the hedge, not the hedge
    # The rules took the exclamation for a claim: the decider's "talk"; the question keeps the rules' kind.
    assert aside == [{"sentence": "Oh no, poor little thing!", "kind": "talk"},
                     {"sentence": "Have you been?", "kind": "question"}]


def test_a_unit_the_rules_set_aside_and_the_decider_keeps_is_checked_as_written():
    claims, aside = checkable_claims("Isn't it the oldest bridge in Paris?", lambda s: [True] * len(s))
    assert (claims, aside) == (["Isn't it the oldest bridge in Paris?"], [])
    assert checkable_claims("Hello there.", lambda s: [])[0] == []  # no unit: the decider is not asked


def test_with_questions_by_the_rules_a_question_the_decider_keeps_is_set_aside():
    """``questions="rules"``: a plain question is set aside whatever the decider says; a question presupposing a
    fact stays the decider's, and checks the fact inside it; one leaning on a fact stays the decider's, whole."""
    reply = ("The tower was finished in 1889. Have you been? Did you know that it is 330 metres tall? Isn't it in "
             "Paris? It opened in May, right? When I went I found out it was painted.")
    keeps = lambda sentences: [True] * len(sentences)  # noqa: E731
    leaning = ["Isn't it in Paris?", "It opened in May, right?", "When I went I found out it was painted."]
    assert checkable_claims(reply, keeps)[0] == ["The tower was finished in 1889.", "Have you been?",
                                                 "it is 330 metres tall.", *leaning]
    claims, aside = checkable_claims(reply, keeps, questions="rules")
    # A question leaning on a fact, and a statement the rules misread as a question ("When I ..."), stay kept.
    assert claims == ["The tower was finished in 1889.", "it is 330 metres tall.", *leaning]
    assert aside == [{"sentence": "Have you been?", "kind": "question"}]
    assert checkable_claims(reply, lambda s: [False] * len(s), questions="rules")[0] == []
    with pytest.raises(ValueError, match="questions='all' is not one of"):
        checkable_claims(reply, keeps, questions="all")


def fake_embedder(dims=3):
    """Each sentence as [has "!", has a digit, 1]: enough for a classifier to tell the two kinds apart."""
    return Embedder(lambda texts: np.array([[float("!" in t), float(any(c.isdigit() for c in t)), 1.0][:dims]
                                            for t in texts]), name="fake")


def weights_file(tmp_path, coef, intercept=0.0, threshold=0.5):
    path = tmp_path / "talk.json"
    path.write_text(json.dumps({"coef": coef, "intercept": intercept, "threshold": threshold}), encoding="utf-8")
    return path


def test_the_probability_is_the_logistic_of_the_embedding_and_the_rules_verdict(tmp_path):
    classifier = TalkClassifier(weights_file(tmp_path, [-4.0, 3.0, 0.0, 1.0], intercept=-0.5), embeddings=fake_embedder())
    sentences = ["Wow!", "It opened in 1889.", "Me too."]
    assert rule_feature(sentences).tolist() == [0.0, 1.0, 0.0]
    root = np.sqrt(2.0)  # the embedder's rows are unit-norm
    expected = 1 / (1 + np.exp(-np.array([-4.0 / root - 0.5, 3.0 / root + 1.0 - 0.5, -0.5])))
    assert np.allclose(classifier.probability(sentences), expected)
    assert classifier.checkable(sentences).tolist() == [False, True, False]
    assert classifier.probability([]).shape == (0,)


def test_weights_for_another_embedder_and_a_bad_file_are_refused_naming_the_file(tmp_path):
    classifier = TalkClassifier(weights_file(tmp_path, [1.0, 1.0]), embeddings=fake_embedder())
    with pytest.raises(ValueError, match=r"talk\.json expects 1-dimensional embeddings, the embedder gives 3"):
        classifier.probability(["Wow!"])
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json is not a weights file written by calibration.verifier.talk_units"):
        TalkClassifier(bad)


def test_checkable_learned_is_a_claim_source_checked_up_front():
    assert FaithfulnessWithVerifier(claims="checkable-learned").get_params()["claims"] == "checkable-learned"
    with pytest.raises(ValueError, match="faithfulness_with_verifier: claims='learned'"):
        FaithfulnessWithVerifier(claims="learned")


def test_the_llm_judges_fall_back_to_the_learned_units(monkeypatch, tmp_path):
    import judges.metrics.rag.claims as claims

    classifier = TalkClassifier(weights_file(tmp_path, [-4.0, 3.0, 0.0, 1.0], intercept=-0.5), embeddings=fake_embedder())
    monkeypatch.setattr(claims, "shipped_talk_classifier", lambda: classifier)
    lm = WordLM()
    judge = Faithfulness(lm=lm.lm, fallback_claims="checkable-learned")
    result = judge.score(SingleTurnSample(user_input="q", response="Oh wow, so cool! The Eiffel Tower was finished in 1889.",
                                          retrieved_contexts=[CONTEXT]))
    assert result.claims_source == "checkable-learned"
    assert result.set_aside == [{"sentence": "Oh wow, so cool!", "kind": "backchannel"}]
    assert lm.verified == [["The Eiffel Tower was finished in 1889."]] and result.score == 1.0
    # A run file names the classifier's weights, so it refuses to resume with other ones.
    assert judge.model_identity()["talk_classifier"].startswith("sha256:")
    assert "talk_classifier" not in Faithfulness(lm=lm.lm, fallback_claims="checkable").model_identity()


@pytest.mark.integration
def test_the_shipped_weights_load_and_tell_fresh_talk_from_a_fact():
    manifest = json.loads(TALK_WEIGHTS.read_text(encoding="utf-8"))
    assert manifest["trained_on"][0]["file"] == "units_train.jsonl" and len(manifest["coef"]) == 385
    classifier = TalkClassifier()
    found = classifier.checkable(["Oh no, poor little thing!", "Have you ever tried it?",
                                  "The bridge is over two kilometres long.", "It was finished in 1889."])
    assert found.tolist() == [False, False, True, True]
