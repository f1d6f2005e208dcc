"""The claim judges' policy for a text the LM extracts no claim from (``fallback_claims``): its sentences (the
default, as before) or its checkable units, with what was set aside, on a scripted LM that verifies by words."""

import json
import re
import sys
from pathlib import Path

import pytest

from calibration.fitting.compiled import CompiledJudge, checked_params
from judges import SingleTurnSample
from judges.metrics.rag.answer import AnswerCorrectness, FactualCorrectness, Faithfulness, NoiseSensitivity
from judges.metrics.rag.context import LLMContextRecall

sys.path.insert(0, str(Path(__file__).parent))
from scripted import scripted_lm  # noqa: E402

FACT = "I think the Eiffel Tower was finished in 1889."
REPLY = f"Hi there! Have you ever been to Paris? Me too. {FACT}"
TALK = "Hi there! Have you ever been to Paris? Me too."
CONTEXT = "The Eiffel Tower was finished in 1889 for the World's Fair in Paris."
SET_ASIDE = [{"sentence": "Hi there!", "kind": "greeting"},
             {"sentence": "Have you ever been to Paris?", "kind": "question"},
             {"sentence": "Me too.", "kind": "backchannel"}]
CLAIM_JUDGES = [Faithfulness, LLMContextRecall, NoiseSensitivity, AnswerCorrectness, FactualCorrectness]


def words(text):
    return set(re.findall(r"\w+", text.lower()))


class WordLM:
    """The extract step answers from ``extracted`` (text -> claims; none by default); the verify step supports a
    claim when the context holds all its words. Every verify call's claims are kept in ``verified``."""

    def __init__(self, extracted=None):
        self.extracted, self.extractions, self.verified = extracted or {}, [], []
        self.lm = scripted_lm(self.respond)

    def respond(self, prompt):
        asked = prompt.split("your objective is:")[-1]
        fields = dict(re.findall(r"\[\[ ## (\w+) ## \]\]\n(.*?)\n\n(?=\[\[ ## |Respond)", asked, re.S))
        if "Break the text" in prompt:
            self.extractions.append(fields["text"])
            return {"claims": json.dumps(self.extracted.get(fields["text"], []))}
        claims = json.loads(fields["claims"])
        self.verified.append(claims)
        return {"verdicts": json.dumps([{"claim": c, "reason": "by words", "supported": words(c) <= words(fields["context"])}
                                        for c in claims])}


def test_by_default_a_reply_without_extracted_claims_is_judged_by_all_its_sentences():
    lm = WordLM()
    result = Faithfulness(lm=lm.lm).score(SingleTurnSample(response=REPLY, retrieved_contexts=[CONTEXT]))
    assert result.claims_source == "sentences"
    assert lm.verified == [["Hi there!", "Have you ever been to Paris?", "Me too.", FACT]]
    assert result.score == 0.0  # nor the hedged sentence: "I think" is not in the context
    assert result.get("set_aside") is None and result.get("nothing_checkable") is None


def test_checkable_sets_aside_talk_and_checks_the_fact_inside_the_hedge():
    lm = WordLM()
    judge = Faithfulness(lm=lm.lm, fallback_claims="checkable")
    result = judge.score(SingleTurnSample(response=REPLY, retrieved_contexts=[CONTEXT]))
    assert result.claims_source == "checkable" and result.claims == ["the Eiffel Tower was finished in 1889."]
    assert lm.verified == [["the Eiffel Tower was finished in 1889."]]
    assert result.score == 1.0 and result.set_aside == SET_ASIDE and not result.get("nothing_checkable")
    assert judge.feedback(result) == ("faithfulness = 1.00; set aside, not checked: 'Hi there!' (greeting) | "
                                      "'Have you ever been to Paris?' (question) | 'Me too.' (backchannel)")


