"""Claim units of a dialogue reply (``judges.data.claim_units``) and the verifier judge that checks only them
(``FaithfulnessWithVerifier(claims="checkable")``): the issue's examples, tokenised dialogue text, facts riding
on the speaker's words, and what the result and the feedback say about what was set aside."""

import pytest

from judges import FaithfulnessWithVerifier
from judges.data.claim_units import KINDS, claim_units


def kinds(text):
    return [(u.kind, u.claim) for u in claim_units(text)]


@pytest.mark.parametrize("text, expected", [
    ("Hi there! Have you ever been to Paris?", [("greeting", None), ("question", None)]),
    ("Me too. The tower was finished in 1889.", [("backchannel", None), ("claim", "The tower was finished in 1889.")]),
    ("Haha, that's a surprise.", [("backchannel", None)]),
    ("I'm not sure, but I think it was finished in 1889.", [("claim", "it was finished in 1889.")]),
    ("Yeah, did you know that it was finished in 1889?", [("question", "it was finished in 1889.")]),
    ("Do you like musicals?", [("question", None)]),
    ("I love jazz, it is my favorite.", [("opinion", None)]),
    ("I went there last year.", [("experience", None)]),
    ("Sydney is the capital of Australia.", [("claim", "Sydney is the capital of Australia.")]),
    ("I believe Canberra is the capital.", [("claim", "Canberra is the capital.")]),
    ("That is true, punk music emerged in the early 1980s.", [("claim", "punk music emerged in the early 1980s.")]),
])
def test_the_issue_s_examples_are_sorted_into_their_kinds(text, expected):
    assert kinds(text) == expected


def test_tokenised_dialogue_text_is_read_as_written():
    assert kinds("you ' re welcome . they ' re often regarded the most valuable position .") == [
        ("greeting", None), ("claim", "they're often regarded the most valuable position.")]
    assert kinds("i ' m not sure , but i do know that it was created by two brothers .") == [
        ("claim", "it was created by two brothers.")]


def test_a_fact_riding_on_the_speaker_s_words_stays_a_claim_and_plain_facts_are_untouched():
    assert kinds("I like their debut album, which was released in 2007.")[0][0] == "claim"
    assert kinds("I have been there 3 times since 2019.")[0][0] == "claim"
    text = "The Eiffel Tower is 330 metres tall."
    assert claim_units(text)[0].claim == text  # a claim is the sentence itself, character for character
    assert all(u.kind in KINDS for u in claim_units("Hello! Wow. I agree. Is it? It is 3 m long. I hate rain."))


def test_the_checkable_judge_sets_aside_talk_and_says_so():
    evidence = ["The Eiffel Tower was finished in 1889. It is 330 metres tall."]
    sentences = FaithfulnessWithVerifier()
    checkable = FaithfulnessWithVerifier(claims="checkable")
    reply = {"response": "Me too! Have you ever been there? The tower was finished in 1889.", "retrieved_contexts": evidence}
    before, after = sentences.score(reply), checkable.score(reply)
    assert after.score > before.score and after.claims == ["The tower was finished in 1889."]
    assert [u["kind"] for u in after.set_aside] == ["backchannel", "question"]
    assert "set aside, not checked: 'Me too!' (backchannel) | 'Have you ever been there?' (question)" in \
        checkable.feedback(after)
    talk = {"response": "Do you like musicals?", "retrieved_contexts": evidence}
    for value in (0.0, 1.0):
        result = FaithfulnessWithVerifier(claims="checkable", unclaimed_score=value).score(talk)
        assert result.score == value and result.nothing_checkable and result.verdicts == []
    assert "nothing checkable" in checkable.feedback(checkable.score(talk))
    with pytest.raises(ValueError, match="unclaimed_score must be in"):
        FaithfulnessWithVerifier(claims="checkable", unclaimed_score=2)
    with pytest.raises(ValueError, match="claims='words' is not one of"):
        FaithfulnessWithVerifier(claims="words")


def test_a_setting_added_later_is_recorded_only_when_it_changes_how_the_judge_scores():
    """Run files and compiled judges saved before ``unclaimed_score`` existed still match a default judge."""
    assert "unclaimed_score" not in FaithfulnessWithVerifier().get_params()
    params = FaithfulnessWithVerifier(claims="checkable", unclaimed_score=1.0).get_params()
    assert params["unclaimed_score"] == 1.0
    assert FaithfulnessWithVerifier(**params).unclaimed_score == 1.0
