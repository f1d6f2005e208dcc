"""RAG judges on a scripted LM (DSPy's DummyLM, answers in call order): the seeds' worked examples."""

import numpy as np
import pytest
from dspy.utils import DummyLM

from judges import SingleTurnSample
from judges.metrics.rag.answer import (
    AnswerCorrectness,
    FactualCorrectness,
    Faithfulness,
    NoiseSensitivity,
    ResponseRelevancy,
    SemanticSimilarity,
    f1_from_counts,
)
from judges.metrics.rag.claims import align_verdicts
from judges.metrics.rag.context import (
    ContextEntityRecall,
    ContextRelevancy,
    ContextUtilization,
    LLMContextPrecisionWithReference,
    LLMContextRecall,
)


def claims(*items):
    return {"claims": list(items)}


def verdicts(*pairs):
    return {"verdicts": [{"claim": c, "reason": "scripted", "supported": s} for c, s in pairs]}


class TableEmbedder:
    """A scripted embedder: each text maps to a fixed vector."""

    def __init__(self, table):
        self.table = table

    def __call__(self, texts):
        return np.array([self.table[t] for t in texts], dtype=float)


def unit_pair(cosine):
    return [1.0, 0.0], [cosine, float(np.sqrt(1 - cosine**2))]


# --- Faithfulness ---------------------------------------------------------------------------------
OPPENHEIMER_Q = "映画『オッペンハイマー』の監督は誰で、J・ロバート・オッペンハイマー役を演じたのは誰ですか？"
OPPENHEIMER_A = "クリストファー・ノーランが映画『オッペンハイマー』を監督しました。キリアン・マーフィーが J・ロバート・オッペンハイマーを演じています。"
OPPENHEIMER_CTX = "『オッペンハイマー』は 2023 年の伝記スリラー映画で、クリストファー・ノーランが脚本・監督を務めています。キリアン・マーフィーがオッペンハイマーを演じています。"
NOLAN = "クリストファー・ノーランが映画『オッペンハイマー』を監督しました。"
MURPHY = "キリアン・マーフィーが J・ロバート・オッペンハイマーを演じています。"


def test_faithfulness_oppenheimer_is_one():
    lm = DummyLM([claims(NOLAN, MURPHY), verdicts((NOLAN, True), (MURPHY, True))])
    judge = Faithfulness(lm=lm)
    sample = SingleTurnSample(user_input=OPPENHEIMER_Q, response=OPPENHEIMER_A, retrieved_contexts=[OPPENHEIMER_CTX])
    result = judge.score(sample)
    assert result.score == 1.0
    assert result.claims == [NOLAN, MURPHY] and result.claims_source == "extracted"
    assert [name for name, _ in judge.named_predictors()] == ["extract_claims", "verify"]
    assert len(lm.history) == 2  # one extraction call, one verification call for all claims


def test_faithfulness_einstein_20_march_is_half():
    c1, c2 = "爱因斯坦出生在德国。", "爱因斯坦于1879年3月20日出生。"
    lm = DummyLM([claims(c1, c2), verdicts((c1, True), (c2, False))])
    sample = SingleTurnSample(
        user_input="爱因斯坦在哪里出生？何时出生？",
        response="爱因斯坦于1879年3月20日出生在德国。",
        retrieved_contexts=["阿尔伯特·爱因斯坦（生于1879年3月14日）是一位德裔理论物理学家。"],
    )
    result = Faithfulness(lm=lm).score(sample)
    assert result.score == 0.5
    assert [v["supported"] for v in result.verdicts] == [True, False]
    assert c2 in Faithfulness().feedback(result)


def test_an_unsupported_claim_s_feedback_names_its_closest_evidence_and_what_that_says_otherwise():
    claim = "Mount Everest is 8,856 metres tall."
    says, other = "Mount Everest is 8,849 metres tall.", "Everest lies on the border of Nepal and China."
    lm = DummyLM([claims(claim), verdicts((claim, False))])
    judge = Faithfulness(lm=lm)
    result = judge.score(SingleTurnSample(response=claim, retrieved_contexts=[other, says]))
    assert result.verdicts[0]["evidence"] == says and result.verdicts[0]["contrast"] == says
    assert judge.feedback(result) == (f"faithfulness = 0.00; claims not supported: {claim!r} (the judge: scripted; "
                                      f"closest evidence: {says!r}, which says {says!r})")


def test_faithfulness_falls_back_to_sentences_when_no_claims():
    s1, s2 = "Einstein was born in Germany.", "He was born in 1879."
    lm = DummyLM([claims(), verdicts((s1, True), (s2, True))])
    result = Faithfulness(lm=lm).score(
        SingleTurnSample(response=f"{s1} {s2}", retrieved_contexts=["Einstein, born 1879 in Germany."])
    )
    assert result.claims_source == "sentences" and result.claims == [s1, s2] and result.score == 1.0


