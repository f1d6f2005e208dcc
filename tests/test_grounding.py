"""Signals beyond overlap (judges.metrics.grounding, calibration.signals), monotone calibrators with their fit-time
ranges, pooled calibration sets and the hard slice: what each catches that token overlap misses."""

import numpy as np
import pytest

from calibration.agreement.record import CalibrationRun
from calibration.data.labelled import LabelledSet
from calibration.fitting.calibrators import Calibrator
from calibration.fitting.fit import pooled
from calibration.fitting.heldout import best_threshold, hard_slice
from calibration.fitting.signals import (
    DIRECTIONS,
    FEATURES,
    claims_missing_specifics,
    token_overlap,
)
from judges import (
    EmbeddingAlignment,
    NovelBigramSupport,
    SingleTurnSample,
    UnsupportedSpecifics,
    WeakestSentenceSupport,
)
from judges.metrics.catalogue import metric_classes
from judges.metrics.grounding import specifics, supported_specifics

CONTEXT = ["The Eiffel Tower was completed in 1889 in Paris. Gustave Eiffel's company built it."]


def grounded(response):
    return SingleTurnSample(response=response, retrieved_contexts=CONTEXT)


def test_unsupported_specifics_catch_a_wrong_number_that_overlap_hides():
    wrong = grounded("The Eiffel Tower was completed in 1899 in Paris.")
    assert token_overlap(wrong) > 0.85  # every word but one number is in the context
    result = UnsupportedSpecifics().score(wrong)
    assert result.unsupported == ["1899"] and result.score == pytest.approx(2 / 3)
    assert specifics("It cost 7,799,000 francs on March 31, said Eiffel.") == ["7,799,000", "31", "March 31", "Eiffel"]
    none = UnsupportedSpecifics().score(grounded("it is tall."))
    assert none.score == 1.0 and none.undefined_reason


def test_a_names_possessive_or_contraction_ending_is_read_off():
    """"Paris's" names Paris, which the context names without the ending; two names joined across a possessive
    are two names; "I'm" after a comma names nobody. ``name_endings="keep"`` reads each as written."""
    reply = "Oh, I'm sure the tower in Paris's centre was finished in 1889 by Gustave Eiffel's Lyon workshop."
    assert specifics(reply) == ["1889", "Paris", "Gustave Eiffel", "Lyon"]
    assert specifics(reply, name_endings="keep") == ["1889", "I'm", "Paris's", "Gustave Eiffel's Lyon"]
    assert specifics("Then I'd say O'Brien's and the Rovers' goals.") == ["O'Brien", "Rovers"]
    assert UnsupportedSpecifics().score(grounded("It stands in Paris's heart since 1889, I'm told.")).score == 1.0
    assert supported_specifics(reply, CONTEXT[0], "keep")[1] == ["I'm", "Paris's", "Gustave Eiffel's Lyon"]
    assert supported_specifics(reply, CONTEXT[0])[1] == ["Lyon"]
    with pytest.raises(ValueError, match="specifics: name_endings must be one of"):
        specifics(reply, name_endings="drop")


def test_a_specific_is_found_only_as_a_whole_number_or_word():
    """``match="whole"``: "12" is not inside "120" or "12.5", "4 March" not inside "14 March", "Jones" not inside
    "Jonestown"; thousands separators are read as one number; a plural or possessive ending in the evidence still
    counts; a lone capital letter is no name. ``match="substring"`` finds each anywhere, as before."""
    evidence = "Gustave Eiffel's 120 workers, some 2,500 visitors on 14 March, fees up 12.5%, 30 degrees; the Romans."
    reply = "Gustav Eiffel had 12 workers, 2,500 visitors, 500 guests on 4 March, fees up 12%, 30 °C, a Roman road."
    found, missing = supported_specifics(reply, evidence)
    assert found == ["2,500", "30", "Eiffel", "Roman"]
    assert missing == ["12", "500", "4", "12%", "4 March"]
    assert supported_specifics(reply, evidence, match="substring") == (
        ["12", "2,500", "500", "4", "30", "4 March", "Eiffel", "C", "Roman"], ["12%"])
    assert "C" not in specifics(reply) and "C" in specifics(reply, match="substring")
    assert supported_specifics("It went to Jones.", "Jonestown held it.")[1] == ["Jones"]
    assert supported_specifics("It went to Jones.", "Jonestown held it.", match="substring")[1] == []
    assert supported_specifics("It went to Jones.", "Mr Jones's house.")[1] == []
    assert supported_specifics("It went to Paul.", "It went to Paula.")[1] == []  # one more letter is allowed
    assert supported_specifics("It cost 2500 euros.", "It cost 2,500 euros.")[1] == []
    assert supported_specifics("It cost 1.1 million.", "It cost 1.15 million.")[1] == ["1.1"]
    assert supported_specifics("It was -5 degrees.", "The score was 10-5.")[1] == ["-5"]
    assert supported_specifics("It was -5 degrees.", "It fell to -5 overnight.")[1] == []
    with pytest.raises(ValueError, match="specifics: match must be one of"):
        specifics(reply, match="prefix")


