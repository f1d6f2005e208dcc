"""Build the English noun lexicon the swap check reads (``judges.data.nouns``) from Princeton WordNet 3.0.

    apt-get download wordnet-base && dpkg -x wordnet-base_*.deb wordnet     # Debian's WordNet 3.0 database
    .venv/bin/python -m calibration.verifier.wordnet_nouns --wordnet wordnet/usr/share/wordnet

Reads ``data.noun`` only: each noun synset's words and its hypernyms (``@``, and ``@i`` for an instance). Writes
``judges/data/lexicon/wordnet-nouns.npz`` (numpy arrays, no pickle): every noun lemma (lower case, words joined by
spaces), sorted, one per line as UTF-8 bytes; its synsets (``sense_starts``, ``senses``); and each synset's
hypernyms (``hypernym_starts``, ``hypernyms``), synsets numbered in the file's order. Arrays load in milliseconds
and take a few MB, where a dict of lists would take tens. WordNet's licence asks that its notice go with every copy;
it is in ``judges/data/lexicon/WORDNET_LICENSE``.

Owns: reading WordNet's files and writing the lexicon. Must not decide what a swap is (``judges.data.contrasts``).
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[2] / "judges" / "data" / "lexicon" / "wordnet-nouns.npz"


def read_data_noun(path: Path) -> tuple[dict[str, list[int]], list[list[int]]]:
    """``(lemmas, hypernyms)`` from WordNet's ``data.noun``: each lemma's synsets and each synset's hypernyms, as
    indices in the file's synset order. Raises ValueError naming the line when a synset line does not parse."""
    rows: list[tuple[list[str], list[str]]] = []
    offsets: dict[str, int] = {}
    for number, line in enumerate(path.read_text(encoding="latin-1").splitlines(), 1):
        if line.startswith("  "):  # the licence header
            continue
        fields = line.split(" | ")[0].split()
        try:
            words = int(fields[3], 16)
            names = [fields[4 + 2 * k] for k in range(words)]
            at = 4 + 2 * words
            pointers = int(fields[at])
            parents = [fields[at + 1 + 4 * k + 1] for k in range(pointers) if fields[at + 1 + 4 * k] in ("@", "@i")]
        except (IndexError, ValueError) as error:
            raise ValueError(f"{path}: line {number} is not a WordNet synset line ({error})") from error
        offsets[fields[0]] = len(rows)
        rows.append((names, parents))
    lemmas: dict[str, list[int]] = {}
    for index, (names, _) in enumerate(rows):
        for name in names:
            lemma = name.replace("_", " ").casefold()
            if index not in lemmas.setdefault(lemma, []):
                lemmas[lemma].append(index)
    return lemmas, [[offsets[p] for p in parents] for _, parents in rows]


def build(wordnet: Path, out: Path = OUT) -> dict:
    source = wordnet / "data.noun"
    if not source.is_file():
        raise SystemExit(f"wordnet_nouns: {source} not found; --wordnet names the folder holding WordNet 3.0's data.noun")
    lemmas, hypernyms = read_data_noun(source)
    names = sorted(lemmas)
    if any("\n" in name for name in names):
        raise ValueError(f"{source}: a lemma holds a line break")

    def ragged(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        return (np.cumsum([0, *map(len, lists)]).astype(np.int32),
                np.fromiter((x for row in lists for x in row), dtype=np.int32))

    sense_starts, senses = ragged([lemmas[name] for name in names])
    hypernym_starts, parents = ragged(hypernyms)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, lemmas=np.frombuffer("\n".join(names).encode("utf-8"), dtype=np.uint8),
                        sense_starts=sense_starts, senses=senses, hypernym_starts=hypernym_starts, hypernyms=parents,
                        source=np.frombuffer(f"Princeton WordNet 3.0, data.noun, sha256 "
                                             f"{hashlib.sha256(source.read_bytes()).hexdigest()}".encode(), np.uint8))
    return {"lemmas": len(names), "synsets": len(hypernyms), "bytes": out.stat().st_size}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wordnet", required=True, help="folder holding WordNet 3.0's data.noun")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    print(build(Path(args.wordnet), Path(args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