def test_claims_the_lm_extracts_are_judged_as_before_whatever_the_fallback():
    extracted = {REPLY: ["The Eiffel Tower was finished in 1889.", "The speaker has been to Paris."]}
    results = [Faithfulness(lm=WordLM(extracted).lm, fallback_claims=policy).score(
        SingleTurnSample(response=REPLY, retrieved_contexts=[CONTEXT])) for policy in ("sentences", "checkable")]
    assert results[0].claims_source == results[1].claims_source == "extracted"
    assert dict(results[0].items()) == dict(results[1].items()) and results[0].score == 0.5
    assert "set_aside" not in results[1]


@pytest.mark.parametrize("unclaimed", [0.0, 0.7])
def test_a_reply_with_nothing_checkable_scores_unclaimed_score_without_a_verify_call(unclaimed):
    lm = WordLM()
    judge = Faithfulness(lm=lm.lm, fallback_claims="checkable", unclaimed_score=unclaimed)
    result = judge.score(SingleTurnSample(response=TALK, retrieved_contexts=[CONTEXT]))
    assert result.score == unclaimed and result.nothing_checkable is True and result.claims == []
    assert result.set_aside == SET_ASIDE and lm.verified == [] and lm.lm.engine.calls == 1  # the extraction only
    assert judge.feedback(result) == (f"faithfulness = {unclaimed:.2f} (nothing checkable: scored unclaimed_score="
                                      f"{unclaimed:g}); set aside, not checked: 'Hi there!' (greeting) | "
                                      "'Have you ever been to Paris?' (question) | 'Me too.' (backchannel)")


def test_context_recall_applies_the_fallback_to_the_reference():
    lm = WordLM()
    result = LLMContextRecall(lm=lm.lm, fallback_claims="checkable").score(
        SingleTurnSample(reference=REPLY, retrieved_contexts=[CONTEXT]))
    assert result.score == 1.0 and result.set_aside == SET_ASIDE and result.claims_source == "checkable"
    empty = LLMContextRecall(lm=WordLM().lm, fallback_claims="checkable", unclaimed_score=1.0).score(
        SingleTurnSample(reference=TALK, retrieved_contexts=[CONTEXT]))
    assert empty.score == 1.0 and empty.nothing_checkable


def test_noise_sensitivity_with_nothing_checkable_verifies_nothing():
    lm = WordLM()
    judge = NoiseSensitivity(lm=lm.lm, fallback_claims="checkable", unclaimed_score=0.25)
    sample = SingleTurnSample(user_input="q", response=TALK, reference="It opened in 1889.", retrieved_contexts=[CONTEXT])
    result = judge.score(sample)
    assert result.score == 0.25 and result.nothing_checkable and lm.verified == [] and lm.extractions == [TALK]
    assert "(nothing checkable: scored unclaimed_score=0.25)" in judge.feedback(result)
    lm = WordLM()
    result = NoiseSensitivity(lm=lm.lm, fallback_claims="checkable").score(sample.model_copy(update={"response": REPLY}))
    assert result.response_claims == ["the Eiffel Tower was finished in 1889."] and result.set_aside == SET_ASIDE
    assert result.reference_claims == ["It opened in 1889."] and not result.get("reference_set_aside")


def test_answer_correctness_scores_unclaimed_f1_only_when_neither_text_has_a_claim():
    judge = AnswerCorrectness(lm=WordLM().lm, weights=(1.0, 0.0), fallback_claims="checkable", unclaimed_score=0.6)
    both = judge.score(SingleTurnSample(user_input="q", response=TALK, reference="Hello! Me too."))
    assert both.f1 == both.score == 0.6 and both.nothing_checkable
    assert both.reference_set_aside == [{"sentence": "Hello!", "kind": "greeting"},
                                        {"sentence": "Me too.", "kind": "backchannel"}]
    text = judge.feedback(both)
    assert "(nothing checkable: F1 scored unclaimed_score=0.6)" in text
    assert "; set aside from the reference, not checked: 'Hello!' (greeting) | 'Me too.' (backchannel)" in text
    missed = judge.score(SingleTurnSample(user_input="q", response=TALK, reference=CONTEXT))
    assert missed.f1 == 0.0 and missed.fn == [CONTEXT] and not missed.get("nothing_checkable")