def test_verdicts_align_by_claim_text_and_missing_ones_count_as_unsupported():
    class V:
        def __init__(self, claim, supported):
            self.claim, self.supported, self.reason = claim, supported, "r"

    rows, unverified = align_verdicts(["alpha fact", "beta fact", "gamma fact"], [V("gamma fact", True), V("alpha fact", True)])
    assert [r["supported"] for r in rows] == [True, False, True]
    assert unverified == [1]


# --- Context recall, precision, relevancy -----------------------------------------------------------
EINSTEIN_CTX = (
    "アルベルト・アインシュタイン（1879 年 3 月 14 日 - 1955 年 4 月 18 日）は、ドイツ生まれの理論物理学者で、"
    "広く認められた史上最も偉大で影響力のある科学者の一人です。相対性理論の開発で最もよく知られていますが、"
    "量子力学にも重要な貢献をしました。彼の質量とエネルギーの等価性の公式 E = mc^2 は『世界で最も有名な方程式』と"
    "呼ばれています。彼は 1921 年に物理学でノーベル賞を受賞しました。"
)


def test_context_recall_two_of_three():
    r1 = "アルベルト・アインシュタインは 1879 年 3 月 14 日に生まれ、ドイツ生まれの理論物理学者です。"
    r2 = "彼は 1921 年に物理学でノーベル賞を受賞しました。"
    r3 = "彼は 1905 年に 4 本の論文を発表しました。"
    lm = DummyLM([claims(r1, r2, r3), verdicts((r1, True), (r2, True), (r3, False))])
    sample = SingleTurnSample(retrieved_contexts=[EINSTEIN_CTX], reference=r1 + r2 + r3)
    assert LLMContextRecall(lm=lm).score(sample).score == pytest.approx(2 / 3)


def test_context_precision_is_average_precision_of_verdicts():
    lm = DummyLM([{"reason": "r", "useful": True}, {"reason": "r", "useful": False}, {"reason": "r", "useful": True}])
    sample = SingleTurnSample(user_input="q", retrieved_contexts=["a", "b", "c"], reference="ref")
    judge = LLMContextPrecisionWithReference(lm=lm)
    result = judge.score(sample)
    assert result.useful == [True, False, True]
    assert result.score == pytest.approx((1 + 2 / 3) / 2)
    assert [n for n, _ in judge.named_predictors()] == ["judge_usefulness"]
    with pytest.raises(Exception, match="response"):
        ContextUtilization(lm=lm).score(sample)


def test_context_relevancy_two_of_four_sentences():
    s1 = "アルベルト・アインシュタイン（1879 年 3 月 14 日 - 1955 年 4 月 18 日）は、ドイツ生まれの理論物理学者で、広く認められた史上最も偉大で影響力のある科学者の一人です。"
    s4 = "彼は 1921 年に物理学でノーベル賞を受賞しました。"
    lm = DummyLM([{"sentences": [s1, s4, "A sentence the context never had."]}])
    sample = SingleTurnSample(user_input="アルベルト・アインシュタインについて教えてください。", retrieved_contexts=[EINSTEIN_CTX])
    result = ContextRelevancy(lm=lm).score(sample)
    assert len(result.context_sentences) == 4
    assert result.score == 0.5


# --- Entity recall ----------------------------------------------------------------------------------
def test_context_entity_recall_four_and_one_of_six():
    reference_entities = {"entities": ["泰姬陵", "亚穆纳河", "阿格拉", "1631", "沙贾汗", "穆塔兹·玛哈尔"]}
    high = {"entities": ["泰姬陵", "阿格拉", "沙贾汗", "穆塔兹·玛哈尔", "印度"]}
    low = {"entities": ["泰姬陵", "联合国教科文组织", "印度"]}
    reference = "泰姬陵是位于印度城市阿格拉亚穆纳河右岸的一座象牙白大理石陵墓。它由莫卧儿皇帝沙贾汗于1631年委托建造。"
    sample_high = SingleTurnSample(reference=reference, retrieved_contexts=["泰姬陵是位于印度阿格拉的建筑奇迹。"])
    sample_low = SingleTurnSample(reference=reference, retrieved_contexts=["泰姬陵是印度的一个标志性古迹。"])
    assert ContextEntityRecall(lm=DummyLM([reference_entities, high])).score(sample_high).score == pytest.approx(4 / 6)
    result = ContextEntityRecall(lm=DummyLM([reference_entities, low])).score(sample_low)
    assert result.score == pytest.approx(1 / 6) and result.recalled_entities == ["泰姬陵"]
    empty = ContextEntityRecall(lm=DummyLM([{"entities": []}, low])).score(sample_low)
    assert empty.score == 0.0 and "no entity" in empty.undefined_reason


