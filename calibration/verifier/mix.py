"""The groundedness verifier's training mix: which pairs a ``TrainConfig`` draws, and from where.

    train, held = training_mix(TrainConfig())        # the shipped first parent's mix (reads the shared data)

The sources, each mapped to supported / not supported where it is loaded: the public corpora of
``calibration.verifier.pairs`` (q2_wow held out), rule-made copy-with-a-changed-fact pairs
(``calibration.verifier.perturb``) made from the corpora's own evidence, BEGIN dev turns of the parts named in
``begin_parts`` (the other parts and the demo's slice stay out), supported pairs in other words drawn again
(``other_words``), SummEval summary sentences (``summeval``, ``calibration.verifier.summary_pairs``) and minimal
pairs of a direction word flipped and kept (``direction``). Every
draw is seeded from ``TrainConfig.seed`` with a stream of its own, so one option's count never moves another's
pairs (the groups it adds do move the held-out split and the order). The first hand-written contrastive set is
here too: watched while training, never trained on.

Owns: assembling and splitting the mix. Must not train, score, or read the sets reserved for independent
evaluation.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

from calibration.data.loaders import load_begin, load_begin_slice
from calibration.verifier.contrastive import load_contrastive
from calibration.verifier.pairs import EvidencePair, training_pairs
from calibration.verifier.perturb import as_reply, direction_minimal_pair, names_in, perturbed_pairs
from calibration.verifier.summary_pairs import summary_pairs
from calibration.verifier.config import TrainConfig


def begin_pairs(parts: Sequence[str]) -> list[EvidencePair]:
    """BEGIN dev turns as pairs: knowledge -> evidence, response -> claim, fully attributable -> 1. The turns
    of the BEGIN slice bundled for ``make demo`` are left out: the demo measures the verifier on them."""
    if not parts:
        return []
    data = load_begin(parts=tuple(parts))
    demo = {(s.retrieved_contexts[0], s.response) for s in load_begin_slice().dataset}
    return [EvidencePair(s.retrieved_contexts[0], s.response, int(y), f"begin_{m['part']}", f"begin:{i}")
            for i, (s, y, m) in enumerate(zip(data.dataset, data.labels, data.meta))
            if (s.retrieved_contexts[0], s.response) not in demo]


def shuffled_evidence(pairs: Sequence[EvidencePair], rng: random.Random) -> list[str]:
    """The distinct evidence texts of ``pairs`` of 40-1,200 characters (what rules make pairs from), in the
    order ``rng`` shuffles them into."""
    evidence = list(dict.fromkeys(p.evidence for p in pairs if 40 <= len(p.evidence) <= 1200))
    rng.shuffle(evidence)
    return evidence


def rule_pairs(pairs: Sequence[EvidencePair], n: int, seed: int, as_replies: float = 0.0,
               compressed: float = 0.0, compressed_negatives: bool = True) -> list[EvidencePair]:
    """``n`` copy-with-a-changed-fact pairs (and exact or trimmed copies as positives) made by rules from the
    evidence of ``pairs`` (training evidence only); a share ``as_replies`` of them, of either label, with the
    claim dressed as a chat reply (``as_reply``; source ``perturbed_<kind>_reply``); a share ``compressed``
    of the evidence sentences compressed first (``perturbed_pairs(compress=, compress_negatives=)``)."""
    rng = random.Random(f"{seed}:perturbed")
    evidence = shuffled_evidence(pairs, rng)
    pool = [name for text in evidence[:3000] for name in names_in(text)]
    out: list[EvidencePair] = []
    for text in evidence:
        for claim, label, kind in perturbed_pairs(text, rng, pool, compress=compressed,
                                                  compress_negatives=compressed_negatives):
            out.append(EvidencePair(text, claim, label, f"perturbed_{kind}", f"perturbed:{len(out)}"))
        if len(out) >= n:
            break
    dress = random.Random(f"{seed}:as-replies")
    return [EvidencePair(p.evidence, as_reply(p.claim, dress), p.label, f"{p.source}_reply", p.group)
            if dress.random() < as_replies else p for p in out[:n]]


def direction_pairs(pairs: Sequence[EvidencePair], n: int, seed: int) -> list[EvidencePair]:
    """``n // 2`` pairs of each label (an odd ``n`` gives ``n - 1`` pairs; fewer when the evidence runs out)
    from the evidence of ``pairs``: per evidence text with a direction word, the sentence with it flipped
    to its antonym (label 0, source ``direction_flipped``) and the sentence as it stands (label 1,
    ``direction_kept``), one group, so both land on one side of the split
    (``perturb.direction_minimal_pair``). A random stream of its own, so the rest of the mix draws the same
    pairs with or without them; their groups do change the split and the order (``training_mix``)."""
    if n <= 0:
        return []
    rng = random.Random(f"{seed}:direction")
    out: list[EvidencePair] = []
    for text in shuffled_evidence(pairs, rng):
        if len(out) + 2 > n:
            break
        if made := direction_minimal_pair(text, rng):
            group = f"direction:{len(out)}"
            out += [EvidencePair(text, made[0], 0, "direction_flipped", group),
                    EvidencePair(text, made[1], 1, "direction_kept", group)]
    return out


#: Sources whose supported claims restate their evidence in other words (entailments, verified claims).
OTHER_WORDS_SOURCES = {"mnli": 9815, "snli": 6000, "expertqa": 3000, "factcheck_gpt": 3000, "vitaminc_real": 6000}


def other_words_positives(n: int, seed: int) -> list[EvidencePair]:
    """``n`` supported pairs from ``OTHER_WORDS_SOURCES`` (a draw of its own, seeded apart from the mix's, so
    some repeat pairs of the mix: an up-weighting of faithful claims in other words), marked as their own
    source (``other_words_<source>``) in the manifest's counts."""
    if n <= 0:
        return []
    corpus = training_pairs(tuple(OTHER_WORDS_SOURCES), OTHER_WORDS_SOURCES, seed=seed + 1)
    positives = [p for p in corpus if p.label == 1]
    chosen = random.Random(f"{seed}:other-words").sample(positives, min(n, len(positives)))
    return [EvidencePair(p.evidence, p.claim, 1, f"other_words_{p.source}", p.group) for p in chosen]


