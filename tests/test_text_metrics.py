import math

import dspy
import pytest

from judges import (
    BleuScore,
    ChrfScore,
    DistanceMeasure,
    ExactMatch,
    NonLLMStringSimilarity,
    RougeScore,
    SampleValidationError,
    SingleTurnSample,
    StringPresence,
)
from judges.data import language
from judges.data.language import clear_sentence_cache, detect_language, split_sentences, tokenize


def pair(response, reference):
    return SingleTurnSample(response=response, reference=reference)


EN = pair("The Eiffel Tower is located in India.", "The Eiffel Tower is located in Paris.")
ZH = pair("埃菲尔铁塔位于印度。", "埃菲尔铁塔位于巴黎。")


def test_tokenize_splits_cjk_characters_and_keeps_words():
    assert tokenize("埃菲尔铁塔 is in Paris") == ["埃", "菲", "尔", "铁", "塔", "is", "in", "paris"]
    assert tokenize("アインシュタイン1879年") == list("アインシュタイン") + ["1879", "年"]


def test_split_sentences_en_zh_ja():
    assert len(split_sentences("Einstein was born in Germany. He was born on 14 March 1879.")) == 2
    assert split_sentences("爱因斯坦出生在德国。他是物理学家！") == ["爱因斯坦出生在德国。", "他是物理学家！"]
    assert split_sentences("彼は「天才だ。」と言われた。次の文。") == ["彼は「天才だ。」と言われた。", "次の文。"]
    assert split_sentences("   ") == []


@pytest.mark.parametrize("text, expected", [
    # English with few function words: names, numbers, an accented name, "et al.", a Japanese name in kana
    ("Mount Kelvar rises 2,950 meters above sea level.", "en"),
    ("Our company employs more than 10,000 people worldwide.", "en"),
    ("José Álvarez scored twice against Leeds.", "en"),
    ("Smith et al. measured the effect in 2019.", "en"),
    ("The drink Calpico (カルピス) is sold in Japan and in many other countries.", "en"),
    ("Go Dodgers!", "en"),  # too short to tell
    # ... and with words other languages spell the same: names, acronyms, variables, contractions
    ("Solve for x and y: y = 2x + 3 and y = x - 1.", "en"),
    ("La La Land wins Oscar for best picture", "en"),
    ("El Niño hit Peru; La Niña followed.", "en"),
    ("MIT researchers met at the OS conference.", "en"),
    ("De Niro and Di Caprio met at La Scala.", "en"),
    ("Patients with low SES die earlier, per CDC data.", "en"),
    ("Pros and cons: pro bono work, em dash, en dash.", "en"),
    ("oh really yeah i've never seen either one of them", "en"),
    ("They went en route to the de facto capital.", "en"),
    # Other languages in Latin letters, named (Indonesian reads as its close kin Malay)
    ("Le musée est fermé le lundi et les jours fériés.", "fr"),
    ("Die Brücke wurde im Jahr 1932 für den Verkehr geöffnet.", "de"),
    ("El tren sale de la estación a las ocho y llega tarde.", "es"),
    ("Il ponte è stato costruito nel 1932 e sono venuti in molti.", "it"),
    ("A ponte foi construída em 1932 e não tem portagem.", "pt"),
    ("De brug is in 1932 geopend en het verkeer was druk.", "nl"),
    ("Jembatan itu dibuka pada tahun 1932 dan tidak ada tol.", "ms"),
    ("Most został otwarty w 1932 roku i nie ma opłat.", "pl"),
    ("Köprü 1932 yılında açıldı ve çok kalabalık oldu.", "tr"),
    ("Most byl otevřen v roce 1932 a je to památka.", "cs"),
    ("Voy a la playa con mi hermano mañana.", "es"),
    ("Io vado a Roma con mia madre domani.", "it"),
    ("e\u0301te\u0301 tre\u0300s chaud a\u0300 Paris cette anne\u0301e", "fr"),  # accents as combining marks
    # Other scripts
    ("这座桥于1932年通车。", "zh"),
    ("この橋は1932年に開通した。", "ja"),
    ("ｶﾀｶﾅﾃﾞｽﾈ 漢字", "ja"),  # half-width katakana
    ("Мост открыли в 1932 году.", "ru"),
    ("다리는 1932년에 개통되었다.", "ko"),
    ("1932 — 2020", ""),
])
def test_the_language_rule_tells_english_of_names_and_numbers_from_other_languages(text, expected):
    assert detect_language(text) == expected


def test_a_text_is_split_into_sentences_once_and_each_caller_gets_its_own_list(monkeypatch):
    clear_sentence_cache()
    segmented, real = [], language._segmenter
    monkeypatch.setattr(language, "_segmenter", lambda lang: segmented.append(lang) or real(lang))
    text = "The tower was finished in 1889. It is 330 metres tall."
    first = split_sentences(text)
    first.append("changed by its caller")
    assert split_sentences("  " + text + "\n") == ["The tower was finished in 1889.", "It is 330 metres tall."]
    assert segmented == ["en"]  # the second call (same text once stripped) came from the cache
    assert detect_language(text) == "en" and detect_language(text) == "en"
    assert detect_language.cache_info().hits >= 1
    clear_sentence_cache()
    assert detect_language.cache_info().currsize == 0
    assert split_sentences(text) == ["The tower was finished in 1889.", "It is 330 metres tall."]
    assert segmented == ["en", "en"]  # read again after the cache was emptied