# --- Noise sensitivity -------------------------------------------------------------------------------
def test_noise_sensitivity_lic_one_third():
    a1, a2, a3 = "LIC是印度最大的保险公司", "LIC以其庞大的投资组合而闻名", "LIC为国家的金融稳定做出了贡献"
    g1, g2, g3 = "LIC是印度最大的保险公司", "LIC成立于1956年", "LIC以管理庞大的投资组合而闻名"
    contexts = [
        "印度人寿保险公司（LIC）成立于1956年，是印度保险业国有化的结果。",
        "LIC是印度最大的保险公司，拥有庞大的投保人网络和巨额投资。",
        "作为印度最大的机构投资者，LIC管理着大量资金，为国家的金融稳定做出了贡献。",
        "印度经济是世界上增长最快的主要经济体之一。",
    ]
    script = [
        claims(a1, a2, a3),  # response claims
        claims(g1, g2, g3),  # reference claims
        verdicts((a1, True), (a2, True), (a3, False)),  # response claims vs reference
        # per context: reference claims, then response claims
        verdicts((g1, False), (g2, True), (g3, False)), verdicts((a1, False), (a2, False), (a3, False)),
        verdicts((g1, True), (g2, False), (g3, True)), verdicts((a1, True), (a2, True), (a3, False)),
        verdicts((g1, False), (g2, False), (g3, True)), verdicts((a1, False), (a2, True), (a3, True)),
        verdicts((g1, False), (g2, False), (g3, False)), verdicts((a1, False), (a2, False), (a3, False)),
    ]
    sample = SingleTurnSample(
        user_input="印度人寿保险公司（LIC）以什么闻名？",
        response="LIC是印度最大的保险公司，以其庞大的投资组合而闻名。LIC为国家的金融稳定做出了贡献。",
        reference="LIC是印度最大的保险公司，成立于1956年。它以管理庞大的投资组合而闻名。",
        retrieved_contexts=contexts,
    )
    result = NoiseSensitivity(lm=DummyLM(list(script))).score(sample)
    assert result.relevant_contexts == [True, True, True, False]
    assert result.score == pytest.approx(1 / 3)
    assert result.incorrect_claims == [a3]
    assert NoiseSensitivity(lm=DummyLM(list(script)), mode="irrelevant").score(sample).score == 0.0
    with pytest.raises(ValueError, match="mode"):
        NoiseSensitivity(mode="noisy")


# --- Answer correctness, factual correctness, semantic similarity -----------------------------------
SUN_RESPONSE = "太陽は核分裂によって動力を得ています。太陽の主な機能は太陽系に光を提供することです。"
SUN_REFERENCE = "太陽は水素原子がヘリウムに融合する核融合によって動力を得ています。このエネルギーは熱と光を提供します。"


def sun_script():
    fission, light = "太陽は核分裂によって動力を得ています。", "太陽の主な機能は太陽系に光を提供することです。"
    fusion, heat = "太陽は核融合によって動力を得ています。", "このエネルギーは熱と光を提供します。"
    return [
        claims(fission, light),
        claims(fusion, heat),
        verdicts((fission, False), (light, True)),  # response claims vs reference: FP, TP
        verdicts((fusion, False), (heat, True)),  # reference claims vs response: FN, covered
    ]


def test_answer_correctness_0525_from_f1_half_and_similarity_06():
    a, b = unit_pair(0.6)
    embedder = TableEmbedder({SUN_RESPONSE: a, SUN_REFERENCE: b})
    judge = AnswerCorrectness(lm=DummyLM(sun_script()), embeddings=embedder)
    sample = SingleTurnSample(user_input="太陽は何によって動力を得ていますか？", response=SUN_RESPONSE, reference=SUN_REFERENCE)
    result = judge.score(sample)
    assert (len(result.tp), len(result.fp), len(result.fn)) == (1, 1, 1)
    assert result.f1 == pytest.approx(0.5)
    assert result.similarity == pytest.approx(0.6)
    assert result.score == pytest.approx(0.525)
    binary = AnswerCorrectness(lm=DummyLM(sun_script()), embeddings=embedder, threshold=0.6).score(sample)
    assert binary.score == 0.0 and binary.raw_score == pytest.approx(0.525)
    with pytest.raises(ValueError, match="weights"):
        AnswerCorrectness(weights=(0, 0))