def test_the_weakest_sentence_shows_what_the_mean_hides():
    mixed = grounded("The Eiffel Tower was completed in 1889 in Paris. Picasso later painted it bright gold.")
    result = WeakestSentenceSupport().score(mixed)
    assert token_overlap(mixed) > 0.5 and result.score < 0.2 and result.sentence.startswith("Picasso")


def test_novel_bigrams_catch_familiar_words_in_a_new_combination():
    recombined = grounded("Paris built the Eiffel company in 1889.")
    assert token_overlap(recombined) == 1.0  # every word occurs in the context
    assert NovelBigramSupport().score(recombined).score < 0.5


@pytest.mark.integration
def test_embedding_alignment_credits_a_paraphrase_overlap_misses():
    paraphrase = grounded("The firm of Eiffel constructed the tower, finished in 1889.")
    unrelated = grounded("Bananas are a good source of potassium for athletes.")
    assert EmbeddingAlignment().score(paraphrase).score > EmbeddingAlignment().score(unrelated).score + 0.15


def test_the_signals_are_metrics_calibrator_inputs_and_have_a_direction():
    names = set(metric_classes())
    assert {"unsupported_specifics", "weakest_sentence_support", "novel_bigram_support", "embedding_alignment"} <= names
    assert set(FEATURES) <= set(DIRECTIONS)
    claims = {"claims": ["Completed in 1899.", "It is in Paris."]}
    assert claims_missing_specifics(grounded("x"), claims) == 0.5  # from the judge's own steps


def test_a_monotone_calibrator_never_learns_a_sign_its_signal_contradicts():
    rng = np.random.default_rng(0)
    target = rng.integers(0, 2, 80).astype(float)
    overlap = target * 0.3 + rng.uniform(0, 0.7, 80)
    unsupported = -target * 0.8 + rng.uniform(0, 1, 80)  # fewer unsupported claims on positives: -1 as declared
    spurious = -overlap + rng.normal(0, 0.01, 80)  # token-overlap-like signal that here points the wrong way
    extra = np.column_stack([unsupported, spurious])
    free = Calibrator("platt", binary=True, monotone=False)
    free.features, free.use_raw = ["unsupported_count", "bigram_support"], True
    free._fit_linear(np.column_stack([overlap, extra]), target, ["judge score", "unsupported_count", "bigram_support"])
    bound = Calibrator("platt", binary=True, monotone=True)
    bound.features, bound.use_raw = ["unsupported_count", "bigram_support"], True
    bound._fit_linear(np.column_stack([overlap, extra]), target, ["judge score", "unsupported_count", "bigram_support"])
    assert free.params["coef"][2] < 0  # unconstrained, it uses the wrong-way signal
    assert bound.params["coef"][0] >= 0 and bound.params["coef"][1] <= 0 and bound.params["coef"][2] >= 0
    saved = Calibrator.from_dict(bound.to_dict())
    assert saved.monotone and saved.ranges == bound.ranges


def test_the_one_se_rule_keeps_an_input_only_when_its_gain_beats_its_noise():
    rng = np.random.default_rng(6)  # a draw where noise lowers the loss a little by chance
    target = np.repeat([0.0, 1.0], 20)
    strong = target * 0.6 + rng.uniform(0, 0.5, 40)  # separates the labels well
    noise = rng.uniform(0, 1, (40, 5))  # five signals unrelated to the labels
    names = ["token_overlap", "embedding_similarity", "specifics_supported", "weakest_sentence", "bigram_support",
             "embedding_alignment"]
    extra = np.column_stack([strong, noise])
    kept = {}
    for rule in ("one_se", "any_gain"):
        calibrator = Calibrator("stacked", binary=True, features=names, selection=rule, monotone=False)
        calibrator.fit(np.full(40, 0.5), target, extra)
        kept[rule] = calibrator.features
        # the rule's decision is the per-item gain against its standard error
        losses = calibrator._cv_losses(strong[:, None], target, ["token_overlap"])
        assert losses.shape == (40,) and calibrator._cv_loss(strong[:, None], target, ["token_overlap"]) == losses.mean()
    assert kept["one_se"] == ["token_overlap"]
    assert set(kept["any_gain"]) > {"token_overlap"}  # the old rule also keeps noise that helped by chance
    assert Calibrator.from_dict(Calibrator("stacked", binary=True, selection="any_gain").to_dict()).selection == "any_gain"
    with pytest.raises(ValueError, match="selection='best'"):
        Calibrator("stacked", binary=True, selection="best")


