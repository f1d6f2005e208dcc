"""The soup recipe: two seeded, resumable trainings from the base weights, then their weighted average."""

from __future__ import annotations

import json

import numpy as np
import pytest

from judges.lm.verifier.files import load_shipped


def tiny(seed: int, perturbed: int = 16):
    from calibration.verifier.training import TrainConfig

    return TrainConfig(seed=seed, per_source={"fever_symmetric": 32}, perturbed=perturbed, begin_parts=(), held_out=8,
                       batch_size=8, eval_every=100, checkpoint_every=2, max_length=48)


def test_scaled_multiplies_every_count_of_the_mix_and_nothing_else():
    from calibration.verifier.soup import scaled
    from calibration.verifier.config import DEFAULT_MIX
    from calibration.verifier.training import TrainConfig

    config = scaled(TrainConfig(seed=3, other_words=100), 0.7)
    assert config.per_source == {k: round(v * 0.7) for k, v in DEFAULT_MIX.items()}
    assert (config.perturbed, config.other_words, config.seed, config.max_length) == (7000, 70, 3, 160)
    with pytest.raises(ValueError, match="scale must be > 0"):
        scaled(TrainConfig(), 0)


def test_the_recipe_is_the_measured_one_and_its_weights_are_checked():
    from dataclasses import replace

    from calibration.verifier.soup import SoupRecipe, soup_recipe
    from calibration.verifier.training import TrainConfig

    recipe = soup_recipe(seed=1)
    first, second = recipe.parents
    assert (first.seed, second.seed) == (1, 2) and recipe.weights == pytest.approx((0.3, 0.7))
    assert (first.perturbed, second.perturbed) == (7000, 14000) and first.per_source == second.per_source
    assert first.other_words == second.other_words == first.direction == second.direction == 0
    # run 4: direction pairs in place of as many of the second parent's rule-made pairs (x0.7), not shipped
    swapped = soup_recipe(seed=1, direction=4000)
    assert swapped.parents[0] == first and replace(second, perturbed=11200, direction=2800) == swapped.parents[1]
    for bad in (-1, 20001, 4000.0, True):
        with pytest.raises(ValueError, match="soup_recipe: direction must be an int in"):
            soup_recipe(direction=bad)
    # runs 3 and 5: the direction pairs on top of the rule-made ones, every count at another scale
    added = soup_recipe(seed=1, direction=30000, in_place=False, scale=0.4)
    assert added.parents[1].perturbed == 8000 and added.parents[1].direction == 12000
    assert added.parents[0].per_source["snli"] == 2400 and added.parents[0].perturbed == 4000
    with pytest.raises(ValueError, match="soup_recipe: direction must be an int >= 0"):
        soup_recipe(direction=-1, in_place=False)
    for bad in (0, 1.5, True, "0.7"):
        with pytest.raises(ValueError, match="soup_recipe: scale must be a number in"):
            soup_recipe(scale=bad)
    with pytest.raises(ValueError, match="soup_recipe: in_place must be True or False"):
        soup_recipe(in_place=1)
    assert (first.precision, second.precision) == ("float32", "float32")  # the shipped model's
    faster = soup_recipe(seed=1, precision="bfloat16")
    assert [replace(p, precision="float32") for p in faster.parents] == list(recipe.parents)
    assert {p.precision for p in faster.parents} == {"bfloat16"} and faster.weights == recipe.weights
    with pytest.raises(ValueError, match="sum to 1"):
        SoupRecipe((TrainConfig(), TrainConfig()), (0.5, 0.6))
    with pytest.raises(ValueError, match="one weight per parent"):
        SoupRecipe((TrainConfig(),), (0.5, 0.5))


@pytest.mark.long(why='trains two tiny verifiers, resumes them and averages them')
def test_train_soup_averages_two_resumable_trainings(tmp_path, monkeypatch, shared_data):
    from dataclasses import replace

    from safetensors.torch import load_file

    from calibration.verifier import soup as verifier_soup
    from calibration.verifier.soup import SoupRecipe, train_soup
    from calibration.verifier.training import MANIFEST_NAME, WEIGHTS_NAME, train_verifier

    recipe = SoupRecipe((tiny(0), tiny(1, perturbed=24)), (0.25, 0.75), fit_temperature=False)
    (tmp_path / "soup").mkdir()
    (tmp_path / "soup" / WEIGHTS_NAME).write_bytes(b"an older model")  # not to be taken for this run's
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
    before = soup.read_bytes()

    def no_training(*args, **kwargs):
        raise AssertionError("a finished parent was trained again")

    monkeypatch.setattr(verifier_soup, "train_verifier", no_training)
    assert train_soup(tmp_path / "soup", recipe, progress=False).read_bytes() == before  # reused, averaged again
    with pytest.raises(ValueError, match="another configuration \\(differs in perturbed\\)"):
        train_soup(tmp_path / "soup", SoupRecipe((replace(tiny(0), perturbed=8), tiny(1)), (0.5, 0.5)), progress=False)
    monkeypatch.undo()
    (tmp_path / "soup" / "parent-0" / MANIFEST_NAME).write_text("{}")  # cut while written: made again from its checkpoint
    assert train_soup(tmp_path / "soup", recipe, progress=False).read_bytes() == before


