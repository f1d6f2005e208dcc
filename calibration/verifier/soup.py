"""A soup of verifier trainings (Wortsman et al. 2022, "Model soups"): two models trained from the same base
weights on different mixes, averaged tensor by tensor. Each training is ``train_verifier``'s, seeded and
resumable; the average is remade from their files, so a rerun after an interrupt continues where it stopped.

    train_soup("runs/verifier-soup")                  # two trainings, then the average (about an hour)
    train_soup("runs/verifier-soup", soup_recipe(seed=1))   # the same recipe, another pair of seeds

``soup_recipe()`` is the shipped recipe (docs/verifier-log.md, "Soup of two trainings at 0.7"): the shipped
mix and the mix with twice the rule-made changed facts, each cut to 0.7 of its pairs, weight 0.7 on the
second.
``soup_recipe(direction=4000)`` puts minimal pairs of a flipped direction word in place of as many of the
second's rule-made pairs (tried, not shipped: "Direction pairs, run 4"); ``in_place=False`` adds them instead
(runs 1-3) and ``scale`` cuts every count (run 5, 0.4: not shipped).

Averaging shrinks the logits (two heads on features that differ): the soups scored copies well under
their parents, so ``Verifier(stop_at=0.9)`` would stop on few claims. The average's head
(``classifier.weight`` and ``.bias``) is therefore multiplied by a temperature T, the one that minimises the
log loss of ``sigmoid(T * logit)`` on the parents' held-out pairs that neither parent trained on (the two
mixes share pairs: one parent's held-out pair may be in the other's training): every rank and every verdict
at 0.5 stays as the plain average gives it; only how far a probability sits from 0.5 changes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from calibration.verifier.pairs import EvidencePair
from calibration.verifier.mix import training_mix
from calibration.verifier.training import (
    MANIFEST_NAME,
    WEIGHTS_NAME,
    TrainConfig,
    differs_from,
    logits,
    train_verifier,
    write_weights,
)
from judges.lm.verifier.files import VerifierError, base_classifier, checked_manifest

#: The head's tensors a temperature multiplies (the logit is their affine map of the pooled features).
HEAD = ("classifier.weight", "classifier.bias")

#: Every count of both mixes is multiplied by this (``scaled``): the two trainings fit the issue's hour.
SOUP_SCALE = 0.7
#: The second parent's weight in the average, as "Weight-space interpolation" chose it (docs/verifier-log.md).
SOUP_ALPHA = 0.7


def scaled(config: TrainConfig, scale: float) -> TrainConfig:
    """``config`` with every count of its mix multiplied by ``scale``: each source's cap, the rule-made
    pairs, the other-words positives, the SummEval sentences, the direction pairs (a source holding fewer
    pairs than its cap comes whole, as before)."""
    if not scale > 0:
        raise ValueError(f"scaled: scale must be > 0, got {scale!r}")
    return replace(config, per_source={name: round(count * scale) for name, count in config.per_source.items()},
                   perturbed=round(config.perturbed * scale), other_words=round(config.other_words * scale),
                   summeval=round(config.summeval * scale), direction=round(config.direction * scale))


@dataclass(frozen=True)
class SoupRecipe:
    #: The trainings, each from the base weights.
    parents: tuple[TrainConfig, ...]
    #: Each parent's weight in the average (they sum to 1).
    weights: tuple[float, ...]
    #: Multiply the average's head by the temperature fitted on the parents' held-out pairs (``temperature``).
    fit_temperature: bool = True

    def __post_init__(self) -> None:
        if len(self.parents) < 1 or len(self.parents) != len(self.weights):
            raise ValueError(f"SoupRecipe: {len(self.parents)} parents and {len(self.weights)} weights; "
                             f"one weight per parent, at least one parent")
        if any(not 0 <= w <= 1 for w in self.weights) or abs(sum(self.weights) - 1) > 1e-9:
            raise ValueError(f"SoupRecipe: weights must lie in [0, 1] and sum to 1, got {self.weights}")


def soup_recipe(seed: int = 0, threads: int = 2, precision: str = "float32", direction: int = 0, *,
                in_place: bool = True, scale: float = SOUP_SCALE) -> SoupRecipe:
    """The measured recipe: the shipped mix (seed ``seed``) and twice its rule-made changed facts (seed
    ``seed + 1``), both scaled by ``scale`` (``SOUP_SCALE``), weights ``1 - SOUP_ALPHA`` and ``SOUP_ALPHA``.
    ``direction`` minimal pairs of a flipped direction word (``TrainConfig.direction``; 0, the shipped recipe,
    makes none) go into the second parent, in place of as many of its rule-made pairs (``in_place``, run 4)
    or on top of them (``in_place=False``; "Direction pairs", runs 1-3 and 5, in docs/verifier-log.md). The
    shipped model is float32's; ``precision="bfloat16"`` trains both parents under autocast, faster on a CPU
    with bfloat16 units, and close to it in agreement (docs/verifier-log.md, "bfloat16 training")."""
    doubled = 2 * TrainConfig().perturbed
    if not isinstance(in_place, bool):
        raise ValueError(f"soup_recipe: in_place must be True or False, got {in_place!r}")
    if not (isinstance(direction, int) and not isinstance(direction, bool) and 0 <= direction
            and (not in_place or direction <= doubled)):
        where = f"in [0, {doubled}] (the second parent's rule-made pairs)" if in_place else ">= 0"
        raise ValueError(f"soup_recipe: direction must be an int {where}, got {direction!r}")
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not 0 < scale <= 1:
        raise ValueError(f"soup_recipe: scale must be a number in (0, 1] (the share of each mix's pairs), "
                         f"got {scale!r}")
    first = scaled(TrainConfig(seed=seed, threads=threads, precision=precision), scale)
    second = scaled(TrainConfig(seed=seed + 1, perturbed=doubled - (direction if in_place else 0),
                                direction=direction, threads=threads, precision=precision), scale)
    return SoupRecipe((first, second), (round(1 - SOUP_ALPHA, 12), SOUP_ALPHA))


def average_files(files: list[Path], weights: tuple[float, ...]) -> dict:
    """The weighted average of the tensors of trained verifier files (float32; the files hold one set of
    names each, checked here)."""
    from safetensors.torch import load_file

    states = [load_file(str(path)) for path in files]
    for path, state in zip(files[1:], states[1:]):
        if set(state) != set(states[0]):
            raise ValueError(f"average_files: {path} holds other tensors than {files[0]}")
    return {name: sum(w * state[name].float() for w, state in zip(weights, states)) for name in states[0]}


def temperature(state: dict, pairs: list[EvidencePair], max_length: int) -> tuple[float, float, float]:
    """(T, log loss at T = 1, log loss at T): the factor on the logit of the model with ``state`` (its tensors
    as stored, float16) that minimises the log loss of ``sigmoid(T * logit)`` on ``pairs``, T in [e^-3, e^3]."""
    import torch
    from scipy.optimize import minimize_scalar

    labels = np.array([p.label for p in pairs], dtype=float)
    if len(set(labels.tolist())) != 2:
        raise ValueError(f"temperature: the held-out pairs need both labels, got {len(pairs)} pairs of one")
    torch.manual_seed(0)
    model, tokenizer = base_classifier(num_labels=1)
    model.load_state_dict({k: v.half().float() for k, v in state.items()}, strict=False)
    z = logits(model, tokenizer, pairs, max_length).astype(float)

    def loss(log_t: float) -> float:
        t = np.exp(log_t)
        return float(np.mean(labels * np.logaddexp(0, -t * z) + (1 - labels) * np.logaddexp(0, t * z)))

    best = minimize_scalar(loss, bounds=(-3.0, 3.0), method="bounded", options={"xatol": 1e-6})
    return float(np.exp(best.x)), loss(0.0), loss(float(best.x))


def finished(folder: Path, config: TrainConfig) -> Path | None:
    """The weights file of a training of ``config`` that already finished in ``folder`` (checked against its
    manifest's SHA-256), so that a rerun does not train it again; None when there is none yet, or when the
    file or its manifest is cut or changed (``train_verifier`` then writes them again from its checkpoint). A
    finished training of another configuration there is an error; a field added to ``TrainConfig`` after
    that training counts there as its default, as a checkpoint's does."""
    weights = folder / WEIGHTS_NAME
    if not weights.is_file():
        return None
    try:
        saved = checked_manifest(weights, folder / MANIFEST_NAME)["config"]
    except (VerifierError, KeyError):
        return None
    if changed := differs_from(saved, config):
        raise ValueError(f"train_soup: {folder} holds a model trained with another configuration (differs in "
                         f"{', '.join(changed)}); train into another folder, or delete that one to start again")
    return weights


def train_soup(out: str | Path, recipe: SoupRecipe | None = None, *, progress: bool = True,
               max_steps: int | None = None) -> Path:
    """Train each parent into ``out/parent-<i>`` (``train_verifier``; ``max_steps`` stops each one early, a
    rerun continues), then write their weighted average into ``out``; returns the weights file, or, when a
    training stopped early, that training's weights file, which does not exist yet."""
    import torch

    out = Path(out)
    recipe = recipe or soup_recipe()
    files = []
    for i, config in enumerate(recipe.parents):
        weights = (finished(out / f"parent-{i}", config)
                   or train_verifier(out / f"parent-{i}", config, progress=progress, max_steps=max_steps))
        if not weights.is_file():
            return weights
        files.append(weights)
    manifests = [json.loads((path.parent / MANIFEST_NAME).read_text(encoding="utf-8")) for path in files]
    first = manifests[0]
    manifest = {**{k: first[k] for k in ("base", "head", "frozen", "stored_as")},
                "soup": "the weighted average of the parents' tensors (Wortsman et al. 2022, model soups)",
                "recipe": asdict(recipe),
                "parents": [{"weight": w, **{k: m[k] for k in ("sha256", "steps", "train_pairs", "held_out_pairs",
                                                               "pairs_per_source", "history", "seconds_this_run")}}
                            for w, m in zip(recipe.weights, manifests)],
                "steps": sum(m["steps"] for m in manifests), "train_pairs": sum(m["train_pairs"] for m in manifests),
                "data_licences": first["data_licences"]}
    state = average_files(files, recipe.weights)
    if recipe.fit_temperature:
        mixes = [training_mix(config) for config in recipe.parents]
        trained = {(p.evidence, p.claim) for train, _ in mixes for p in train}
        held = list({(p.evidence, p.claim): p for _, pairs in mixes for p in pairs
                     if (p.evidence, p.claim) not in trained}.values())
        torch.set_num_threads(recipe.parents[0].threads)  # the same count gives the same T, as in training
        t, before, after = temperature(state, held, recipe.parents[0].max_length)
        state.update({name: state[name] * t for name in HEAD})
        manifest["temperature"] = {"t": t, "held_out_pairs": len(held), "log_loss_at_1": before, "log_loss": after}
    return write_weights(out, state, manifest)