def training_mix(config: TrainConfig) -> tuple[list[EvidencePair], list[EvidencePair]]:
    """(train, held-out) pairs: the seeded mix of ``config`` (validated when it was made), split so no group
    is on both sides."""
    corpus = training_pairs(tuple(config.per_source), config.per_source, seed=config.seed)
    pairs = (corpus + rule_pairs(corpus, config.perturbed, config.seed, config.as_replies, config.compressed,
                                 config.compressed_negatives)
             + begin_pairs(config.begin_parts) * config.begin_repeat
             + other_words_positives(config.other_words, config.seed) + summary_pairs(config.summeval, config.seed)
             + direction_pairs(corpus, config.direction, config.seed))
    rng = random.Random(f"{config.seed}:split")
    groups = sorted({p.group for p in pairs})
    rng.shuffle(groups)
    held, count = set(), 0
    sizes = Counter(p.group for p in pairs)
    for group in groups:
        if count >= config.held_out:
            break
        held.add(group)
        count += sizes[group]
    train = [p for p in pairs if p.group not in held]
    rng.shuffle(train)
    return train, [p for p in pairs if p.group in held]


def contrastive_set() -> list[EvidencePair]:
    """The hand-written copy-with-a-changed-fact set, watched while training (never trained on)."""
    return [EvidencePair(r["evidence"], r["response"], int(r["label"]), f"contrastive_{r['kind']}", str(i))
            for i, r in enumerate(load_contrastive())]