def test_bleu_identical_is_one_and_disjoint_is_zero():
    assert BleuScore().score(pair("the cat sat on the mat", "the cat sat on the mat")).score == pytest.approx(1.0)
    assert BleuScore().score(pair("dogs run fast", "the cat sat on the mat")).score == 0.0


def test_bleu_matches_sacrebleu_on_english():
    from sacrebleu.metrics import BLEU

    expected = BLEU(effective_order=True).sentence_score(EN.response, [EN.reference]).score / 100
    assert BleuScore().score(EN).score == pytest.approx(expected)


def test_bleu_scores_chinese_by_character():
    # 10 tokens each (9 characters + "。"), 2 differ: unigram precision 8/10.
    result = BleuScore().score(ZH)
    assert result.precisions[0] == pytest.approx(0.8)
    assert 0.3 < result.score < 0.9


def test_bleu_rejects_unknown_tokenizer():
    with pytest.raises(ValueError, match="bleu_score: tokenize"):
        BleuScore(tokenize="nope")


def test_rouge_chinese_is_not_dropped():
    # 9 CJK tokens each ("。" is punctuation), 7 shared in order.
    result = RougeScore(rouge_type="rouge1", mode="recall").score(ZH)
    assert result.score == pytest.approx(7 / 9)
    assert RougeScore().score(pair("巴黎", "巴黎")).score == 1.0


def test_rouge_modes_and_types():
    sample = pair("the cat was found under the bed", "the cat was under the bed")
    r1 = RougeScore(rouge_type="rouge1", mode="precision").score(sample)
    assert r1.score == pytest.approx(6 / 7)
    assert RougeScore(rouge_type="rouge1", mode="recall").score(sample).score == pytest.approx(1.0)
    assert RougeScore(rouge_type="rouge2", mode="fmeasure").score(sample).score == pytest.approx(2 * (4 / 6) * (4 / 5) / (4 / 6 + 4 / 5))
    with pytest.raises(ValueError, match="rouge_type"):
        RougeScore(rouge_type="rouge9")
    with pytest.raises(ValueError, match="mode"):
        RougeScore(mode="f1")


def test_chrf():
    assert ChrfScore().score(pair("abc", "abc")).score == pytest.approx(1.0)
    assert 0 < ChrfScore().score(ZH).score < 1


def test_exact_match_and_string_presence():
    assert ExactMatch().score(pair("巴黎", "巴黎")).score == 1.0
    assert ExactMatch().score(pair("India", "Paris")).score == 0.0
    assert ExactMatch().score(pair(" Paris", "paris")).score == 0.0
    assert ExactMatch(ignore_case=True, strip=True).score(pair(" Paris", "paris")).score == 1.0
    assert StringPresence().score(pair("埃菲尔铁塔位于巴黎。", "埃菲尔铁塔")).score == 1.0
    assert StringPresence().score(pair("Paris", "paris")).score == 0.0
    assert StringPresence(ignore_case=True).score(pair("Paris", "paris")).score == 1.0


def test_string_similarity_seed_example_and_measures():
    # The seed's "~0.89": 4 edits over 37 characters.
    assert NonLLMStringSimilarity().score(EN).score == pytest.approx(1 - 4 / 37)
    assert NonLLMStringSimilarity().score(ZH).score == pytest.approx(0.8)
    assert NonLLMStringSimilarity(distance_measure=DistanceMeasure.HAMMING).score(ZH).score == pytest.approx(0.8)
    jaro = NonLLMStringSimilarity(distance_measure="jaro").score(ZH).score
    assert jaro == pytest.approx((8 / 10 + 8 / 10 + 1) / 3)
    jw = NonLLMStringSimilarity(distance_measure="jaro_winkler").score(ZH).score
    assert jw == pytest.approx(jaro + 4 * 0.1 * (1 - jaro))
    with pytest.raises(ValueError, match="distance_measure"):
        NonLLMStringSimilarity(distance_measure="cosine")


def test_missing_reference_is_reported_before_scoring():
    with pytest.raises(SampleValidationError, match="bleu_score: sample, field 'reference'"):
        BleuScore().score(SingleTurnSample(response="x"))


def test_scores_are_finite_in_unit_interval():
    for metric in (BleuScore(), RougeScore(), ChrfScore(), NonLLMStringSimilarity()):
        for sample in (EN, ZH, pair("a", "completely different")):
            value = metric.score(sample).score
            assert math.isfinite(value) and 0.0 <= value <= 1.0


@pytest.mark.parametrize("metric", [ChrfScore(), BleuScore(), RougeScore(), ExactMatch(), StringPresence(),
                                    NonLLMStringSimilarity()], ids=lambda m: m.name)
def test_a_missing_response_is_the_same_for_every_text_metric(metric):
    """None as a response: a named error from score() (the sample lacks a field), the floor 0.0 inside an
    optimizer (as_metric), never a raw exception from the scorer."""
    with pytest.raises(SampleValidationError, match=f"{metric.name}: sample, field 'response'"):
        metric.score({"response": None, "reference": "abc"})
    example = dspy.Example(user_input="q", reference="abc").with_inputs("user_input")
    assert metric.as_metric()(example, dspy.Prediction(response=None)) == 0.0
    assert metric.score({"response": "", "reference": "abc"}).score == 0.0
