"""Can a few more minutes of training teach the shipped verifier that faithful paraphrases are supported,
without losing the dialogue sets? Prints one line per model: the contrastive set by kind, BEGIN WoW, Q2.

    .venv/bin/python experiments/verifier_continuation.py                 # ~8 min training + ~1 min scoring
    .venv/bin/python experiments/verifier_continuation.py --begin         # BEGIN CMU/TC turns mixed in (x2)

The shipped verifier scores the hand-written paraphrases of ``calibration/verifier/sets/contrastive.jsonl`` P = 0.33 on
average (wrong: they are supported). This continues its training (one pass, AdamW 2e-5, batches of 16,
seeded) on ``--pairs`` positives whose claims are in other words than their evidence (MNLI/SNLI
entailments, VitaminC, ExpertQA and FactCheck-GPT supported claims) against as many negatives, half from
the same corpora and half rule-made copy-with-a-changed-fact pairs (``calibration.verifier.perturb``), and with
``--begin`` the BEGIN CMU-DoG and Topical-Chat turns twice. Measured on the contrastive set (all of it; never
trained on) and the test halves of BEGIN WoW and Q2 (``experiments/verifier_agreement.py``'s split; both
held out of all training here): ROC-AUC of the weakest sentence's probability. The model is written to
``--out``; nothing here changes the shipped verifier.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import sets, split  # noqa: E402
from verifier_interpolation import weakest  # noqa: E402

from calibration.verifier.pairs import training_pairs  # noqa: E402
from calibration.verifier.mix import begin_pairs, contrastive_set, rule_pairs  # noqa: E402
from calibration.verifier.training import roc_auc  # noqa: E402
from judges.lm.verifier import Verifier  # noqa: E402
from judges.lm.verifier.files import load_shipped  # noqa: E402

SOURCES = {"mnli": 9815, "snli": 6000, "expertqa": 3000, "factcheck_gpt": 3000, "vitaminc_real": 6000}


def mix(pairs: int, with_begin: bool, seed: int) -> list:
    rng = random.Random(seed)
    corpus = training_pairs(tuple(SOURCES), SOURCES, seed=seed)
    positives = [p for p in corpus if p.label == 1]
    negatives = [p for p in corpus if p.label == 0]
    changed = [p for p in rule_pairs(corpus, 2 * pairs, seed) if p.label == 0]
    train = (rng.sample(positives, min(pairs, len(positives))) + rng.sample(negatives, pairs // 2)
             + rng.sample(changed, min(pairs // 2, len(changed))))
    if with_begin:
        train += begin_pairs(("cmu", "tc")) * 2
    rng.shuffle(train)
    return train


def continue_training(train: list, out: Path, seed: int) -> Path:
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(2)
    model, tokenizer, _ = load_shipped()
    optimizer = torch.optim.AdamW([p for n, p in model.named_parameters() if "word_embeddings" not in n],
                                  lr=2e-5, weight_decay=0.01)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    for at in range(0, len(train), 16):
        batch = train[at:at + 16]
        encoded = tokenizer([p.evidence for p in batch], [p.claim for p in batch], padding=True,
                            truncation="longest_first", max_length=160, return_tensors="pt")
        loss = loss_fn(model(**encoded).logits[:, 0], torch.tensor([float(p.label) for p in batch]))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def measured(verifier: Verifier) -> str:
    watch = contrastive_set()
    p = verifier.probabilities([(x.evidence, x.claim) for x in watch])
    kinds = collections.defaultdict(list)
    for pair, value in zip(watch, p):
        kinds[pair.source.removeprefix("contrastive_")].append(value)
    parts = [f"contrastive {roc_auc([x.label for x in watch], p):.3f} ("
             + ", ".join(f"{k} {np.mean(v):.2f}" for k, v in sorted(kinds.items())) + ")"]
    for name, (samples, labels) in sets(summeval_limit=2).items():
        if name not in ("begin-wow", "q2"):
            continue
        _, test = split(labels, 0)
        parts.append(f"{name} {roc_auc(np.asarray(labels)[test], weakest(verifier, samples, test)):.3f}")
    return "; ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3000, help="positives (and as many negatives)")
    parser.add_argument("--begin", action="store_true", help="mix in BEGIN's CMU-DoG and Topical-Chat turns, twice")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out = Path(args.out or f"runs/verifier-continued{'-begin' if args.begin else ''}")
    train = mix(args.pairs, args.begin, args.seed)
    started = time.perf_counter()
    continue_training(train, out, args.seed)
    print(f"{len(train)} pairs ({sum(p.label for p in train)} supported), {time.perf_counter() - started:.0f} s")
    print("shipped:   " + measured(Verifier()))
    print("continued: " + measured(Verifier(str(out))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
