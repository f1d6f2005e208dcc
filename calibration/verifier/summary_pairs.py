"""SummEval's summaries as (evidence, claim, supported?) training pairs for the verifier, from articles the
agreement table never reads.

    summary_pairs(2000, seed=1)   # tokens counted by the base model's tokenizer (``base_token_counts``)

SummEval gives one consistency score per summary (the mean of three experts' 1-5), not one per sentence, so
only sentences whose label follows from it are used:

- every sentence of a summary all three experts scored 5 is supported by its article (1);
- a summary scored 3 or less names its wrong sentence only when exactly one of its sentences is not copied
  word for word from the article: that sentence is not supported (0). The other sentences of such
  summaries, and every summary scored over 3 and under 5, are not used;
- each supported sentence also gives one rule-made negative: the same sentence with one fact changed (a
  number, a negation, a direction, or one of the article's names swapped for another of its names: the
  summaries are lower case, so ``perturb.swap_name`` finds no names in them), so that copied words alone
  never mean supported here either.

The evidence of a sentence is the window of its article the verifier itself would shortlist first: the
article cut as ``Verifier.chunks`` cuts it (``sentence_windows``, ``chunk_tokens`` tokens as
``token_counts`` counts them), the window sharing most of the sentence's words (``shortlist``). Each
article is one ``group``, so a held-out split never puts one article on both sides.

The first ``HELD_OUT_ARTICLES`` articles in file order (A0-A39, the first 640 summaries) are never used:
the agreement table (``experiments/verifier_agreement.py``) measures on the first 320, and 320 more stay
unread for measuring.

Owns: turning SummEval rows into labelled pairs. Must not fit or score anything.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

from calibration.data.loaders import load_summeval
from calibration.verifier.pairs import NOT_SUPPORTED, SUPPORTED, EvidencePair
from calibration.verifier.perturb import MIN_WORDS, change_number, flip_direction, flip_negation, names_in
from judges.data.language import split_sentences, tokenize
from judges.lm.files import embedded_embedder_path
from judges.lm.verifier.units import sentence_windows, shortlist

#: Articles (in file order) never used for training: the agreement table reads the first 20.
HELD_OUT_ARTICLES = 40
#: A summary at or under this mean consistency is inconsistent enough to name a wrong sentence.
INCONSISTENT_AT = 3.0


def copied(sentence: str, article: str) -> bool:
    """Whether ``sentence``'s words occur in ``article`` as one run, in order (case and punctuation aside)."""
    words = tokenize(sentence)
    return bool(words) and f" {' '.join(words)} " in f" {' '.join(tokenize(article))} "


def swap_lower_name(sentence: str, rng: random.Random, names: Sequence[str]) -> str | None:
    """``sentence`` (lower case) with one of ``names`` (lower case) it holds replaced by another of them it does
    not hold, of the same number of words where there is one. None when it holds none or no other is left."""
    present = [n for n in names if re.search(rf"\b{re.escape(n)}\b", sentence)]
    others = [n for n in names if n not in present and not any(n in p or p in n for p in present)]
    if not present or not others:
        return None
    target = rng.choice(present)
    same_size = [n for n in others if len(n.split()) == len(target.split())]
    return re.sub(rf"\b{re.escape(target)}\b", rng.choice(same_size or others), sentence, count=1)


def changed_fact(sentence: str, article: str, rng: random.Random) -> tuple[str, str] | None:
    """(claim, kind): ``sentence`` with one fact changed by the first rule of a random order that applies and
    gives a sentence not in ``article``; None when none does."""
    names = list(dict.fromkeys(n.lower() for n in names_in(article) if len(n) > 2))
    rules = {"number": lambda: change_number(sentence, rng, avoid=article),
             "negation": lambda: flip_negation(sentence, rng),
             "direction": lambda: flip_direction(sentence, rng),
             "name": lambda: swap_lower_name(sentence, rng, names)}
    kinds = sorted(rules)
    rng.shuffle(kinds)
    for kind in kinds:
        claim = rules[kind]()
        if claim and claim != sentence and claim.lower() not in article.lower():
            return claim, kind
    return None


def base_token_counts() -> Callable[[list[str]], list[int]]:
    """Token counts by the base model's tokenizer (the shipped verifier's: the same vocabulary)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(embedded_embedder_path()), local_files_only=True)
    return lambda texts: [len(tokenizer.tokenize(text)) for text in texts]


def summary_pairs(n: int, seed: int, token_counts: Callable[[list[str]], list[int]] | None = None,
                  chunk_tokens: int = 128) -> list[EvidencePair]:
    """Up to ``n`` supported summary sentences (drawn with ``seed`` when there are more), each with its
    rule-made negative where a rule applies, and every naturally unsupported sentence (see the module
    docstring); sources ``summeval_supported``, ``summeval_changed_<kind>``, ``summeval_unsupported``.
    ``token_counts`` defaults to ``base_token_counts()``. ``n`` <= 0 gives none; a non-integer is a ValueError."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"summary_pairs: n (TrainConfig.summeval) must be an int, got {n!r}")
    if n <= 0:
        return []
    token_counts = token_counts or base_token_counts()
    data = load_summeval("consistency")
    held = list(dict.fromkeys(m["article_id"] for m in data.meta))[:HELD_OUT_ARTICLES]
    windows: dict[str, list[str]] = {}
    supported, unsupported = [], []
    for sample, score, meta in zip(data.dataset, data.labels, data.meta):
        if meta["article_id"] in held:
            continue
        article = sample.reference_contexts[0]
        sentences = [s for s in split_sentences(sample.response) if len(s.split()) >= MIN_WORDS]
        if score >= 5.0 - 1e-9:
            supported += [(article, s, meta["article_id"]) for s in sentences]
        elif score <= INCONSISTENT_AT:
            fresh = [s for s in sentences if not copied(s, article)]
            if len(fresh) == 1:
                unsupported.append((article, fresh[0], meta["article_id"]))
    rng = random.Random(f"{seed}:summeval")
    if len(supported) > n:
        supported = rng.sample(supported, n)

    def window(article: str, claim: str) -> str:
        if article not in windows:
            windows[article] = [w for w, _ in sentence_windows([(article, split_sentences(article) or [article])],
                                                               token_counts, chunk_tokens)]
        units = windows[article]
        return units[shortlist(units, [claim], 1)[0][0]]

    pairs = [EvidencePair(window(a, s), s, NOT_SUPPORTED, "summeval_unsupported", f"summeval:{art}")
             for a, s, art in unsupported]
    for article, sentence, art in supported:
        evidence = window(article, sentence)
        pairs.append(EvidencePair(evidence, sentence, SUPPORTED, "summeval_supported", f"summeval:{art}"))
        changed = changed_fact(sentence, article, rng)
        if changed:
            pairs.append(EvidencePair(evidence, changed[0], NOT_SUPPORTED, f"summeval_changed_{changed[1]}",
                                      f"summeval:{art}"))
    return pairs