def test_factual_correctness_gives_unclaimed_score_to_the_share_over_no_claim():
    lm = WordLM()
    judge = FactualCorrectness(lm=lm.lm, mode="f1", fallback_claims="checkable", unclaimed_score=1.0)
    result = judge.score(SingleTurnSample(response=TALK, reference="Paris. Hi there!"))
    assert result.precision == 1.0 and result.recall == 1.0 and result.score == 1.0  # "Paris." is in TALK
    assert result.unclaimed_shares == ["precision"] and result.nothing_checkable
    assert lm.verified == [["Paris."]]
    assert "(nothing checkable: precision scored unclaimed_score=1)" in judge.feedback(result)


@pytest.mark.parametrize("cls", CLAIM_JUDGES)
def test_the_policy_is_checked_up_front_naming_the_metric_and_the_field(cls):
    with pytest.raises(ValueError, match=rf"^{cls().name}: fallback_claims='words' is not one of \['sentences', 'checkable', 'checkable-learned'\]"):
        cls(fallback_claims="words")
    for bad in (1.5, -0.1, True, "0.5"):
        with pytest.raises(ValueError, match=rf"^{cls().name}: unclaimed_score must be in \[0, 1\]"):
            cls(unclaimed_score=bad)


@pytest.mark.parametrize("cls", CLAIM_JUDGES)
def test_the_policy_is_a_setting_kept_by_get_params_and_a_rebuild(cls):
    # the default is left out, as judges saved before the policy existed scored with it (saved_before)
    assert "fallback_claims" not in cls().get_params() and "unclaimed_score" not in cls().get_params()
    params = cls(fallback_claims="checkable", unclaimed_score=0.5).get_params()
    assert params["fallback_claims"] == "checkable" and params["unclaimed_score"] == 0.5
    rebuilt = cls(**params)
    assert (rebuilt.fallback_claims, rebuilt.unclaimed_score) == ("checkable", 0.5)
    assert checked_params(cls, {})["fallback_claims"] == "sentences"


def test_a_compiled_judge_saved_and_loaded_keeps_the_policy(tmp_path):
    path = CompiledJudge(Faithfulness(fallback_claims="checkable", unclaimed_score=0.3)).save(tmp_path / "judge.json")
    assert json.loads(path.read_text())["judge"]["params"] == {"fallback_claims": "checkable", "unclaimed_score": 0.3,
                                                               "use_logprobs": False}
    lm = WordLM()
    loaded = CompiledJudge.load(path, lm=lm.lm)
    assert (loaded.judge.fallback_claims, loaded.judge.unclaimed_score) == ("checkable", 0.3)
    result = loaded.score(SingleTurnSample(response=TALK, retrieved_contexts=[CONTEXT]))
    assert result.score == 0.3 and result.nothing_checkable and lm.verified == []


def test_nothing_checkable_scores_each_judges_floor_by_default():
    """Talk alone is never rewarded: the default unclaimed_score is the judge's floor (1.0 where lower is better)."""
    sample = SingleTurnSample(user_input="q", response=TALK, reference="It opened in 1889.", retrieved_contexts=[CONTEXT])
    noise = NoiseSensitivity(lm=WordLM().lm, fallback_claims="checkable")
    assert noise.score(sample).score == 1.0 == noise.output_floor and "unclaimed_score" not in noise.get_params()
    assert Faithfulness(lm=WordLM().lm, fallback_claims="checkable").score(sample).score == 0.0
    assert NoiseSensitivity(unclaimed_score=0.0).get_params()["unclaimed_score"] == 0.0  # a choice is kept
