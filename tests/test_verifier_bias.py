"""The lexical bias model and the product-of-experts training it feeds (``TrainConfig.debias``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibration.verifier.pairs import EvidencePair
from calibration.verifier.bias import BIAS_FEATURES, LexicalBias, lexical_features

EVIDENCE = "The bridge over the river was opened in 1932 by the mayor of the town."


def pair(claim: str, label: int, source: str, i: int) -> EvidencePair:
    return EvidencePair(EVIDENCE, claim, label, source, f"{source}:{i}")


def test_the_features_are_the_claims_token_and_word_pair_overlap():
    x = lexical_features([pair("The bridge was opened in 1932.", 1, "mnli", 0),
                          pair("Dogs bark loudly at night.", 0, "mnli", 1),
                          pair("bridge river mayor", 0, "mnli", 2)])
    assert x.shape == (3, len(BIAS_FEATURES))
    assert x[0, 0] == 1.0 and 0 < x[0, 1] < 1  # every word is there; "bridge was" is not a pair of the evidence
    assert x[1].tolist() == [0.0, 0.0]
    assert x[2].tolist() == [1.0, 0.0]


def mix() -> list[EvidencePair]:
    """Overlap predicts mnli's label; snli's label is the other way round; the rule-made and one-label sources
    get no model."""
    copied, other = "The bridge was opened by the mayor in 1932.", "Cats sleep most of the afternoon away."
    pairs = [pair(copied if i % 4 else other, int(i % 4 > 0), "mnli", i) for i in range(20)]  # 15 : 5
    pairs += [pair(copied if i % 2 else other, 1 - i % 2, "snli", i) for i in range(20)]
    pairs += [pair(copied, 0, "perturbed_number", i) for i in range(6)] + [pair(copied, 1, "perturbed_copy", 9)]
    pairs += [pair(other, 1, "expertqa", i) for i in range(4)]
    return pairs


def test_each_source_gets_its_own_model_and_the_rule_made_pairs_none():
    pairs = mix()
    bias = LexicalBias.fit(pairs)
    assert set(bias.models) == {"mnli", "snli"} and bias.roc_auc == {"mnli": 1.0, "snli": 1.0}
    assert bias.models["mnli"][0][0] > 0 > bias.models["snli"][0][0]
    z = bias.logits(pairs)
    modelled = np.array([p.source in bias.models for p in pairs])
    assert abs(bias.centre) > 0.1  # mnli's lopsided labels move the mean log-odds off 0 ...
    assert z[modelled].mean() == pytest.approx(0.0, abs=1e-9)  # ... and the centre takes it off those pairs
    assert z[~modelled].tolist() == [0.0] * int((~modelled).sum())  # nothing is added to the others
    assert bias.logits([pair("anything", 1, "vitaminc_real", 0)]).tolist() == [0.0]  # nor to an unseen source
    with pytest.raises(ValueError, match="no source outside the rule-made pairs has both labels"):
        LexicalBias.fit([p for p in pairs if p.source.startswith("perturbed_") or p.source == "expertqa"])


def test_debiased_training_keeps_its_bias_model_and_resumes_only_as_itself(tmp_path, shared_data):
    from calibration.verifier.training import TrainConfig, train_verifier

    config = TrainConfig(seed=0, per_source={"fever_symmetric": 32}, perturbed=16, begin_parts=(), held_out=8,
                         batch_size=8, eval_every=100, checkpoint_every=2, max_length=48)
    debiased = TrainConfig(**{**config.__dict__, "debias": 1.0})
    plain = train_verifier(tmp_path / "plain", config, progress=False)
    train_verifier(tmp_path / "debiased", debiased, progress=False, max_steps=2)
    with pytest.raises(ValueError, match="differs in debias"):
        train_verifier(tmp_path / "debiased", config, progress=False)
    weights = train_verifier(tmp_path / "debiased", debiased, progress=False)
    manifest = json.loads((weights.parent / "groundedness-minilm.json").read_text())
    assert manifest["bias"]["features"] == list(BIAS_FEATURES)
    assert set(manifest["bias"]["models"]) == {"fever_symmetric"}
    assert "bias" not in json.loads((plain.parent / "groundedness-minilm.json").read_text())
    from safetensors.numpy import load_file

    a, b = load_file(str(plain)), load_file(str(weights))
    assert any(not np.array_equal(a[k], b[k]) for k in a)  # the bias changed what was learned
    with pytest.raises(ValueError, match="debias must be a share"):
        train_verifier(tmp_path / "bad", TrainConfig(**{**config.__dict__, "debias": 1.5}), progress=False)
