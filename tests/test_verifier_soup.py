"""The soup recipe: two seeded, resumable trainings from the base weights, then their weighted average."""

from __future__ import annotations

import json

import numpy as np
import pytest

from judges.lm.verifier_files import load_shipped


def tiny(seed: int, perturbed: int = 16):
    from calibration.fitting.verifier_training import TrainConfig

    return TrainConfig(seed=seed, per_source={"fever_symmetric": 48}, perturbed=perturbed, begin_parts=(), held_out=8,
                       batch_size=8, eval_every=100, checkpoint_every=2)


def test_scaled_multiplies_every_count_of_the_mix_and_nothing_else():
    from calibration.fitting.verifier_soup import scaled
    from calibration.fitting.verifier_training import DEFAULT_MIX, TrainConfig

    config = scaled(TrainConfig(seed=3, other_words=100), 0.7)
    assert config.per_source == {k: round(v * 0.7) for k, v in DEFAULT_MIX.items()}
    assert (config.perturbed, config.other_words, config.seed, config.max_length) == (7000, 70, 3, 160)
    with pytest.raises(ValueError, match="scale must be > 0"):
        scaled(TrainConfig(), 0)


def test_the_recipe_is_the_measured_one_and_its_weights_are_checked():
    from calibration.fitting.verifier_soup import SoupRecipe, soup_recipe
    from calibration.fitting.verifier_training import TrainConfig

    recipe = soup_recipe(seed=1)
    first, second = recipe.parents
    assert (first.seed, second.seed) == (1, 2) and recipe.weights == pytest.approx((0.3, 0.7))
    assert (first.perturbed, second.perturbed) == (7000, 14000) and first.per_source == second.per_source
    assert first.other_words == second.other_words == 0
    with pytest.raises(ValueError, match="sum to 1"):
        SoupRecipe((TrainConfig(), TrainConfig()), (0.5, 0.6))
    with pytest.raises(ValueError, match="one weight per parent"):
        SoupRecipe((TrainConfig(),), (0.5, 0.5))


def test_train_soup_averages_two_resumable_trainings(tmp_path, shared_data):
    from safetensors.torch import load_file

    from calibration.fitting.verifier_soup import SoupRecipe, train_soup
    from calibration.fitting.verifier_training import MANIFEST_NAME, train_verifier

    pytest.importorskip("calibration.data.pairs")
    recipe = SoupRecipe((tiny(0), tiny(1, perturbed=24)), (0.25, 0.75))
    stopped = train_soup(tmp_path / "soup", recipe, progress=False, max_steps=3)
    assert not stopped.exists() and (tmp_path / "soup" / "parent-0" / "checkpoint" / "state.json").is_file()
    soup = train_soup(tmp_path / "soup", recipe, progress=False)  # continues the first, then trains the second
    first = train_verifier(tmp_path / "alone-0", recipe.parents[0], progress=False)
    second = train_verifier(tmp_path / "alone-1", recipe.parents[1], progress=False)
    a, b, s = load_file(str(first)), load_file(str(second)), load_file(str(soup))
    assert set(s) == set(a)
    for name in a:  # the parents as if trained alone, averaged in float32, stored as float16
        expected = (0.25 * a[name].float() + 0.75 * b[name].float()).half()
        assert np.array_equal(s[name].numpy(), expected.numpy()), name
    assert any(not np.array_equal(s[k].numpy(), a[k].numpy()) for k in a)
    manifest = json.loads((tmp_path / "soup" / MANIFEST_NAME).read_text())
    assert [p["weight"] for p in manifest["parents"]] == [0.25, 0.75]
    assert manifest["recipe"]["parents"][1]["perturbed"] == 24 and manifest["stored_as"] == "float16"
    _, _, meta = load_shipped(soup, soup.parent / MANIFEST_NAME)  # a loadable verifier, checked by its SHA-256
    assert meta["sha256"] == manifest["sha256"]
