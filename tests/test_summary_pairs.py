"""SummEval summaries as verifier training pairs: only where the summary-level label fits, never from the
articles the agreement table measures on."""

from __future__ import annotations

import random

import pytest


def words(texts):
    return [len(text.split()) for text in texts]


def test_copied_and_the_lower_case_name_swap():
    from calibration.verifier.summary_pairs import copied, swap_lower_name

    article = "Andros Townsend scored for England. Paul Merson apologised on Sunday."
    assert copied("andros townsend scored for england .", article)
    assert not copied("townsend scored for italy .", article)
    assert not copied("", article)
    names = ["andros townsend", "paul merson", "england"]
    swapped = swap_lower_name("andros townsend scored twice .", random.Random(0), names)
    assert swapped == "paul merson scored twice ."  # the same number of words where there is one
    assert swap_lower_name("nobody is named here .", random.Random(0), names) is None
    assert swap_lower_name("paul merson met andros townsend in england .", random.Random(0), names) is None


def test_summary_pairs_label_only_what_the_summary_score_gives_and_skip_the_measured_articles(shared_data):
    from calibration.data.loaders import load_summeval
    from calibration.verifier.summary_pairs import HELD_OUT_ARTICLES, copied, summary_pairs

    assert summary_pairs(0, seed=0) == summary_pairs(-1, seed=0) == []
    for bad in (1.5, True, "10"):
        with pytest.raises(ValueError, match=r"n \(TrainConfig.summeval\) must be an int"):
            summary_pairs(bad, seed=0)
    pairs = summary_pairs(40, seed=0, token_counts=words, chunk_tokens=60)
    data = load_summeval()
    held = list(dict.fromkeys(m["article_id"] for m in data.meta))[:HELD_OUT_ARTICLES]
    assert held[:2] == ["A0", "A1"] and not {p.group for p in pairs} & {f"summeval:{a}" for a in held}
    by_id = {}
    for sample, score, meta in zip(data.dataset, data.labels, data.meta):
        by_id.setdefault(meta["article_id"], []).append((sample.reference_contexts[0], sample.response, score))
    supported = [p for p in pairs if p.source == "summeval_supported"]
    changed = [p for p in pairs if p.source.startswith("summeval_changed_")]
    natural = [p for p in pairs if p.source == "summeval_unsupported"]
    assert len(supported) == 40 and 0 < len(changed) <= 40 and natural
    assert {p.label for p in supported} == {1} and {p.label for p in changed + natural} == {0}
    for pair in pairs:
        rows = by_id[pair.group.removeprefix("summeval:")]
        article = rows[0][0]
        assert copied(pair.evidence, article)  # consecutive sentences of the article
        assert len(article.split()) <= 60 or len(pair.evidence) < len(article)  # a window, not the article
        if pair.label == 1:  # a sentence of a summary all three experts scored 5
            assert any(pair.claim in summary and score >= 5.0 - 1e-9 for _, summary, score in rows)
        elif pair.source == "summeval_unsupported":  # the one not-copied sentence of a summary scored <= 3
            assert not copied(pair.claim, article)
            assert any(pair.claim in summary and score <= 3.0 for _, summary, score in rows)
        else:
            assert pair.claim.lower() not in article.lower()
    assert summary_pairs(40, seed=0, token_counts=words, chunk_tokens=60) == pairs  # seeded


def test_train_config_summeval_adds_the_pairs_and_scaled_scales_them(shared_data):
    from calibration.verifier.soup import scaled
    from calibration.verifier.mix import training_mix
    from calibration.verifier.training import TrainConfig

    config = TrainConfig(per_source={"fever_symmetric": 40}, perturbed=0, begin_parts=(), held_out=60, summeval=30)
    train, held = training_mix(config)
    sources = [p.source for p in train + held if p.source.startswith("summeval")]
    assert sources.count("summeval_supported") == 30 and any(s.startswith("summeval_changed_") for s in sources)
    assert not {p.group for p in train} & {p.group for p in held}
    assert scaled(config, 0.5).summeval == 15
    plain = training_mix(TrainConfig(per_source={"fever_symmetric": 40}, perturbed=0, begin_parts=(), held_out=60))
    assert not any(p.source.startswith("summeval") for p in plain[0] + plain[1])
