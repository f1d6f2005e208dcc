"""The verifier's checks of a claim against its opposite and against contradicting sentences.

**Opposites** (``Verifier(check_opposites=True)``, the default). A claim that copies its evidence but says
"fell" where the evidence says "rose" (and not "fell"; the direction words of ``judges.data.opposites``) is
scored again with that word turned back, against the same evidence unit. It keeps min(P, sigmoid(logit P -
logit P(opposite))): supported only as far as the evidence prefers it to its own opposite. Why: the shipped
cross-encoder reads such a copy as near a faithful paraphrase in absolute terms, but shown the claim and its
opposite it mostly prefers the evidence's own word.

**Contradictions anywhere in the evidence** (``Verifier(check_contradictions=True)``, the default). The
check above reads the claim's best unit only, so a sentence about something else that the verifier happens
to score higher hid the contradiction, and adding such a sentence raised the claim's score.
``check_against_contradictions`` reads every evidence sentence that shares the claim's frame and differs in
one detail (``judges.data.contrasts``: a number, date or name, or a direction word). Where the sentence
supports the claim with its detail (P >= ``SUPPORTED``) more than the claim itself, it contradicts the claim.
The claim then keeps min(P, sigmoid(logit P(claim | sentence) - logit P(contrast | sentence))), unless
another unit supports it: a long article's sentences about alike events share frames. Both terms are read
against that sentence alone, so sentences added to the evidence that support nothing can add a
contradiction but never lift one.

Both were chosen by trials with a rule written before each ran; their numbers are in docs/verifier-log.md
("Opposites round 2", "Distractors round 2") and their effect on each set in
docs/verifier.md.

Owns: the checks and their formula. Must not load a model (the caller's scorer scores the opposites).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from judges.data.contrasts import SAME_SUBJECT, contrasts, frame_words
from judges.data.language import tokenize
from judges.data.opposites import direction_contrasts

#: At most this many opposites a claim, in the claim's word order.
MAX_OPPOSITES = 4
#: The probability at which the verifier reads a pair as supported: a sentence contradicts a claim only where
#: it supports the claim's contrast at least this much, and overrides the claim's best unit only where that
#: unit is under it (or holds the sentence).
SUPPORTED = 0.5


def logit(p: float) -> float:
    """log(p / (1 - p)), p kept within [1e-6, 1 - 1e-6]."""
    p = min(max(p, 1e-6), 1 - 1e-6)
    return float(np.log(p) - np.log1p(-p))


def sigmoid(x: float) -> float:
    """1 / (1 + exp(-x)), without overflow for very negative x."""
    return float(np.exp(-np.logaddexp(0.0, -x)))


def check_against_opposites(rows: list[dict[str, Any]],
                            probabilities: Callable[[Sequence[tuple[str, str]]], np.ndarray],
                            opposites: Callable[[str, str], list[str]] = direction_contrasts) -> None:
    """Each ``Verifier.support`` row (``claim``, ``probability``, ``chunk``) whose claim has opposites
    (``opposites(claim, chunk)``, the first ``MAX_OPPOSITES``; ``direction_contrasts`` unless an experiment
    tries other edits) gets them scored by ``probabilities`` against that chunk, all rows in one call; its
    ``probability`` becomes min(P, sigmoid(logit P - logit P(likeliest opposite))) and ``opposite`` /
    ``opposite_probability`` name that opposite. Other rows are left as they are."""
    rivals = [opposites(row["claim"], row["chunk"])[:MAX_OPPOSITES] for row in rows]
    wanted = [(row["chunk"], text) for row, mine in zip(rows, rivals) for text in mine]
    if not wanted:
        return
    scored = iter(probabilities(wanted))
    for row, mine in zip(rows, rivals):
        if not mine:
            continue
        found = [float(next(scored)) for _ in mine]
        likeliest = max(range(len(mine)), key=lambda k: (found[k], -k))
        margin = logit(row["probability"]) - logit(found[likeliest])
        row["probability"] = min(row["probability"], sigmoid(margin))
        row["opposite"], row["opposite_probability"] = mine[likeliest], found[likeliest]


def about_the_same(claim: str, contradicting: str, supporting: str) -> bool:
    """Whether the unit supporting ``claim`` holds every frame word of the claim that the contradicting
    sentence holds: the same subject, not another that shares the claim's other words ("A spider has eight
    legs." does not stand for "Insects have eight legs." against "Insects have six legs.")."""
    shared = frame_words(claim) & set(tokenize(contradicting))
    return shared <= set(tokenize(supporting))


def check_against_contradictions(rows: list[dict[str, Any]], sentences: Sequence[str],
                                 probabilities: Callable[[Sequence[tuple[str, str]]], np.ndarray], *,
                                 swaps: bool | str = False) -> None:
    """Each ``Verifier.support`` row's claim against every sentence of ``sentences`` with contrasts for it
    (``judges.data.contrasts.contrasts``), all pairs scored in one call: a sentence whose likeliest contrast
    has P >= ``SUPPORTED`` and above the claim's P against that sentence contradicts the claim. Where the
    claim's best unit holds that sentence, or supports the claim nowhere (P < ``SUPPORTED``), the row then keeps
    min(P, sigmoid(logit P(claim | sentence) - logit P(contrast | sentence))) over its contradictions;
    ``contradiction`` names the strongest ({"sentence", "contrast", "probability": P(contrast | sentence),
    "claim_probability": P(claim | sentence)}), and where it lowered P, ``chunk`` and ``sentence`` become that
    sentence (what the claim was judged against). Other rows get ``contradiction`` None."""
    found = [(i, sentence, mine) for i, row in enumerate(rows) for sentence in sentences
             if (mine := contrasts(row["claim"], sentence, swaps=swaps))]
    for row in rows:
        row.setdefault("contradiction", None)
    if not found:
        return
    wanted = [(sentence, text) for i, sentence, mine in found for text in (rows[i]["claim"], *mine)]
    scored = iter(probabilities(wanted))
    strongest: dict[int, tuple[float, dict[str, Any]]] = {}
    for i, sentence, mine in found:
        claim_p = float(next(scored))
        rivals = [float(next(scored)) for _ in mine]
        likeliest = max(range(len(mine)), key=lambda k: (rivals[k], -k))
        if rivals[likeliest] < SUPPORTED or rivals[likeliest] <= claim_p:
            continue
        if rows[i]["probability"] >= SUPPORTED and sentence not in rows[i]["chunk"] and (
                swaps not in SAME_SUBJECT or about_the_same(rows[i]["claim"], sentence, rows[i]["chunk"])):
            continue  # supported by another unit: a long text's other sentence about something alike
        capped = sigmoid(logit(claim_p) - logit(rivals[likeliest]))
        if i not in strongest or capped < strongest[i][0]:
            strongest[i] = capped, {"sentence": sentence, "contrast": mine[likeliest],
                                    "probability": rivals[likeliest], "claim_probability": claim_p}
    for i, (capped, contradiction) in strongest.items():
        row = rows[i]
        row["contradiction"] = contradiction
        if capped <= row["probability"]:
            row["probability"] = capped
            row["chunk"] = row["sentence"] = contradiction["sentence"]
