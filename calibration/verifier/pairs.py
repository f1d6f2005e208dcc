"""(evidence, claim, supported?) pairs for training a small groundedness verifier, read from the public
corpora in ``<data_dir()>/verifier`` (see each folder's SOURCE.md for origin and licence).

Every loader maps its source's labels to 1 = the claim is supported by the evidence, 0 = it is not
(refuted OR not enough information), and says in its docstring exactly how and what it drops. Texts are
read where they are (zips are read in place); nothing is copied into the repository. Every loader also:

- drops rows with an empty evidence or claim;
- keeps the first of exact duplicate (evidence, claim) pairs, and drops every copy of a pair that the
  source gives conflicting labels (VitaminC has a few);
- gives each pair a ``group``: pairs sharing an evidence text, a claim text or the source's own item key
  (question, case, dialogue turn) get the same group (connected components), so a split that keeps groups
  together never puts one evidence or one claim on both sides;
- returns pairs in a fixed order (files sorted, rows in file order); ``limit`` keeps the first ``limit``
  pairs of that order (the whole file is still read, so groups and de-duplication do not depend on it).

``q2_wow`` is held out for evaluation: ``load_q2_wow`` exists, ``training_pairs`` refuses it.

Owns: reading the verifier pair files and mixing them into a training set. Must not fit or score
anything, and must not read the sets reserved for independent evaluation (BEGIN's test split, FaithDial,
EVOUNA's TQ file, WiCE, SummEdits, LLMBar, HaluQuestQA, Who&When, OpenQA-eval, the AlignScore / MiniCheck /
LLM-AggreFact benchmark test splits).
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import re
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from calibration.data.loaders import data_dir

SUPPORTED, NOT_SUPPORTED = 1, 0


@dataclass(frozen=True)
class EvidencePair:
    """One claim and the evidence it is judged against. ``label`` 1 = supported by the evidence, 0 = not
    supported (refuted or not enough information). ``source`` names the corpus (e.g. "vitaminc_real");
    ``group`` is shared by pairs from the same evidence / question / claim, for group-aware splits."""

    evidence: str
    claim: str
    label: int
    source: str
    group: str

    def __post_init__(self) -> None:
        if self.label not in (0, 1):
            raise ValueError(f"EvidencePair.label must be 0 or 1, got {self.label!r}")


def pairs_dir() -> Path:
    """``<data_dir()>/verifier``: where the pair corpora live (``$DSPY_JUDGES_DATA/verifier``)."""
    return data_dir() / "verifier"


def _file(*parts: str) -> Path:
    path = pairs_dir().joinpath(*parts)
    if not path.is_file():
        raise FileNotFoundError(f"verifier pair file not found: {path} (the pairs are read from "
                                f"$DSPY_JUDGES_DATA/verifier; set DSPY_JUDGES_DATA to the shared data folder)")
    return path


# --- text clean-up --------------------------------------------------------------------------------------

_PTB_BRACKETS = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
                 "-COLON-": ":"}


def detokenize(text: str) -> str:
    """Undo the Wikipedia/FEVER tokenisation of VitaminC and FEVER text so it looks like what the verifier will
    see at run time: PTB brackets (``-LRB-`` -> ``(``), ``` `` ''`` quotes -> ``"``, no space before ``, . ;
    : ! ? % ) 's n't``, none after ``(``; none inside quotes (straight or curly). Words are unchanged."""
    for token, char in _PTB_BRACKETS.items():
        text = text.replace(token, f" {char} ")
    text = text.replace("``", '"').replace("''", '"')
    text = re.sub(r"\s+([,.;:!?%)\]}\u201d])", r"\1", text)
    text = re.sub(r"([(\[{\u201c])\s+", r"\1", text)
    text = re.sub(r"\s+(n't|'s|'re|'ve|'ll|'d|'m)\b", r"\1", text)
    text = re.sub(r'"\s+([^"]*?)\s+"', r'"\1"', text)
    return re.sub(r"\s{2,}", " ", text).strip()


# --- shared finishing: de-duplication, groups, limit ----------------------------------------------------

_Raw = tuple[str, str, int, Sequence[str]]  # evidence, claim, label, the source's own item keys


def _finish(rows: Iterable[_Raw], source: str, limit: int | None) -> list[EvidencePair]:
    labels_of: dict[tuple[str, str], set[int]] = {}
    kept: list[_Raw] = []
    for evidence, claim, label, keys in rows:
        pair = (evidence.strip(), claim.strip())
        if pair[0] and pair[1] and pair not in labels_of:
            kept.append((*pair, label, keys))
        labels_of.setdefault(pair, set()).add(label)
    kept = [row for row in kept if len(labels_of[(row[0], row[1])]) == 1]
    # Groups: connected components over shared evidence text, claim text and item keys (union-find),
    # each named after the first node (in file order) of its component, so names are stable.
    parent: dict[str, str] = {}

    def find(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = node = parent[parent[node]]
        return node

    nodes = [[f"e\x00{row[0]}", f"c\x00{row[1]}"] + [f"k\x00{key}" for key in row[3]] for row in kept]
    for first, *rest in nodes:
        for other in rest:
            parent[find(other)] = find(first)
    names: dict[str, str] = {}
    for row_nodes in nodes:
        names.setdefault(find(row_nodes[0]), hashlib.sha1(row_nodes[0].encode("utf-8")).hexdigest()[:12])
    out = [EvidencePair(row[0], row[1], row[2], source, f"{source}:{names[find(row_nodes[0])]}")
           for row, row_nodes in zip(kept, nodes)]
    return out if limit is None else out[:limit]


def _jsonl(lines: Iterable[bytes | str]) -> Iterable[dict]:
    for line in lines:
        if line.strip():
            yield json.loads(line)


# --- loaders --------------------------------------------------------------------------------------------

VITAMINC_LABELS = {"SUPPORTS": SUPPORTED, "REFUTES": NOT_SUPPORTED, "NOT ENOUGH INFO": NOT_SUPPORTED}
#: A character lost in VitaminC's export: U+FFFD, or its UTF-8 bytes read as Latin-1 ("ï¿½").
_MANGLED = re.compile("\ufffd|\u00ef\u00bf\u00bd")


def load_vitaminc(kind: str = "real", limit: int | None = None) -> list[EvidencePair]:
    """VitaminC test splits (Schuster et al. 2021): contrastive Wikipedia-revision claim / evidence pairs.

    Read from ``vitaminc/static/vitaminc_{kind}.zip`` (``vitaminc_{kind}/test.jsonl`` inside, read in place).
    Fields: ``evidence`` -> evidence, ``claim`` -> claim. Labels: "SUPPORTS" -> 1; "REFUTES" and
    "NOT ENOUGH INFO" -> 0 (synthetic has no NEI). Texts are detokenised (``detokenize``). Group links:
    the file's ``case_id`` (one revision's claims and evidences), evidence and claim text. The file's own
    ``group`` field is not used (56 values: an annotation batch, not an item). Dropped: rows whose text has
    a character lost in the export (U+FFFD or "ï¿½", standing for e.g. "£", "°", "á": often the very fact
    at stake; 278 rows of real, none of synthetic), the identical (evidence, claim) pairs the file labels
    both ways (6 pairs in each file), and exact duplicates.
    """
    if kind not in ("real", "synthetic"):
        raise ValueError(f"load_vitaminc: kind={kind!r} is not 'real' or 'synthetic'")
    path = _file("vitaminc", "static", f"vitaminc_{kind}.zip")
    rows = []
    with zipfile.ZipFile(path) as archive:
        for name in sorted(n for n in archive.namelist() if n.endswith(".jsonl")):
            with archive.open(name) as handle:
                for item in _jsonl(handle):
                    if item.get("label") not in VITAMINC_LABELS or _MANGLED.search(item["evidence"] + item["claim"]):
                        continue
                    rows.append((detokenize(item["evidence"]), detokenize(item["claim"]),
                                 VITAMINC_LABELS[item["label"]], [f"case:{item['case_id']}"]))
    return _finish(rows, f"vitaminc_{kind}", limit)


NLI_LABELS = {"entailment": SUPPORTED, "neutral": NOT_SUPPORTED, "contradiction": NOT_SUPPORTED}


def load_mnli_snli_dev(which: str = "mnli", limit: int | None = None) -> list[EvidencePair]:
    """MultiNLI dev-matched or SNLI dev (``mnli_snli_dev/data/{which}/dev.jsonl``): crowd NLI pairs.

    ``premise`` -> evidence, ``hypothesis`` -> claim. Labels: "entailment" -> 1; "neutral" and
    "contradiction" -> 0. Items without a gold label (missing, "-" or anything else) are skipped (the
    current files have none). Group links: premise (each premise has ~3 hypotheses) and hypothesis text.
    """
    if which not in ("mnli", "snli"):
        raise ValueError(f"load_mnli_snli_dev: which={which!r} is not 'mnli' or 'snli'")
    rows = []
    with open(_file("mnli_snli_dev", "data", which, "dev.jsonl"), encoding="utf-8") as handle:
        for item in _jsonl(handle):
            label = NLI_LABELS.get(str(item.get("label") or "").strip().lower())
            if label is not None:
                rows.append((item["premise"], item["hypothesis"], label, ()))
    return _finish(rows, which, limit)


FEVER_LABELS = {"SUPPORTS": SUPPORTED, "REFUTES": NOT_SUPPORTED}


def load_fever_symmetric(limit: int | None = None) -> list[EvidencePair]:
    """FEVER-Symmetric v0.2 (Schuster et al. 2019), dev then test file (``symmetric_v0.2/
    fever_symmetric_{dev,test}.jsonl``; both are that corpus's own splits, allowed here as training data).

    ``evidence`` -> evidence, ``claim`` -> claim, detokenised. Labels ("label", equal to "gold_label" in
    every row): "SUPPORTS" -> 1, "REFUTES" -> 0. By construction every claim occurs twice, once with
    evidence that supports it and once with evidence that refutes it; the group links evidence and claim
    text, so both halves of each symmetric pair (and the few shared across dev and test) share a group.
    """
    rows = []
    for split in ("dev", "test"):
        with open(_file("fever_symmetric", "symmetric_v0.2", f"fever_symmetric_{split}.jsonl"),
                  encoding="utf-8") as handle:
            for item in _jsonl(handle):
                if item.get("label") in FEVER_LABELS:
                    rows.append((detokenize(item["evidence"]), detokenize(item["claim"]),
                                 FEVER_LABELS[item["label"]], ()))
    return _finish(rows, "fever_symmetric", limit)


FACTCHECK_LABELS = {"completely-support": SUPPORTED, "refute": NOT_SUPPORTED, "irrelevant": NOT_SUPPORTED}


def load_factcheck_gpt(limit: int | None = None) -> list[EvidencePair]:
    """Factcheck-GPT subtask 3 (Wang et al. 2023): stance of a retrieved web passage towards an atomic
    claim from a ChatGPT answer (``subtasks/subtask3_claim_evidence_stance.jsonl``).

    ``evidence`` -> evidence, ``claim`` -> claim. Labels (the file's ``stance`` strings, hyphenated):
    "completely-support" -> 1; "refute" and "irrelevant" -> 0 (an irrelevant passage gives no support).
    Dropped: "partially-support" (ambiguous: part of the claim is unsupported, and which part matters),
    171 exact duplicate rows and 2 (evidence, claim) pairs labelled both ways. Group links: claim text
    (each claim has ~5 passages) and evidence text.
    """
    rows = []
    with open(_file("factcheck_gpt", "subtasks", "subtask3_claim_evidence_stance.jsonl"),
              encoding="utf-8") as handle:
        for item in _jsonl(handle):
            label = FACTCHECK_LABELS.get(str(item.get("stance") or "").strip().lower())
            if label is not None:
                rows.append((item.get("evidence") or "", item.get("claim") or "", label, ()))
    return _finish(rows, "factcheck_gpt", limit)


#: ExpertQA ``support`` values kept; "Partial" (ambiguous), "N/A" (the annotator could not judge: mostly an
#: inaccessible link) and missing values are dropped.
EXPERTQA_LABELS = {"Complete": SUPPORTED, "Incomplete": NOT_SUPPORTED, "Missing": NOT_SUPPORTED}
_CITATION = re.compile(r"\s*\[\d+\]")


def _expertqa_passage(evidence: str) -> str:
    """The passage of one cited evidence string "[n] URL\\n\\npassage"; "" when it is only a URL."""
    head, _, passage = evidence.partition("\n\n")
    if not passage and not re.match(r"\s*(\[\d+\]\s*)?https?://\S+\s*$", head):
        passage = head  # no URL header: the whole string is the passage
    return passage.strip()


def load_expertqa(limit: int | None = None) -> list[EvidencePair]:
    """ExpertQA long-form QA files (Malaviya et al. 2024; ``data/lfqa/*.jsonl``, read in sorted order):
    experts judged whether each claim of a system's answer is supported by the evidence it cites.

    Per claim: evidence = the cited passage(s) (the text after each "[n] URL" header), joined with a blank
    line; claim = ``claim_string`` with its "[n]" citation markers removed. Labels (``support``): "Complete"
    -> 1 (the evidence fully supports the claim); "Incomplete" -> 0 (cited evidence that does not support
    the claim: the annotators' free-text reasons say e.g. "Evidence does not support the claim");
    "Missing" -> 0 (no evidence was given: so in practice these claims are skipped, see below). Dropped:
    "Partial" (ambiguous), "N/A" (the annotator could not judge, mostly an inaccessible link) and claims
    without a label. The README does not define the values; this follows the authors' own scripts, which
    count only "Complete" as supported (modeling/auto_attribution/compute_human_correlation.py).
    Skipped: claims without evidence passage text: all "Missing" claims, and every claim of the
    bing_chat and gpt4 systems, whose citations are bare URLs (the experts judged the web page, which the
    file does not hold). The random and domain splits overlap (479 distinct questions in 885 lines; the
    duplicated lines are identical): each question is read once; the one (evidence, claim) pair labelled
    both ways is dropped. Group links: the question, evidence and claim text.
    """
    folder = pairs_dir() / "expertqa" / "data" / "lfqa"
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not files:
        _file("expertqa", "data", "lfqa", "rand_val.jsonl")  # raises FileNotFoundError with the hint
    rows, seen = [], set()
    for path in files:
        with open(path, encoding="utf-8") as handle:
            for item in _jsonl(handle):
                if item["question"] in seen:
                    continue
                seen.add(item["question"])
                for system in sorted(item.get("answers") or {}):
                    for claim in item["answers"][system].get("claims") or []:
                        label = EXPERTQA_LABELS.get(str(claim.get("support") or "").strip())
                        passages = [p for p in (_expertqa_passage(e) for e in claim.get("evidence") or []) if p]
                        if label is None or not passages:
                            continue
                        text = _CITATION.sub("", claim.get("claim_string") or "")
                        rows.append(("\n\n".join(passages), text, label, [f"question:{item['question']}"]))
    return _finish(rows, "expertqa", limit)


def _fix_glued_sentences(text: str) -> str:
    """HaluEval's knowledge joins sentences without a space ("...century.First for Women is ...")."""
    return re.sub(r"(?<=[a-z0-9)\]\"'])\.(?=[A-Z][a-z])", ". ", text)


def load_halueval_qa(limit: int | None = None) -> list[EvidencePair]:
    """HaluEval QA (Li et al. 2023; ``generation/qa/qa_{one,multi}-turn_data.json``, JSON lines): HotpotQA
    questions with their Wikipedia knowledge, the right answer and a ChatGPT-written hallucinated one.

    evidence = ``knowledge`` (sentences the file glues together, "century.First", get their space back);
    claim = f"Question: {question} Answer: {answer}" (short answers need the question to be judged).
    Labels: ``right_answer`` -> 1, ``hallucinated_answer`` -> 0. Labels are made by construction, not by
    human verdicts. Both files hold the same 500 questions, knowledge and right answers with (mostly)
    different hallucinated answers: one-turn is read first, so each question gives its right answer once
    and one or two hallucinated answers (identical ones de-duplicated). Group: the question.
    """
    rows = []
    for strategy in ("one-turn", "multi-turn"):
        with open(_file("halueval_qa", "generation", "qa", f"qa_{strategy}_data.json"), encoding="utf-8") as handle:
            for item in _jsonl(handle):
                evidence, question = _fix_glued_sentences(item["knowledge"]), item["question"].strip()
                for field, label in (("right_answer", SUPPORTED), ("hallucinated_answer", NOT_SUPPORTED)):
                    answer = str(item.get(field) or "").strip()
                    if answer:
                        rows.append((evidence, f"Question: {question} Answer: {answer}", label,
                                     [f"question:{question}"]))
    return _finish(rows, "halueval_qa", limit)


Q2_SYSTEMS = ("dodeca", "memnet")


def load_q2_wow(limit: int | None = None) -> list[EvidencePair]:
    """FOR EVALUATION ONLY, never training (``training_pairs`` refuses it): Q² consistency annotations
    (Honovich et al. 2021) of two dialogue systems' Wizard-of-Wikipedia responses.

    evidence = ``knowledge`` (the WoW knowledge sentence the model was given); claim = the system's
    response (lower-cased and tokenised as in the file; left unchanged). Labels: ``cross_annotation.csv``
    has one row per turn with ``dodeca_response`` / ``memnet_response`` and ``dodeca_label`` /
    ``memnet_label``, where **1 means inconsistent** (the authors' system_level.py: "the system that had an
    inconsistency (labeled as 1)"), so label = 1 - that value: "0" -> 1 supported, "1" -> 0 not supported.
    The four per-system files ``{dodeca,memnet}_{consistent,inconsistent}.csv`` (consistent -> 1,
    inconsistent -> 0) are read after it; in the current files all their rows are already in the cross
    annotation with the same label, so they add nothing (kept for robustness; duplicates are dropped).
    Group links: the dialogue turn (episode_idx, round) and the knowledge and response text.
    """
    folder = ("q2_wow", "third_party", "data")
    rows = []
    with open(_file(*folder, "cross_annotation.csv"), encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            for system in Q2_SYSTEMS:
                flag = str(row.get(f"{system}_label") or "").strip()
                if flag in ("0", "1"):
                    rows.append((row["knowledge"], row[f"{system}_response"], 1 - int(flag),
                                 [f"turn:{row['episode_idx']}:{row['round']}"]))
    for system in Q2_SYSTEMS:
        for kind, label in (("consistent", SUPPORTED), ("inconsistent", NOT_SUPPORTED)):
            with open(_file(*folder, f"{system}_{kind}.csv"), encoding="utf-8", newline="") as handle:
                for row in csv.DictReader(handle):
                    rows.append((row["knowledge"], row["response"], label,
                                 [f"turn:{row['episode_idx']}:{row['round']}"]))
    return _finish(rows, "q2_wow", limit)


# --- the training mix -----------------------------------------------------------------------------------

#: Source name -> loader(limit). Every name here is also the ``source`` of the pairs it returns.
LOADERS: dict[str, Callable[[int | None], list[EvidencePair]]] = {
    "vitaminc_real": lambda limit=None: load_vitaminc("real", limit),
    "vitaminc_synthetic": lambda limit=None: load_vitaminc("synthetic", limit),
    "mnli": lambda limit=None: load_mnli_snli_dev("mnli", limit),
    "snli": lambda limit=None: load_mnli_snli_dev("snli", limit),
    "fever_symmetric": load_fever_symmetric,
    "factcheck_gpt": load_factcheck_gpt,
    "expertqa": load_expertqa,
    "halueval_qa": load_halueval_qa,
    "q2_wow": load_q2_wow,
}
#: Held out for evaluation: never in a training mix.
EVALUATION_SOURCES = ("q2_wow",)
TRAINING_SOURCES = tuple(name for name in LOADERS if name not in EVALUATION_SOURCES)


def _sample(pairs: list[EvidencePair], cap: int, rng: random.Random) -> list[EvidencePair]:
    """``cap`` pairs, half of each label where the source has enough, the rest from the other label."""
    if cap >= len(pairs):
        return list(pairs)
    by_label = {label: [p for p in pairs if p.label == label] for label in (0, 1)}
    for group in by_label.values():
        rng.shuffle(group)
    want = {0: cap // 2, 1: cap - cap // 2}
    short = {label: max(0, want[label] - len(by_label[label])) for label in (0, 1)}
    take = {0: min(len(by_label[0]), want[0] + short[1]), 1: min(len(by_label[1]), want[1] + short[0])}
    return by_label[0][:take[0]] + by_label[1][:take[1]]


def training_pairs(sources: Sequence[str] = TRAINING_SOURCES, per_source: dict[str, int] | None = None,
                   seed: int = 0) -> list[EvidencePair]:
    """A seeded, shuffled mix of the training sources. ``per_source`` caps a source's pairs (those without
    a cap come whole): drawn with a generator seeded by (seed, source), so one source's draw does not
    depend on which others are mixed, and balanced by label where the source has enough of each.
    Held-out sources (``q2_wow``) and unknown names raise ValueError."""
    per_source = dict(per_source or {})
    for name in list(sources) + list(per_source):
        if name in EVALUATION_SOURCES:
            raise ValueError(f"training_pairs: {name!r} is held out for evaluation and never trained on")
        if name not in LOADERS:
            raise ValueError(f"training_pairs: unknown source {name!r}; known: {list(TRAINING_SOURCES)}")
    mixed: list[EvidencePair] = []
    for name in dict.fromkeys(sources):
        pairs = LOADERS[name](None)
        if name in per_source:
            if per_source[name] < 0:
                raise ValueError(f"training_pairs: per_source[{name!r}] must be >= 0")
            pairs = _sample(pairs, per_source[name], random.Random(f"{seed}:{name}"))
        mixed.extend(pairs)
    random.Random(seed).shuffle(mixed)
    return mixed