@pytest.mark.long(why='the train-verifier command trains, resumes and installs a soup of two tiny verifiers')
def test_the_command_trains_the_soup_resumes_and_installs_it(tmp_path, monkeypatch, capsys, shared_data):
    from calibration.verifier.soup import SoupRecipe
    from calibration.verifier.training import MANIFEST_NAME, WEIGHTS_NAME
    from judges_app.cli import main
    from judges.lm.verifier.files import SHIPPED_TRAINED_ON
    from judges_app.cli import train_verifier as command

    shipped_list = SHIPPED_TRAINED_ON.read_bytes()
    asked = []

    def recipe(seed, threads, precision):
        asked.append(precision)
        return SoupRecipe((tiny(seed), tiny(seed + 1)), (0.3, 0.7), fit_temperature=False)

    monkeypatch.setattr(command, "soup_recipe", recipe)
    monkeypatch.setattr(command, "SHIPPED_DIR", tmp_path / "installed")
    assert main(["train-verifier", "--out", str(tmp_path / "run"), "--max-steps", "2"]) == 0
    assert "stopped at --max-steps 2" in capsys.readouterr().out and not (tmp_path / "installed").exists()
    assert main(["train-verifier", "--out", str(tmp_path / "other"), "--max-steps", "1", "--precision", "bfloat16"]) == 0
    assert asked == ["float32", "bfloat16"] and "note:" not in capsys.readouterr().out
    assert main(["train-verifier", "--out", str(tmp_path / "other"), "--precision", "bfloat16", "--install"]) == 0
    assert "trained in bfloat16; the one shipped with the package is float32's" in capsys.readouterr().out
    assert main(["train-verifier", "--out", str(tmp_path / "run"), "--install"]) == 0
    out = capsys.readouterr().out
    assert "parent 0 (weight 0.3)" in out and "parent 1 (weight 0.7)" in out
    for name in (WEIGHTS_NAME, MANIFEST_NAME):
        assert (tmp_path / "installed" / name).read_bytes() == (tmp_path / "run" / name).read_bytes()
    assert (tmp_path / "installed" / SHIPPED_TRAINED_ON.name).is_file()  # beside the installed weights ...
    assert SHIPPED_TRAINED_ON.read_bytes() == shipped_list  # ... and the package's own list untouched


def test_the_temperature_rescales_the_head_only_and_lowers_the_held_out_log_loss(tmp_path, shared_data):
    from dataclasses import replace

    from safetensors.torch import load_file

    from calibration.verifier.soup import HEAD, SoupRecipe, average_files, temperature, train_soup
    from calibration.verifier.mix import training_mix
    from calibration.verifier.training import MANIFEST_NAME

    parents = (tiny(0), replace(tiny(0), held_out=12))  # one's held-out pairs partly in the other's training
    plain = train_soup(tmp_path / "plain", SoupRecipe(parents, (0.5, 0.5), fit_temperature=False), progress=False)
    for i in range(2):  # the same parents, not trained again
        (tmp_path / "hot" / f"parent-{i}").mkdir(parents=True)
        for path in (tmp_path / "plain" / f"parent-{i}").iterdir():
            if path.is_file():
                (tmp_path / "hot" / f"parent-{i}" / path.name).write_bytes(path.read_bytes())
    hot = train_soup(tmp_path / "hot", SoupRecipe(parents, (0.5, 0.5)), progress=False)
    a, b = load_file(str(plain)), load_file(str(hot))
    fitted = json.loads((tmp_path / "hot" / MANIFEST_NAME).read_text())["temperature"]
    t = fitted["t"]
    assert np.exp(-3) <= t <= np.exp(3) and t != 1 and fitted["log_loss"] <= fitted["log_loss_at_1"]
    mixes = [training_mix(c) for c in parents]
    trained = {(p.evidence, p.claim) for train, _ in mixes for p in train}
    held = list({(p.evidence, p.claim): p for _, pairs in mixes for p in pairs if (p.evidence, p.claim) not in trained}.values())
    leaked = [p for _, pairs in mixes for p in pairs if (p.evidence, p.claim) in trained]
    assert leaked and fitted["held_out_pairs"] == len(held) > 0  # one parent's held-out pairs the other trained on: out
    files = [tmp_path / "plain" / f"parent-{i}" / plain.name for i in range(2)]
    average = average_files(files, (0.5, 0.5))
    for name in a:
        expected = (average[name] * t).half() if name in HEAD else a[name]
        assert np.array_equal(b[name].numpy(), expected.numpy()), name
    again, before, after = temperature(average, held, parents[0].max_length)
    assert (again, before, after) == pytest.approx((t, fitted["log_loss_at_1"], fitted["log_loss"]))
    with pytest.raises(ValueError, match="need both labels"):
        temperature(average, [p for p in held if p.label == 1], parents[0].max_length)
