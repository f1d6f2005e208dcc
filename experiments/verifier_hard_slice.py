"""Why is a verifier right or wrong on the items the best cheap signal gets wrong? Printed as a table.

    mkdir -p runs/before-soup && for f in safetensors json; do git show \\
        e90aec9^:judges/lm/verifier/weights/groundedness-minilm.$f > runs/before-soup/groundedness-minilm.$f; done
    .venv/bin/python experiments/verifier_hard_slice.py --other runs/before-soup     # ~4 min on 2 cores

For the shipped verifier and ``--other`` (a trained verifier's folder, or a Hugging Face one), on the test
halves of ``experiments/verifier_agreement.py`` (its split, its cut-offs fitted on the train halves, SummEval's
first 320 summaries): the verifier's cut-off, the share of the test half it calls supported (and the true
share), its accuracy on the hard slice (the test items the best cheap signal gets wrong) overall and by
label, its ROC-AUC inside the slice (free of the cut-off), and its Spearman correlation with the best cheap
signal over the test half. A slice's accuracy moves with where the cut-off falls as much as with ranking.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from verifier_agreement import CHEAP, sets, split  # noqa: E402
from verifier_debias import SETS, hard_slice, hf_folder  # noqa: E402
from verifier_interpolation import weakest  # noqa: E402

from calibration.fitting.heldout import best_threshold  # noqa: E402
from calibration.fitting.signals import FEATURES  # noqa: E402
from calibration.verifier.training import WEIGHTS_NAME, roc_auc  # noqa: E402
from judges.lm.verifier import Verifier  # noqa: E402


def row(column: np.ndarray, cheap: np.ndarray, y: np.ndarray) -> str:
    from scipy.stats import spearmanr

    train, test = split(y.tolist(), 0)
    best, wrong = hard_slice(cheap, y, train, test)
    cut = best_threshold(column[train], y[train])[0]
    said = column >= cut
    supported, other = wrong[y[wrong] == 1], wrong[y[wrong] == 0]

    def share(rows: np.ndarray, value: bool) -> str:
        return f"{np.mean(said[rows] == value):.2f}" if len(rows) else "n/a"

    inside = roc_auc(y[wrong], column[wrong]) if len(wrong) else None
    return (f"{CHEAP[best].replace('_', ' ')} ({len(supported)} + {len(other)}) | {cut:.3f} | "
            f"{said[test].mean():.2f} ({y[test].mean():.2f}) | {np.mean(said[wrong] == (y[wrong] == 1)):.2f}: "
            f"{share(supported, True)} / {share(other, False)} | {'n/a' if inside is None else f'{inside:.3f}'} | "
            f"{spearmanr(column[test], cheap[test, best])[0]:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--other", required=True, help="another verifier: a trained verifier's or a Hugging Face folder")
    args = parser.parse_args()
    data = sets(summeval_limit=320)
    cheap = {s: np.array([[FEATURES[f](x) for f in CHEAP] for x in data[s][0]], float) for s in SETS}
    print("| set (best cheap signal: hard slice supported + not) | model | train-half cut-off | predicted supported "
          "(true share) | hard-slice accuracy: supported / not | hard-slice ROC-AUC | Spearman with the best cheap "
          "signal |")
    print("|---|---|---:|---|---|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        other = (hf_folder(Path(args.other), Path(folder) / "other") if (Path(args.other) / WEIGHTS_NAME).is_file()
                 else args.other)
        for s in SETS:
            samples, y = data[s]
            for label, verifier in (("shipped", Verifier()), (Path(args.other).name, Verifier(other))):
                column = np.array(weakest(verifier, samples, range(len(samples))))
                first, rest = row(column, cheap[s], np.asarray(y)).split(" | ", 1)
                print(f"| {s}: {first} | {label} | {rest} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