def test_judge_first_takes_the_judge_unless_a_signal_is_clearly_better():
    """``selection="judge_first"``: a signal whose loss is lower than the judge's by less than its noise does not
    come first (``"one_se"`` takes it first on this draw); a judge at chance is still dropped for a strong signal."""
    rng = np.random.default_rng(1)
    target = np.repeat([0.0, 1.0], 20)
    judge = target * 0.5 + rng.uniform(0, 0.6, 40)
    close = judge + rng.normal(0, 0.08, 40)  # as good as the judge, a little better on these items by chance
    extra = np.column_stack([close, rng.uniform(0, 1, 40)])
    names = ["token_overlap", "bigram_support"]
    plain = Calibrator("stacked", binary=True, features=names, selection="one_se").fit(judge, target, extra)
    first = Calibrator("stacked", binary=True, features=names, selection="judge_first").fit(judge, target, extra)
    assert plain.note.startswith("stacked kept ['token_overlap', 'judge score']")
    assert first.note.startswith("stacked kept ['judge score', 'token_overlap']")
    chance = rng.uniform(0, 1, 40)
    strong = np.column_stack([target * 0.6 + rng.uniform(0, 0.5, 40), rng.uniform(0, 1, 40)])
    for rule in ("one_se", "judge_first"):
        dropped = Calibrator("stacked", binary=True, features=names, selection=rule).fit(chance, target, strong)
        assert not dropped.use_raw and dropped.features == ["token_overlap"]
    assert Calibrator.from_dict(first.to_dict()).selection == "judge_first"
    # A judge at chance and a weak signal that beats it by less than its noise: the judge, which does not lower
    # the loss on its own, is not taken first; the signal is kept as under one_se.
    rng = np.random.default_rng(85)
    chance = rng.uniform(0, 1, 40)
    weak = np.column_stack([target * 0.25 + rng.uniform(0, 1, 40), rng.uniform(0, 1, 40)])
    probe = Calibrator("stacked", binary=True, features=names)
    alone = probe._cv_losses(chance[:, None], target, ["judge score"])
    signal = probe._cv_losses(weak[:, :1], target, ["token_overlap"])
    within = (alone - signal).mean() <= (alone - signal).std(ddof=1) / np.sqrt(40)  # the signal is within the
    assert within  # judge's noise: the first version of the rule took the judge first here
    for rule in ("one_se", "judge_first"):
        kept = Calibrator("stacked", binary=True, features=names, selection=rule).fit(chance, target, weak)
        assert not kept.use_raw and kept.features == ["token_overlap"]


def test_inputs_outside_the_fit_range_are_reported():
    calibrator = Calibrator("platt", binary=True).fit([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])
    assert calibrator.ranges == {"judge score": [0.1, 0.9]}
    assert calibrator.out_of_range([0.5, 0.95, 1.0, 0.05]) == {"judge score": 0.75}
    assert calibrator.out_of_range([0.5]) == {}


def test_pooled_sets_keep_each_set_on_its_own_scale():
    a = LabelledSet.from_records([{"response": "x", "label": v} for v in (1, 5, 3)], kind="ordinal")
    b = LabelledSet.from_records([{"response": "y", "label": v} for v in (0, 10)], kind="ordinal")
    both = pooled([a, b])
    assert both.labels == [0.0, 1.0, 0.5, 0.0, 1.0] and len(both) == 5
    with pytest.raises(ValueError, match="kinds differ"):
        pooled([a, LabelledSet.from_records([{"response": "z", "label": 1}, {"response": "z", "label": 0}])])


def test_the_hard_slice_is_what_the_best_baseline_gets_wrong():
    assert best_threshold([0.1, 0.4, 0.6, 0.9], [0, 0, 1, 1]) == (0.5, 1.0)
    rows = [{"response": r, "retrieved_contexts": ["the cat sat on the mat"], "label": y} for r, y in [
        ("the cat sat", 1), ("the cat sat on the mat", 1), ("dogs bark loudly", 0), ("birds fly south", 0)]]
    train = LabelledSet.from_records(rows)
    test = LabelledSet.from_records([
        {"response": "the cat sat on the mat today", "retrieved_contexts": ["the cat sat on the mat"], "label": 0},
        {"response": "a feline rested on the rug", "retrieved_contexts": ["the cat sat on the mat"], "label": 1},
        {"response": "the cat sat", "retrieved_contexts": ["the cat sat on the mat"], "label": 1},
        {"response": "rain in spain", "retrieved_contexts": ["the cat sat on the mat"], "label": 0}])
    hard = hard_slice(train, test, ["token_overlap"])
    assert hard["baseline"] == "baseline: token overlap" and hard["items"] == [0, 1]
    run = CalibrationRun("toy", test.labels, {"baseline: token overlap": [0.86, 0.33, 1.0, 0.0],
                                              "judge": [0.1, 0.9, 0.9, 0.2]}, meta={"hard_slice": hard})
    assert run.hard_slice_accuracy("baseline: token overlap") == (0.0, 2)
    assert run.hard_slice_accuracy("judge") == (1.0, 2)
    assert "hard slice accuracy (n=2)" in run.table(stats=["roc_auc"])
    assert any(f.startswith("Hard slice: the 2 test items") and "judge, is right on 100%" in f for f in run.findings(50))
