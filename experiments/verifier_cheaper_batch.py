"""The shipped first parent trained with a cheaper batch: its time a batch and its curve, next to the shipped one's.

    .venv/bin/python experiments/verifier_cheaper_batch.py --max-length 128                    # ~40 min here, whole
    .venv/bin/python experiments/verifier_cheaper_batch.py --frozen-layers 2 --max-length 128 --steps 500   # ~5 min
    .venv/bin/python experiments/verifier_cheaper_batch.py --max-length 128 --rescore-at 128 160  # its checks at 160

``make verifier`` trains two parents; the first (``soup_recipe().parents[0]``, 3,025 batches) is the same
mix, seed and held-out pairs whatever the batch costs, so its checks along the way (ROC-AUC on the held-out
pairs and on the first hand-written contrastive set, every ``--eval-every`` batches) can be read against
the shipped first parent's, kept in the shipped manifest. A change that falls behind that curve early is not
worth a whole soup. The checks are ~400 and 112 pairs: ~0.02 apart is within what a seed moved the soups
(0.026 on the contrastive set, docs/verifier-experiments.md "Measured: how far two trainings ... (seeds)").

Written 2026-11-29 for runs 6 and 7 of docs/verifier-experiments.md ("Measured: minimal pairs ..."), on an AMD EPYC
without AVX-512, where a probe of the shipped recipe's batches ran at 0.88 s each, so it seemed to
need ~95 min (run whole later the same day: 84 min).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from calibration.verifier.mix import contrastive_set, training_mix  # noqa: E402
from calibration.verifier.soup import soup_recipe  # noqa: E402
from calibration.verifier.training import MANIFEST_NAME, logits, roc_auc, train_verifier  # noqa: E402
from judges.lm.verifier.files import SHIPPED_MANIFEST, base_classifier  # noqa: E402


def rescore(out: Path, config, lengths: list[int]) -> None:
    """The checks of the last checkpoint in ``out``, scored with pairs cut at each of ``lengths`` tokens: the
    shipped parent's checks were made at 160, a run at 128 makes its own at 128."""
    import torch
    from safetensors.torch import load_file

    torch.set_num_threads(config.threads)
    _, held = training_mix(config)
    watch = contrastive_set()
    torch.manual_seed(config.seed)
    model, tokenizer = base_classifier(num_labels=1)
    tensors = load_file(str(out / "checkpoint" / "state.safetensors"))
    model.load_state_dict({k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}, strict=False)
    step = json.loads((out / "checkpoint" / "state.json").read_text(encoding="utf-8"))["step"]
    for length in lengths:
        scores = [roc_auc([p.label for p in pairs], logits(model, tokenizer, pairs, length)) for pairs in (held, watch)]
        print(f"{out} at batch {step}, pairs cut at {length} tokens: held-out ROC-AUC {scores[0]:.3f}, "
              f"contrastive {scores[1]:.3f}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frozen-layers", type=int, default=0)
    parser.add_argument("--max-length", type=int, default=160)
    parser.add_argument("--learning-rate", type=float, default=None, help="the shipped recipe's when not given")
    parser.add_argument("--steps", type=int, default=None, help="stop after this many batches (all when not given)")
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--out", default=None)
    parser.add_argument("--rescore-at", type=int, nargs="*", default=None, metavar="TOKENS",
                        help="train nothing: score the run's last checkpoint on the checks at these lengths")
    args = parser.parse_args()
    shipped = soup_recipe().parents[0]
    config = replace(shipped, frozen_layers=args.frozen_layers, max_length=args.max_length,
                     learning_rate=args.learning_rate or shipped.learning_rate, eval_every=args.eval_every)
    out = Path(args.out or f"runs/verifier-batch-f{config.frozen_layers}-l{config.max_length}"
                           f"-lr{config.learning_rate:g}")
    if args.rescore_at is not None:
        rescore(out, config, args.rescore_at)
        return 0
    started = time.time()
    train_verifier(out, config, max_steps=args.steps)
    print(f"trained to batch {args.steps or 'the end'} in {(time.time() - started) / 60:.1f} min, the mix's making "
          f"included (its progress bar above gives the time a batch)")
    kept = out / MANIFEST_NAME if (out / MANIFEST_NAME).is_file() else out / "checkpoint" / "state.json"
    history = json.loads(kept.read_text(encoding="utf-8"))["history"]  # the manifest once the run is whole
    shipped_parents = json.loads(SHIPPED_MANIFEST.read_text(encoding="utf-8"))["parents"]
    reference = {h["step"]: h for h in shipped_parents[0]["history"]}
    print(f"\n| batch | held-out, shipped parent 0 | held-out, this run | contrastive, shipped parent 0 | "
          f"contrastive, this run |  (frozen_layers={config.frozen_layers}, max_length={config.max_length}, "
          f"learning_rate={config.learning_rate:g})")
    print("|---|---|---|---|---|")
    for point in history:
        ref = reference.get(point["step"], {})
        cells = [ref.get("held_out_roc_auc"), point["held_out_roc_auc"], ref.get("contrastive_roc_auc"),
                 point["contrastive_roc_auc"]]
        print(f"| {point['step']} | " + " | ".join("n/a" if c is None else f"{c:.3f}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