def test_f1_from_counts():
    # The seed's sun example counts TP=1, FP=1, FN=2 and writes 1 / (1 + 0.5 * 3) = 0.5; it is 0.4.
    assert f1_from_counts(1, 1, 2) == pytest.approx(0.4)
    assert f1_from_counts(1, 1, 1) == 0.5
    assert f1_from_counts(0, 3, 3) == 0.0


def test_factual_correctness_modes():
    r1, r2 = "The Eiffel Tower is in Paris.", "It is 1000 ft tall."
    p1 = "The Eiffel Tower is in Paris."
    script = [claims(p1), verdicts((p1, True)), claims(r1, r2), verdicts((r1, True), (r2, False))]
    sample = SingleTurnSample(response="The Eiffel Tower is located in Paris.", reference=f"{r1} {r2}")
    f1 = FactualCorrectness(lm=DummyLM(list(script))).score(sample)
    assert (f1.precision, f1.recall) == (1.0, 0.5)
    assert f1.score == pytest.approx(2 / 3)
    assert FactualCorrectness(lm=DummyLM(script[:2]), mode="precision").score(sample).score == 1.0
    assert FactualCorrectness(lm=DummyLM(script[2:]), mode="recall").score(sample).score == 0.5
    with pytest.raises(ValueError, match="atomicity"):
        FactualCorrectness(atomicity="medium")


def test_semantic_similarity_with_threshold():
    a, b = unit_pair(0.8)
    embedder = TableEmbedder({"x": a, "y": b})
    sample = SingleTurnSample(response="x", reference="y")
    assert SemanticSimilarity(embeddings=embedder).score(sample).score == pytest.approx(0.8)
    assert SemanticSimilarity(embeddings=embedder, threshold=0.9).score(sample).score == 0.0
    assert SemanticSimilarity.needs_embeddings and not SemanticSimilarity.needs_lm


# --- Response relevancy --------------------------------------------------------------------------------
def test_response_relevancy_mean_cosine_and_noncommittal():
    q = "映画『オッペンハイマー』の監督は誰で、主演は誰ですか？"
    g1, g2 = "監督は誰ですか？", "主演は誰ですか？"
    table = {q: [1.0, 0.0, 0.0], g1: [0.95, float(np.sqrt(1 - 0.95**2)), 0.0], g2: [0.90, 0.0, float(np.sqrt(1 - 0.81))]}
    embedder = TableEmbedder(table)
    sample = SingleTurnSample(user_input=q, response=OPPENHEIMER_A)
    lm = DummyLM([{"questions": [g1, g2], "noncommittal": False}])
    result = ResponseRelevancy(lm=lm, embeddings=embedder, n_questions=2).score(sample)
    assert result.score == pytest.approx(0.925)
    lm = DummyLM([{"questions": [g1, g2], "noncommittal": True}])
    assert ResponseRelevancy(lm=lm, embeddings=embedder, n_questions=2).score(sample).score == 0.0
    lm = DummyLM([{"questions": [], "noncommittal": False}])
    empty = ResponseRelevancy(lm=lm, embeddings=embedder).score(sample)
    assert empty.score == 0.0 and empty.undefined_reason


def test_missing_fields_fail_before_any_lm_call():
    lm = DummyLM([])
    with pytest.raises(Exception, match="faithfulness: sample, field 'retrieved_contexts'"):
        Faithfulness(lm=lm).score(SingleTurnSample(response="x"))
    assert lm.history == []


def test_verdict_probabilities_from_token_logprobs():
    from math import log

    from judges.metrics.logprobs import verdict_probabilities

    def tok(token, logprob, top=()):
        return {"token": token, "logprob": logprob, "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]}

    content = [
        tok('{"', -0.1), tok("supported", -0.1), tok('":', -0.1),
        # the grammar forces a space; its alternatives carry the model's choice
        tok(" ", -2.0, [(" true", log(0.6)), (" False", log(0.2)), (" maybe", log(0.1))]),
        tok("true", -0.5), tok(", ", -0.1), tok('"supported":', -0.1),
        tok(" false", log(0.3), [(" false", log(0.3)), (" true", log(0.1))]), tok("}", -0.1),
    ]
    probabilities = verdict_probabilities({"content": content}, "supported")
    assert probabilities == pytest.approx([0.75, 0.25])
    assert verdict_probabilities(None, "supported") == []
    # no true/false alternative in the top list: the chosen token decides
    assert verdict_probabilities({"content": [tok('"useful": ', -0.1), tok("false", -0.01)]}, "useful") == [0.0]


def test_supported_share_uses_probabilities_when_present():
    from judges.metrics.rag.claims import ClaimJudge

    rows = [{"supported": True, "probability": 0.9}, {"supported": False, "probability": 0.2}, {"supported": True}]
    assert ClaimJudge.supported_share(rows) == pytest.approx((0.9 + 0.2 + 1.0) / 3)
