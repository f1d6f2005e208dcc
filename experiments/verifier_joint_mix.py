"""A verifier trained from scratch with faithful claims in other words up-weighted in the mix: does one joint
training reach a point the shipped verifier and its paraphrase continuation cannot (both BEGIN WoW and the
contrastive set)? Prints the same measurements as ``experiments/verifier_interpolation.py``.

    .venv/bin/python experiments/verifier_joint_mix.py                 # ~40 min training on 2 cores + ~1 min
    .venv/bin/python experiments/verifier_joint_mix.py --other-words 8000 --out runs/verifier-joint
    .venv/bin/python experiments/verifier_joint_mix.py --other-words 8000 --perturbed 20000 --scale 1.25 \
        --out runs/verifier-joint3                                 # every count x1.25: ~25% more steps
    .venv/bin/python experiments/verifier_joint_mix.py --other-words 8000 --perturbed 20000 --scale 1.25 \
        --begin-repeat 3 --out runs/verifier-joint4                # and the BEGIN dev pairs three times
    .venv/bin/python experiments/verifier_joint_mix.py --other-words 0 --seed 1 --out runs/verifier-seed1
                                                                   # the shipped mix, another seed: ~35 min
    .venv/bin/python experiments/verifier_joint_mix.py --other-words 8000 --perturbed 20000 --scale 1.25 \
        --as-replies 0.5 --out runs/verifier-joint3-replies       # half the rule-made pairs as chat replies
    .venv/bin/python experiments/verifier_joint_mix.py --other-words 0 --perturbed 20000 \
        --out runs/verifier-facts2                                 # twice the changed facts, nothing else: ~40 min
    .venv/bin/python experiments/verifier_joint_mix.py --other-words 0 --perturbed 20000 --seed 1 \
        --out runs/verifier-facts2-seed1                           # the same mix, another seed: ~42 min
    .venv/bin/python experiments/verifier_joint_mix.py --other-words 0 --perturbed 20000 --compressed 1 \
        --average-from 0.75 --out runs/verifier-facts2-compressed  # and every compressible sentence compressed
    .venv/bin/python experiments/verifier_joint_mix.py --other-words 0 --perturbed 20000 --compressed 1 \
        --compressed-positives-only --out runs/verifier-facts2-cpos  # compressions as positives only
    .venv/bin/python experiments/verifier_joint_mix.py --other-words 0 --perturbed 20000 --scale 0.7 --seed 1 \
        --out runs/verifier-facts2-seed1-s07                       # a shorter partner for a soup: ~31 min
    .venv/bin/python experiments/verifier_joint_mix.py --other-words 0 --perturbed 20000 --scale 0.5 --seed 1 \
        --out runs/verifier-facts2-seed1-s05                       # shorter still: ~22 min
    .venv/bin/python experiments/verifier_joint_mix.py --other-words 0 --scale 0.7 \
        --out runs/verifier-shipped-s07                            # the shipped recipe cut to 0.7: ~25 min

The shipped mix (``TrainConfig()``) plus ``--other-words`` supported pairs drawn again from MNLI/SNLI
entailments, VitaminC, ExpertQA and FactCheck-GPT (``verifier_mix.other_words_positives``); everything
else (seed 0, steps per pair, schedule, held-out sets) as for the shipped model. ``--scale`` multiplies
every count of the mix (``verifier_soup.scaled``: each source's cap, ``--perturbed``, ``--other-words``; a source holding fewer pairs
than its cap comes whole, as before) to train longer on more distinct pairs rather than repeating them. Resumable (rerun the same
command). The shipped verifier is measured next to it; nothing here changes the shipped files.

``--seed`` trains the same mix with another seed (which pairs are drawn, their order, the head's start):
``--other-words 0 --seed 1`` is the shipped model's recipe again, to measure how far two trainings of one mix
land apart, the noise every rule below compares against (added 2026-11-26, before its first run).

``--as-replies`` dresses that share of the rule-made pairs, of either label, as chat replies ("yes, ...", "did
you know ...?", lower case; ``perturb.as_reply``) after they are made: the same pairs, only the claim's form
changes (added 2026-11-26, before its first run). The question it asks: the x1.25 mix lost BEGIN WoW (train
0.936 -> 0.926) while it gained the contrastive set (0.716 -> 0.811). BEGIN's responses are chat replies,
often lower-cased and opened with "yes," or "i think", while every rule-made pair was a bare sentence; if
the verifier learnt "any change to copied words = unsupported" from them, dressing both labels alike should
win BEGIN WoW back and keep the contrastive gain. Run with the x1.25 mix (the command above), seed 0.
(Noted during the run, before its results: the base model's tokenizer is uncased and splits punctuation
off, so lower case and spacing are invisible to it; what it sees is the opening, which two thirds of the
dressed pairs get: a third of the rule-made pairs at ``--as-replies 0.5``.)

``--other-words 0 --perturbed 20000`` (added 2026-11-26, before its first run): the shipped mix with twice the
rule-made changed facts and no other-words positives. The question: ``experiments/verifier_leniency.py`` found
the x1.25 mixes lenient with BEGIN WoW turns people did not find attributable (21% -> 26% of them at P >= 0.5);
the other-words positives, which teach "new words can be supported", are the suspect. Does doubling the
changed facts alone raise the contrastive set (through the changed-fact side) and keep BEGIN WoW? Same rule
as below; a model that passes it is not shipped the same day (the agreement tables, the demo and CI follow).

``--other-words 0 --perturbed 20000 --seed 1`` (added 2026-11-26 in session 16, before its first run): seed 0 of
that mix passed the rule below (BEGIN WoW train 0.936, Q2 0.649, contrastive 0.832) but lost SummEval's train
half (0.755 -> 0.695). The question: is either a seed's luck? Two seeds of the shipped recipe differed by 0.002
on SummEval's train half and of the x1.25 mix by 0.014. The mix counts as passing only if this seed passes the
same rule too; if its SummEval train half is again below 0.735 (0.02 under the shipped), the fall belongs to the
mix, not the seed, and the mix needs faithful compressed restatements before it can ship.

``--compressed 1`` (added 2026-11-26 in session 16, before its first run): that mix with every evidence
sentence that can be compressed faithfully compressed before the rules make pairs from them
(``calibration.verifier.compress``: an opening of time dropped, an added clause cut off the end, an age dropped;
the same 20,000 rule-made pairs, now with compressions as positives and with a changed fact alike). First
declared at 0.5; after a review made the rules stricter, 0.5 gave 531 compressed positives and 857
compressed negatives of the 20,000, so it was raised to 1 before the run. The question: seed 0 of the
changed-facts-only mix lost SummEval's train half by flagging faithful compressed summaries (supported
summaries under 0.5: 16.1% -> 21.8%). Does it win SummEval's train half back to 0.735 or more while still
passing the rule below? Seed 0.

``--average-from 0.75`` (added 2026-11-26 in session 16, before its first run) also writes the uniform average
of the weights over the last quarter of the steps (a snapshot every 10 steps) into ``<out>/averaged``, from the
same run: the average never feeds back into training, so the final model is exactly the one the run would give
without it. The question: the soup of two seeds' models raised BEGIN WoW's train half (0.941 against 0.936);
does an average within one run (no extra training time) do anything like it? The same rule below applies to
the averaged model; it is measured next to the final one.

``--compressed-positives-only`` (added 2026-11-27, before its first run): ``--compressed 1`` with the facts
changed only in the sentences as they stand (``TrainConfig(compressed_negatives=False)``), so compressions
come as positives only. The question: the compressed run won SummEval's train half back (0.695 -> 0.737) but
lost BEGIN WoW's (0.936 -> 0.907), and ``experiments/verifier_leniency.py`` found it stricter with BEGIN WoW's
attributable turns (11.7% under 0.5, against 6.7% shipped and 7.8% without compressions), not more lenient.
Its rule-made pairs held 1,726 compressions with a changed fact against 1,067 faithful ones; if those
negatives taught "a shortened restatement may hide a change", dropping them should keep SummEval's train
half at 0.735 or more and bring BEGIN WoW's back within the rule below. The rule below, plus SummEval's
train half >= 0.735 (``experiments/verifier_windows.py --chunk-tokens 128 --tops 2``), seed 0; a model that
passes is not shipped before a second seed passes too. If BEGIN WoW stays down, the compressions' cost on
dialogue is not their negatives.

``--other-words 0 --perturbed 20000 --scale 0.7 --seed 1`` (added 2026-11-27, before its first run): a soup
(``experiments/verifier_interpolation.py``, alpha 0.7 as its unchanged rule picked) of the shipped verifier
with the full-length run of this mix, seed 1, scored BEGIN WoW train 0.935, Q2 train 0.649, contrastive 0.842
and SummEval train 0.739: every part of the rule below but the training time (two trainings, 34.6 + 32.4
min). The question: does a soup with a run of the same mix cut to 0.7 of its pairs (~23 min, so the two
trainings fit the hour) still pass, with the interpolation's rule choosing alpha and SummEval's train half
>= 0.735? If it does, the soup becomes a candidate recipe for ``make verifier`` (and needs a second seed
before it ships); if not, the soup's gain needs the full second training.
``--scale 0.5`` of the same (added 2026-11-27, before its first run, after the x0.7 soup passed every part
of the rule but the hour: 34.6 + 30.6 min): a partner of ~22 min, so that the shipped recipe as it is and the
partner fit the hour together. The question: does its soup (alpha by the interpolation's rule) still pass,
SummEval's train half >= 0.735 included? One seed (1); a pass is not shipped before a second seed passes.
``--other-words 0 --scale 0.7`` (added 2026-11-27 in session 18, before its first run, after the x0.5 partner's
soup failed: contrastive 0.746): the shipped recipe itself (seed 0) cut to 0.7 of its pairs, ~25 min, as the
other parent of a soup with the x0.7 partner (30.6 min; together ~56 min, inside the hour). The question:
does ``experiments/verifier_interpolation.py --base runs/verifier-shipped-s07/model --continued
runs/verifier-facts2-seed1-s07/model`` still pass the rule below at the alpha its rule picks (measured
against the shipped verifier, as before), SummEval's train half >= 0.735 included, with the two trainings'
measured times adding up to <= 60 min? If it does, the soup becomes ``make verifier``'s recipe (after a
second seed of the pair passes too); if not, the shortened first parent costs what the soup gained.
Its answer (docs/verifier-experiments.md): yes, at alpha 0.7 (BEGIN WoW train 0.932, Q2 0.681, contrastive 0.812,
SummEval train 0.768; 21.8 + 30.6 = 52.4 min). Then (added 2026-11-27 in session 18, before its run) the recipe again
with the next seeds, as ``calibration.verifier.soup.train_soup("runs/verifier-soup-seed1",
soup_recipe(seed=1))`` trains it (the shipped mix x0.7 seed 1, the changed facts x2 x0.7 seed 2, averaged at the
recipe's fixed alpha 0.7, the interpolation's grid printed beside it). The question: does the recipe pass the
same rule with other seeds? If it does, seed 0's soup becomes the shipped verifier and ``make verifier``'s
recipe; if it does not, the recipe is not shipped.
Added during that run, before any of its numbers: the soups' probabilities sit nearer 0.5 (copies 0.76
where each parent gives 0.94), so ``stop_at=0.9`` would stop on few claims. The recipe multiplies the
average's head by a temperature fitted on the parents' held-out pairs (``verifier_soup.temperature``; ranks
and verdicts at 0.5 unchanged). It stays in the recipe only if ``experiments/verifier_cascade.py``'s rule,
run on the installed soup, still picks 0.9 (SummEval, BEGIN WoW and Q2 train halves within 0.005 of
scoring every unit); pairs a summary and the speed table are reported with and without it.
The rule for shipping it, written before it ran: BEGIN WoW's and Q2's train-half ROC-AUC each within 0.005
of the shipped verifier's (the interpolation's rule) and the contrastive set above 0.762 (the best point
that rule allowed on the line between the shipped and the continued model); and (added on 2026-11-26,
before the ``--scale 1.25`` run) for a mix meant to become the shipped one, trained within the issue's 60
minutes on 2 cores. Test halves are reported, never
used to decide.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import sets  # noqa: E402
from verifier_interpolation import measure  # noqa: E402

from calibration.verifier.soup import scaled  # noqa: E402
from calibration.verifier.training import (  # noqa: E402
    MANIFEST_NAME,
    WEIGHTS_NAME,
    TrainConfig,
    train_verifier,
)
from judges.lm.verifier import Verifier  # noqa: E402
from judges.lm.verifier.files import load_shipped  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--other-words", type=int, default=8000)
    parser.add_argument("--perturbed", type=int, default=TrainConfig().perturbed,
                        help="rule-made copy-with-a-changed-fact pairs (the shipped mix: %(default)s)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every count of the mix by this (default %(default)s)")
    parser.add_argument("--begin-repeat", type=int, default=1,
                        help="how many times the BEGIN dev pairs (CMU-DoG, Topical-Chat) go into the mix")
    parser.add_argument("--as-replies", type=float, default=0.0,
                        help="share of the rule-made pairs dressed as chat replies (the shipped mix: %(default)s)")
    parser.add_argument("--compressed", type=float, default=0.0,
                        help="share of evidence sentences compressed before the rules make pairs (shipped: %(default)s)")
    parser.add_argument("--compressed-positives-only", action="store_true",
                        help="with --compressed: change facts in the sentences as they stand, not in compressions")
    parser.add_argument("--average-from", type=float, default=0.0,
                        help="also write and measure the average of the weights from this share of the steps on")
    parser.add_argument("--seed", type=int, default=TrainConfig().seed,
                        help="the training seed (the shipped model: %(default)s)")
    parser.add_argument("--out", default="runs/verifier-joint")
    args = parser.parse_args()
    if args.scale <= 0:
        parser.error("--scale must be > 0")
    config = scaled(TrainConfig(other_words=args.other_words, perturbed=args.perturbed, begin_repeat=args.begin_repeat,
                                seed=args.seed, as_replies=args.as_replies, compressed=args.compressed,
                                compressed_negatives=not args.compressed_positives_only,
                                average_from=args.average_from), args.scale)
    print(f"mix: {config.per_source}, perturbed {config.perturbed}, other words {config.other_words}, "
          f"BEGIN x{config.begin_repeat}, as replies {config.as_replies}, compressed {config.compressed} "
          f"(negatives too: {config.compressed_negatives}), "
          f"seed {config.seed}", flush=True)
    started = time.perf_counter()
    weights = train_verifier(args.out, config)
    print(f"trained in {(time.perf_counter() - started) / 60:.1f} min: {weights}", flush=True)
    models = [("joint mix", weights, Path(args.out) / "model")]
    if config.average_from > 0:
        models.append(("joint mix, averaged", Path(args.out) / "averaged" / WEIGHTS_NAME, Path(args.out) / "model-averaged"))
    for _, trained, folder in models:
        model, tokenizer, _ = load_shipped(trained, trained.parent / MANIFEST_NAME)
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
    data = {name: value for name, value in sets(summeval_limit=2).items() if name != "summeval"}
    for label, verifier in [("shipped", Verifier())] + [(label, Verifier(str(folder))) for label, _, folder in models]:
        row = measure(verifier, data)
        print(f"{label}: " + "; ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k}: {v}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
