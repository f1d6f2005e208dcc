"""A soup of verifier trainings (Wortsman et al. 2022, "Model soups"): two models trained from the same base
weights on different mixes, averaged tensor by tensor. Each training is ``train_verifier``'s, seeded and
resumable; the average is remade from their files, so a rerun after an interrupt continues where it stopped.

    train_soup("runs/verifier-soup")                  # ~56 min on 2 cores: two trainings, then the average
    train_soup("runs/verifier-soup", soup_recipe(seed=1))   # the same recipe, another pair of seeds

``soup_recipe()`` is the recipe measured in docs/verifier.md ("Tried: soups ..."): the shipped mix and the mix
with twice the rule-made changed facts, each cut to 0.7 of its pairs, weight 0.7 on the second.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from calibration.fitting.verifier_training import MANIFEST_NAME, WEIGHTS_NAME, TrainConfig, train_verifier, write_weights

#: Every count of both mixes is multiplied by this (``scaled``): the two trainings fit the issue's hour.
SOUP_SCALE = 0.7
#: The second parent's weight in the average, as ``experiments/verifier_interpolation.py``'s rule chose it.
SOUP_ALPHA = 0.7


def scaled(config: TrainConfig, scale: float) -> TrainConfig:
    """``config`` with every count of its mix multiplied by ``scale``: each source's cap, the rule-made pairs,
    the other-words positives (a source holding fewer pairs than its cap comes whole, as before)."""
    if not scale > 0:
        raise ValueError(f"scaled: scale must be > 0, got {scale!r}")
    return replace(config, per_source={name: round(count * scale) for name, count in config.per_source.items()},
                   perturbed=round(config.perturbed * scale), other_words=round(config.other_words * scale))


@dataclass(frozen=True)
class SoupRecipe:
    #: The trainings, each from the base weights.
    parents: tuple[TrainConfig, ...]
    #: Each parent's weight in the average (they sum to 1).
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.parents) < 1 or len(self.parents) != len(self.weights):
            raise ValueError(f"SoupRecipe: {len(self.parents)} parents and {len(self.weights)} weights; "
                             f"one weight per parent, at least one parent")
        if any(not 0 <= w <= 1 for w in self.weights) or abs(sum(self.weights) - 1) > 1e-9:
            raise ValueError(f"SoupRecipe: weights must lie in [0, 1] and sum to 1, got {self.weights}")


def soup_recipe(seed: int = 0, threads: int = 2) -> SoupRecipe:
    """The measured recipe: the shipped mix (seed ``seed``) and twice its rule-made changed facts (seed
    ``seed + 1``), both scaled by ``SOUP_SCALE``, weights ``1 - SOUP_ALPHA`` and ``SOUP_ALPHA``."""
    first = scaled(TrainConfig(seed=seed, threads=threads), SOUP_SCALE)
    second = scaled(TrainConfig(seed=seed + 1, perturbed=2 * TrainConfig().perturbed, threads=threads), SOUP_SCALE)
    return SoupRecipe((first, second), (1 - SOUP_ALPHA, SOUP_ALPHA))


def average_files(files: list[Path], weights: tuple[float, ...]) -> dict:
    """The weighted average of the tensors of trained verifier files (float32; the files hold one set of
    names each, checked here)."""
    from safetensors.torch import load_file

    states = [load_file(str(path)) for path in files]
    for path, state in zip(files[1:], states[1:]):
        if set(state) != set(states[0]):
            raise ValueError(f"average_files: {path} holds other tensors than {files[0]}")
    return {name: sum(w * state[name].float() for w, state in zip(weights, states)) for name in states[0]}


def train_soup(out: str | Path, recipe: SoupRecipe | None = None, *, progress: bool = True,
               max_steps: int | None = None) -> Path:
    """Train each parent into ``out/parent-<i>`` (``train_verifier``; ``max_steps`` stops each one early, a
    rerun continues), then write their weighted average into ``out``; returns the weights file, which does not
    exist yet when a training stopped early."""
    out = Path(out)
    recipe = recipe or soup_recipe()
    files = []
    for i, config in enumerate(recipe.parents):
        weights = train_verifier(out / f"parent-{i}", config, progress=progress, max_steps=max_steps)
        if not weights.is_file():
            return out / WEIGHTS_NAME
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
                "history": manifests[-1]["history"], "data_licences": first["data_licences"]}
    return write_weights(out, average_files(files, recipe.weights), manifest)
