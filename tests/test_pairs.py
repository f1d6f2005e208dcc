"""Verifier training pairs (calibration.verifier.pairs), the copy-with-a-changed-fact rules
(calibration.verifier.perturb) and the hand-written contrastive test set. Loader tests read small slices of
the real files in shared/data/verifier and skip when that folder is missing; label mappings are checked
against rows looked up in the raw files (no dataset text is pasted here)."""

import csv
import functools
import json
import random
import re
import zipfile
from collections import Counter

import pytest

from calibration.verifier import pairs as P
from calibration.verifier.contrastive import CONTRASTIVE_SETS, load_contrastive
from calibration.verifier.compress import compress_sentence, cut_tail, drop_age, drop_opening
from calibration.verifier.perturb import (
    REPLY_OPENINGS,
    as_reply,
    change_number,
    direction_minimal_pair,
    flip_direction,
    flip_negation,
    names_in,
    negation_insertions,
    negation_removals,
    perturbed_pairs,
    swap_name,
    trim_sentence,
)
from judges.data.opposites import direction_flips


def _have_pairs() -> bool:
    try:
        return P.pairs_dir().is_dir()
    except FileNotFoundError:
        return False


needs_data = pytest.mark.skipif(not _have_pairs(), reason="needs shared/data/verifier (set DSPY_JUDGES_DATA to "
                                                          "the shared data folder); not present here")


@functools.lru_cache(maxsize=None)
def _all(name: str) -> tuple:
    """Every pair of a source, read once per test session."""
    return tuple(P.LOADERS[name](None))


def _labels_by_text(name: str) -> dict:
    return {(p.evidence, p.claim): p.label for p in _all(name)}


# --- every loader ---------------------------------------------------------------------------------------

@needs_data
@pytest.mark.parametrize("name", list(P.LOADERS))
def test_each_loader_gives_clean_pairs_with_both_labels(name):
    pairs = P.LOADERS[name](50)
    assert len(pairs) == 50
    assert all(isinstance(p, P.EvidencePair) for p in pairs)
    assert {p.label for p in pairs} == {0, 1}
    assert all(p.evidence.strip() and p.claim.strip() and p.group.startswith(p.source + ":") for p in pairs)
    assert {p.source for p in pairs} == {name}
    assert list(_all(name)[:50]) == pairs  # deterministic; limit = the first pairs of the full order
    whole = _all(name)
    assert len({(p.evidence, p.claim) for p in whole}) == len(whole)  # no duplicate pairs


def test_evidence_pair_rejects_other_labels():
    with pytest.raises(ValueError, match="0 or 1"):
        P.EvidencePair("e", "c", 2, "x", "x:1")


def test_missing_files_name_the_file_and_the_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv("DSPY_JUDGES_DATA", str(tmp_path))
    assert P.pairs_dir() == tmp_path / "verifier"
    for load, file_name in ((P.load_fever_symmetric, "fever_symmetric_dev.jsonl"),
                            (lambda: P.load_vitaminc("real"), "vitaminc_real.zip"),
                            (P.load_expertqa, "expertqa"), (P.load_q2_wow, "cross_annotation.csv")):
        with pytest.raises(FileNotFoundError, match="DSPY_JUDGES_DATA") as error:
            load()
        assert file_name in str(error.value)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="kind"):
        P.load_vitaminc("other")
    with pytest.raises(ValueError, match="which"):
        P.load_mnli_snli_dev("anli")


def test_detokenize_undoes_wikipedia_tokenisation():
    text = "Ann -LRB- born 1950 -RRB- , a painter , said `` yes '' and did n't go ; it 's 5 % ."
    assert P.detokenize(text) == "Ann (born 1950), a painter, said \"yes\" and didn't go; it's 5%."


# --- label mappings, on rows looked up in the raw files -------------------------------------------------

def _first_rows_by(rows, key, values):
    """The first raw row for each of ``values`` of ``key``."""
    found = {}
    for row in rows:
        if row.get(key) in values and row[key] not in found:
            found[row[key]] = row
        if len(found) == len(values):
            break
    assert set(found) == set(values), f"no raw row with {key} in {set(values) - set(found)}"
    return found


@needs_data
def test_vitaminc_maps_supports_to_1_and_refutes_and_nei_to_0():
    for kind in ("real", "synthetic"):
        with zipfile.ZipFile(P.pairs_dir() / "vitaminc" / "static" / f"vitaminc_{kind}.zip") as archive:
            with archive.open(f"vitaminc_{kind}/test.jsonl") as handle:
                raw = [json.loads(line) for _, line in zip(range(3000), handle)]
        raw = [row for row in raw if not P._MANGLED.search(row["evidence"] + row["claim"])]
        wanted = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO") if kind == "real" else ("SUPPORTS", "REFUTES")
        index = _labels_by_text(f"vitaminc_{kind}")
        for label, row in _first_rows_by(raw, "label", wanted).items():
            key = (P.detokenize(row["evidence"]), P.detokenize(row["claim"]))
            assert index[key] == (1 if label == "SUPPORTS" else 0)
        counts = Counter(p.label for p in _all(f"vitaminc_{kind}"))
        assert counts[0] and counts[1]
    assert not any("\ufffd" in p.evidence + p.claim for p in _all("vitaminc_real"))  # lost characters dropped


@needs_data
def test_mnli_snli_map_entailment_to_1_and_neutral_contradiction_to_0():
    for which in ("mnli", "snli"):
        with open(P.pairs_dir() / "mnli_snli_dev" / "data" / which / "dev.jsonl", encoding="utf-8") as handle:
            raw = [json.loads(line) for _, line in zip(range(200), handle)]
        index = _labels_by_text(which)
        for label, row in _first_rows_by(raw, "label", ("entailment", "neutral", "contradiction")).items():
            assert index[(row["premise"].strip(), row["hypothesis"].strip())] == (label == "entailment")


@needs_data
def test_fever_symmetric_maps_labels_and_keeps_each_symmetric_claim_in_one_group():
    with open(P.pairs_dir() / "fever_symmetric" / "symmetric_v0.2" / "fever_symmetric_test.jsonl",
              encoding="utf-8") as handle:
        raw = [json.loads(line) for _, line in zip(range(50), handle)]
    index = _labels_by_text("fever_symmetric")
    for label, row in _first_rows_by(raw, "label", ("SUPPORTS", "REFUTES")).items():
        assert index[(P.detokenize(row["evidence"]), P.detokenize(row["claim"]))] == (label == "SUPPORTS")
    groups_of_claim, labels_of_group = {}, {}
    for pair in _all("fever_symmetric"):
        groups_of_claim.setdefault(pair.claim, set()).add(pair.group)
        labels_of_group.setdefault(pair.group, set()).add(pair.label)
    assert all(len(groups) == 1 for groups in groups_of_claim.values())
    assert all(labels == {0, 1} for labels in labels_of_group.values())  # each claim has both evidences


@needs_data
def test_factcheck_gpt_maps_stances_and_drops_partial_support():
    with open(P.pairs_dir() / "factcheck_gpt" / "subtasks" / "subtask3_claim_evidence_stance.jsonl",
              encoding="utf-8") as handle:
        raw = [json.loads(line) for line in handle]
    index = _labels_by_text("factcheck_gpt")
    stances = ("completely-support", "refute", "irrelevant", "partially-support")
    first = _first_rows_by(raw, "stance", stances)
    for stance, row in first.items():
        key = (row["evidence"].strip(), row["claim"].strip())
        if stance == "partially-support":
            partial_only = all(r["stance"] == "partially-support" for r in raw
                               if (r["evidence"].strip(), r["claim"].strip()) == key)
            assert key not in index or not partial_only
        else:
            assert index[key] == (stance == "completely-support")


@needs_data
def test_expertqa_maps_complete_to_1_incomplete_to_0_and_skips_partial_and_bare_urls():
    index = {}
    for pair in _all("expertqa"):
        index[pair.claim] = pair.label
    assert not any(re.search(r"\[\d+\]", claim) or re.match(r"\s*\[\d+\]\s*https?://", evidence)
                   for evidence, claim in _labels_by_text("expertqa"))  # no citation marks, no URL headers
    seen = Counter()
    with open(P.pairs_dir() / "expertqa" / "data" / "lfqa" / "rand_val.jsonl", encoding="utf-8") as handle:
        for line in handle:
            for system, answer in json.loads(line)["answers"].items():
                for claim in answer["claims"]:
                    text = P._CITATION.sub("", claim["claim_string"]).strip()
                    has_passage = any(P._expertqa_passage(e) for e in claim.get("evidence") or [])
                    support = claim.get("support")
                    if support in ("Complete", "Incomplete") and has_passage and seen[support] < 3:
                        if text in index and sum(1 for p in _all("expertqa") if p.claim == text) == 1:
                            assert index[text] == (support == "Complete")
                            seen[support] += 1
                    if system in ("bing_chat", "gpt4"):  # citations there are bare URLs: never a pair
                        assert not has_passage
    assert seen["Complete"] and seen["Incomplete"]
    counts = Counter(p.label for p in _all("expertqa"))
    assert counts[0] and counts[1]


@needs_data
def test_halueval_gives_the_right_answer_1_and_the_hallucinated_one_0():
    with open(P.pairs_dir() / "halueval_qa" / "generation" / "qa" / "qa_one-turn_data.json",
              encoding="utf-8") as handle:
        row = json.loads(handle.readline())
    pairs = [p for p in _all("halueval_qa") if row["question"] in p.claim]
    by_answer = {p.claim.split(" Answer: ", 1)[1]: p.label for p in pairs}
    assert by_answer[row["right_answer"].strip()] == 1
    assert by_answer[row["hallucinated_answer"].strip()] == 0
    assert len({p.group for p in pairs}) == 1 and all(p.claim.startswith("Question: ") for p in pairs)


@needs_data
def test_q2_wow_reads_label_1_as_inconsistent():
    with open(P.pairs_dir() / "q2_wow" / "third_party" / "data" / "cross_annotation.csv",
              encoding="utf-8", newline="") as handle:
        raw = list(csv.DictReader(handle))
    index = _labels_by_text("q2_wow")
    checked = Counter()
    for row in raw:
        for system in P.Q2_SYSTEMS:
            key = (row["knowledge"].strip(), row[f"{system}_response"].strip())
            if checked[row[f"{system}_label"]] < 3 and key in index:
                assert index[key] == 1 - int(row[f"{system}_label"])
                checked[row[f"{system}_label"]] += 1
    assert checked["0"] and checked["1"]
    with open(P.pairs_dir() / "q2_wow" / "third_party" / "data" / "dodeca_inconsistent.csv",
              encoding="utf-8", newline="") as handle:
        row = next(csv.DictReader(handle))
    assert index[(row["knowledge"].strip(), row["response"].strip())] == 0


# --- the training mix -----------------------------------------------------------------------------------

def test_q2_wow_is_held_out_of_training():
    assert "q2_wow" not in P.TRAINING_SOURCES and "q2_wow" in P.EVALUATION_SOURCES
    assert "evaluation only" in P.load_q2_wow.__doc__.lower()
    with pytest.raises(ValueError, match="held out"):
        P.training_pairs(sources=("fever_symmetric", "q2_wow"))
    with pytest.raises(ValueError, match="held out"):
        P.training_pairs(sources=("fever_symmetric",), per_source={"q2_wow": 10})
    with pytest.raises(ValueError, match="unknown"):
        P.training_pairs(sources=("nope",))


SMALL = ("fever_symmetric", "halueval_qa", "factcheck_gpt")


@needs_data
def test_training_pairs_are_seeded_and_respect_per_source():
    caps = {"fever_symmetric": 40, "halueval_qa": 30, "factcheck_gpt": 20}
    first = P.training_pairs(sources=SMALL, per_source=caps, seed=3)
    assert first == P.training_pairs(sources=SMALL, per_source=caps, seed=3)
    assert first != P.training_pairs(sources=SMALL, per_source=caps, seed=4)
    counts = Counter(p.source for p in first)
    assert counts == Counter(caps)
    for source, cap in caps.items():
        labels = Counter(p.label for p in first if p.source == source)
        assert labels[0] == labels[1] == cap // 2  # balanced: each source has enough of both labels
    assert len({p.source for p in first[:20]}) > 1  # shuffled together, not one source after another
    # a source's draw does not depend on which other sources are mixed in
    alone = P.training_pairs(sources=("fever_symmetric",), per_source={"fever_symmetric": 40}, seed=3)
    assert set(alone) == {p for p in first if p.source == "fever_symmetric"}
    # uncapped sources come whole
    whole = P.training_pairs(sources=("halueval_qa",), seed=0)
    assert sorted(whole, key=repr) == sorted(_all("halueval_qa"), key=repr)
    assert not any(p.source == "q2_wow" for p in whole)


# --- perturbation rules ---------------------------------------------------------------------------------

def test_change_number_changes_one_number():
    rng = random.Random(0)
    year = change_number("The mill was built in 1889 by local farmers.", rng)
    assert year and year != "The mill was built in 1889 by local farmers." and "1889" not in year
    assert change_number("Roughly 45% of voters agreed.", rng) == "Roughly 54% of voters agreed."
    changed = change_number("The pond has 3 ducks.", rng)
    assert changed in ("The pond has 2 ducks.", "The pond has 4 ducks.")
    changed = change_number("The orchard has 1,200 trees.", random.Random(1))
    assert changed and changed != "The orchard has 1,200 trees." and "," in changed
    assert change_number("The pond was quiet at dusk.", rng) is None


def test_swap_name_uses_the_pool_and_never_a_name_already_there():
    rng = random.Random(0)
    sentence = "The cup was won by Rosa Lind in Bergen."
    swapped = swap_name(sentence, rng, ["Rosa Lind", "Tom Hale", "Oslo"])
    assert swapped in ("The cup was won by Tom Hale in Bergen.", "The cup was won by Rosa Lind in Oslo.")
    assert swap_name("the cup was won by a local team.", rng, ["Tom Hale"]) is None  # no name
    assert swap_name(sentence, rng, ["Rosa Lind", "Bergen"]) is None  # no other name in the pool
    assert names_in("Yesterday the painter Rosa Lind met Tom Hale in Bergen.") == ["Rosa Lind", "Tom Hale", "Bergen"]


def test_flip_negation_adds_or_removes_one_negation():
    rng = random.Random(0)
    assert flip_negation("The gallery is open on Sundays.", rng) == "The gallery is not open on Sundays."
    assert flip_negation("The gallery is not open on Sundays.", rng) == "The gallery is open on Sundays."
    assert flip_negation("The firm has never paid a dividend.", rng) == "The firm has paid a dividend."
    assert flip_negation("She didn't sign the letter.", rng) == "She did sign the letter."
    assert flip_negation("The crew repaired the roof.", rng) == "The crew never repaired the roof."
    assert flip_negation("A cat on a mat.", rng) is None


def test_negation_edits_and_direction_flips_list_one_variant_for_each_place():
    """What ``flip_negation`` / ``flip_direction`` pick one of (and the counterfactual experiment reads whole)."""
    assert negation_removals("It isn't open and was never sold.") == ["It is open and was never sold.",
                                                                      "It isn't open and was sold."]
    assert negation_removals("Not all of it burned.") == ["All of it burned."]
    assert negation_removals("Not only the roof burned.") == []  # "not only" is left alone
    assert negation_insertions("The bridge was built and can carry trucks.") == [
        "The bridge was not built and can carry trucks.", "The bridge was built and can not carry trucks."]
    assert negation_insertions("The firm has 5,000 staff in May.") == []  # no participle, no modal
    assert direction_flips("Sales ROSE in the north.") == ["Sales FELL in the north.", "Sales ROSE in the south."]
    assert direction_flips("The pond was quiet.") == []


def test_flip_direction_swaps_one_antonym():
    rng = random.Random(0)
    assert flip_direction("Exports rose in June.", rng) == "Exports fell in June."
    assert flip_direction("The farm lies north of the lake.", rng) == "The farm lies south of the lake."
    assert flip_direction("Before the storm, the boats left.", rng) == "After the storm, the boats left."
    assert flip_direction("The hosts won the final.", rng) == "The hosts lost the final."
    assert flip_direction("The pond was quiet at dusk.", rng) is None


def test_direction_minimal_pair_flips_one_word_of_a_sentence_and_keeps_it():
    evidence = "The pond was quiet at dusk. Exports rose in June after the strike."
    made = direction_minimal_pair(evidence, random.Random(0))
    kept = "Exports rose in June after the strike."
    assert made in {(flipped, kept) for flipped in ("Exports fell in June after the strike.",
                                                    "Exports rose in June before the strike.",
                                                    "Imports rose in June after the strike.")}
    assert made == direction_minimal_pair(evidence, random.Random(0))
    assert direction_minimal_pair("The pond was quiet at dusk.", random.Random(0)) is None
    assert direction_minimal_pair("Prices rose.", random.Random(0)) is None  # under MIN_WORDS

def test_trim_keeps_only_what_the_sentence_entails():
    assert trim_sentence("Ada Moss (1901-1980) founded the school.") == "Ada Moss founded the school."
    assert trim_sentence("Bergen, the wettest city in the region, gets rain most days.") == \
        "Bergen gets rain most days."
    assert trim_sentence("Output rose 5% (excluding fuel) last year.") is None  # a qualifier stays
    assert trim_sentence("The pond was quiet at dusk.") is None


def test_perturbed_pairs_make_every_kind_deterministically():
    evidence = ("The Westbrook ferry first sailed in 1921 and carried 40 passengers. It was built by Anna Holm "
                "(1880-1950) in Bergen. The service is not run in winter.")
    pool = ["Tom Hale", "Oslo", "Karl Berg"]
    made = perturbed_pairs(evidence, random.Random(0), pool)
    assert made == perturbed_pairs(evidence, random.Random(0), pool)
    kinds = {kind: label for _, label, kind in made}
    assert {k for k, v in kinds.items() if v == 0} == {"number", "name", "negation", "direction"}
    assert "trim" in kinds and kinds["trim"] == 1
    labels = Counter(label for _, label, _ in made)
    assert labels[0] == 4 and 1 <= labels[1] <= 4
    for claim, _, kind in made:
        assert (claim in evidence) == (kind == "copy")  # negatives and trims are new text, copies are not
    assert perturbed_pairs("Too short.", random.Random(0), pool) == []


def test_compressions_keep_what_the_sentence_entails_and_refuse_what_would_say_more():
    assert drop_opening("In 1921, the Westbrook ferry carried passengers to Bergen.") == \
        "The Westbrook ferry carried passengers to Bergen."
    assert drop_opening("Speaking on Monday, the mayor said the bridge would reopen.") == \
        "The mayor said the bridge would reopen."
    assert drop_opening("After the storm ended, the boats stayed in the harbour.") == "The boats stayed in the harbour."
    assert drop_opening("However, the mayor refused to comment on the bridge.") == "The mayor refused to comment on the bridge."
    for kept in ("If the storm comes, the boats stay in the harbour.",      # a condition
                 "According to the mayor, the bridge will reopen soon.",    # an attribution
                 "Without the grant, the school would close in May.",       # a qualifier
                 "In most cases, the school closes in May.",                # a restriction of scope
                 "In the UK, the single peaked at number three.",           # a place
                 "Under the proposal, income taxes would rise sharply.",    # a scope
                 "With the exception of Smith, all the players were paid.",
                 "In 2010, the firm had 50 employees in Oslo.",             # the number holds for 2010 only
                 "Now the firm is remaking the series, to air in 2016.",    # the comma ends the main clause
                 "After the war he moved to Paris, where he met his wife.",  # what is left is no clause
                 "On Monday, March 3, the council met again in the hall.",  # the opening goes on
                 "Sterling, the England forward, scored twice."):
        assert drop_opening(kept) is None, kept
    assert cut_tail("The ferry sailed to Bergen in June, and the crew stayed on shore.") == \
        "The ferry sailed to Bergen in June."
    assert cut_tail("The boy's leg was injured in the fall, but he was not attacked by the animals.") == \
        "The boy's leg was injured in the fall."
    assert cut_tail("Ada Moss founded the village school despite strong opposition.") == "Ada Moss founded the village school."
    for kept in ("The mayor will reopen the bridge, but only if the council pays.",  # holds only with the rest
                 "Officials from the ministry said Smith, and not Jones, was to blame.",
                 "The whole village was evacuated on Monday, after the dam failed, police said.",  # reported
                 "\u201cThe club will win the league this season, and nobody can stop us.\u201d",  # quoted
                 "Birmingham is the most populous city in Britain after London.",  # "after" as "next to"
                 "The village of Westbrook was named after the river that runs past it.",
                 "When the storm reached the town, and the river burst its banks, the mayor left.",
                 "The company was founded by Smith, Jones, and Brown in a garage.",  # a list
                 "Moss, who founded the school after the war, retired in 1950.",    # the main verb comes later
                 "The era began with a mass extinction, in which many groups, including the reptiles, died.",
                 "The pond was quiet at dusk."):
        assert cut_tail(kept) is None, kept
    assert drop_age("Anna Holm, 54, was born in Bergen.") == "Anna Holm was born in Bergen."
    assert drop_age("Anna Holm was born in Bergen.") is None
    sentence = "Last year, Anna Holm, 54, built the ferry in Bergen, and the town paid for its engine."
    made = {compress_sentence(sentence, random.Random(seed), trim_sentence) for seed in range(40)}
    assert None not in made and len(made) > 2
    assert compress_sentence(sentence, random.Random(3), trim_sentence) == \
        compress_sentence(sentence, random.Random(3), trim_sentence)
    assert compress_sentence("The pond was quiet at dusk.", random.Random(0), trim_sentence) is None


def test_perturbed_pairs_compress_sentences_for_both_labels_and_change_nothing_without_it():
    evidence = ("In 1921, the Westbrook ferry first sailed to Bergen, and it carried 40 passengers. Anna Holm, 54, "
                "built it in Oslo after the war ended. The service is not run in winter, when the fjord freezes.")
    pool = ["Tom Hale", "Oslo", "Karl Berg"]
    # without compressions, what the code made before they existed (the shipped model's mix stays reproducible)
    assert perturbed_pairs(evidence, random.Random(0), pool) == [
        ("In 1923, the Westbrook ferry first sailed to Bergen, and it carried 40 passengers.", 0, "number"),
        ("In 1921, the Westbrook ferry first sailed to Tom Hale, and it carried 40 passengers.", 0, "name"),
        ("In 1921, the Westbrook ferry first never sailed to Bergen, and it carried 40 passengers.", 0, "negation"),
        ("Anna Holm, 54, built it in Oslo before the war ended.", 0, "direction"),
        ("Anna Holm, 54, built it in Oslo after the war ended.", 1, "copy"),
        ("The service is not run in winter, when the fjord freezes.", 1, "copy"),
        ("In 1921, the Westbrook ferry first sailed to Bergen, and it carried 40 passengers.", 1, "copy")]
    sentences = {s.strip() for s in re.split(r"(?<=\.)\s+", evidence)}
    kinds = Counter()
    for seed in range(30):
        for claim, label, kind in perturbed_pairs(evidence, random.Random(seed), pool, compress=1.0):
            kinds[kind, label] += 1
            if kind == "compressed":
                assert claim not in sentences and label == 1
    assert kinds["compressed", 1] > 0
    assert sum(n for (kind, label), n in kinds.items() if kind.endswith("_compressed") and label == 0) > 0
    assert not any(label == 1 and kind.endswith("_compressed") for kind, label in kinds)

    # compressions as positives only: every fact is changed in a sentence as it stands in the evidence
    def from_whole_sentence(claim):  # one changed fact: a name of up to 2 words, a "not", a number, a direction
        return any(abs(len(claim.split()) - len(s.split())) <= 2 and len(set(s.split()) - set(claim.split())) <= 2
                   for s in sentences)

    kinds, negatives = Counter(), {True: [], False: []}
    for seed in range(30):
        for compress_negatives in (True, False):
            for claim, label, kind in perturbed_pairs(evidence, random.Random(seed), pool, compress=1.0,
                                                      compress_negatives=compress_negatives):
                if label == 0:
                    negatives[compress_negatives].append(claim)
                if not compress_negatives:
                    kinds[kind, label] += 1
    assert all(from_whole_sentence(claim) for claim in negatives[False])
    assert not all(from_whole_sentence(claim) for claim in negatives[True])  # the check can tell them apart
    assert kinds["compressed", 1] > 0 and all(label == 1 for kind, label in kinds if kind == "compressed")


def test_as_reply_dresses_a_claim_without_changing_its_words():
    claim = "The Westbrook ferry first sailed in 1921, with Anna Holm at the helm."
    words = re.findall(r"\w+", claim.lower())
    replies = [as_reply(claim, random.Random(seed)) for seed in range(200)]
    assert replies == [as_reply(claim, random.Random(seed)) for seed in range(200)]
    for reply in replies:  # the claim's words in order after an opening of words of its own
        found = re.findall(r"[\w']+", reply.lower())
        assert found[len(found) - len(words):] == words, reply
    assert any(r.startswith(REPLY_OPENINGS) for r in replies) and any(r.startswith("did you know") for r in replies)
    assert any(r == r.lower() for r in replies) and any(" ," in r for r in replies) and claim not in replies
    assert all("Anna Holm" in r for r in replies if r != r.lower())  # a name keeps its capitals
    assert "i think the ferry sailed." in {as_reply("The ferry sailed.", random.Random(s)) for s in range(200)}


# --- the contrastive test set ---------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
                                   "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth"])
def test_contrastive_set_is_balanced_and_typed(which):
    items = load_contrastive(which)
    labels = Counter(item["label"] for item in items)
    assert labels[0] >= 50 and labels[1] >= 50
    assert all(set(item) == {"evidence", "response", "label", "kind"} for item in items)
    assert {item["kind"] for item in items if item["label"] == 0} == {"number", "name", "negation", "direction"}
    assert {item["kind"] for item in items if item["label"] == 1} == {"paraphrase", "copy"}
    negatives = Counter(item["kind"] for item in items if item["label"] == 0)
    assert max(negatives.values()) - min(negatives.values()) <= 2  # about equal per kind
    assert all(item["evidence"].strip() and item["response"].strip() for item in items)
    words = [(set(re.findall(r"\w+", item["response"].lower())), set(re.findall(r"\w+", item["evidence"].lower())))
             for item in items if item["kind"] == "copy"]
    assert all(said <= evidence for said, evidence in words)  # copied, or nearly (one clause of a sentence)
    assert not any(item["response"] in item["evidence"] for item in items if item["label"] == 0)


def test_the_contrastive_sets_share_no_evidence_and_a_wrong_name_is_refused():
    sets = [{item["evidence"] for item in load_contrastive(which)} for which in CONTRASTIVE_SETS]
    assert len(sets) == 14
    assert all(sets) and not any(a & b for i, a in enumerate(sets) for b in sets[i + 1:])
    with pytest.raises(ValueError, match="which must be one of"):
        load_contrastive("fifteenth")


@pytest.mark.parametrize("which, prefix, kinds", [
    *((w, p, {"reordered_name": 16, "common_noun": 16, "number_word": 16})
      for w, p in (("first", "swap"), ("second", "swapb"), ("third", "swapc"), ("fourth", "swapd"))),
    *((w, p, {"common_noun": 24, "common_noun_reordered": 8, "reordered_name": 8, "number_word": 8})
      for w, p in (("fifth", "swape"), ("sixth", "swapf")))])
def test_the_swap_sets_are_whole_and_typed(which, prefix, kinds):
    """SWAPS.md to SWAPS_FIFTH.md: 48 items, of the kinds each page counts, every field a sentence; each
    contradicted claim differs from its supported one."""
    from calibration.verifier.contrastive import load_swaps

    items = load_swaps(which)
    assert len(items) == 48 and [it["id"] for it in items] == [f"{prefix}-{i:02d}" for i in range(1, 49)]
    assert {kind: sum(it["kind"] == kind for it in items) for kind in kinds} == kinds
    for it in items:
        assert all(isinstance(it[k], str) and it[k].strip() for k in ("evidence", "contradicted", "supported",
                                                                       "distractor"))
        assert it["contradicted"] != it["supported"] and it["distractor"] != it["evidence"]


@pytest.mark.parametrize("which, prefix", [("first", "d"), ("second", "e"), ("third", "h"), ("fourth", "m"),
                                             ("fifth", "p"), ("sixth", "p"),
                                             ("seventh", "r"), ("eighth", "t"), ("ninth", "v"), ("tenth", "t"),
                                             ("eleventh", "k"), ("twelfth", "w")])
def test_each_distractor_set_has_eight_of_each_kind_and_three_distractors_a_row(which, prefix):
    """DISTRACTORS*.md: 48 rows, 8 of each kind, ids in order; three distractors a row, none the evidence."""
    from calibration.verifier.contrastive import load_distractors

    items = load_distractors(which)
    assert [it["id"] for it in items] == [f"{prefix}{i:02d}" for i in range(1, 49)]
    kinds = ("number", "date", "name", "direction", "negation", "relation")
    assert sorted(it["kind"] for it in items) == sorted(k for k in kinds for _ in range(8))
    for it in items:
        assert len(it["distractors"]) == 3 and it["evidence"] not in it["distractors"]
        assert it["contradicted"] != it["supported"]


@pytest.mark.parametrize("which, prefix", [("fresh", "dlg-"), ("third", "d3-"), ("fourth", "d4-"), ("fifth", "d5-"),
                                             ("sixth", "d6-"), ("seventh", "d7-"), ("eighth", "d8-"),
                                             ("ninth", "d9-"), ("tenth", "d10-"),
                                             ("eleventh", "d11-"), ("twelfth", "d12-"),
                                             ("thirteenth", "d13-"), ("fourteenth", "d14-"),
                                             ("fifteenth", "d15-")])
def test_each_dialogue_set_is_whole_and_balanced(which, prefix):
    """DIALOGUE_*.md: 160 replies, 80 of each label, unique ids, every text field a sentence."""
    from calibration.verifier.contrastive import load_dialogue

    items = load_dialogue(which)
    assert len(items) == 160 and len({it["id"] for it in items}) == 160
    assert all(it["id"].startswith(prefix) for it in items)
    assert sum(it["label"] for it in items) == 80
    assert all(isinstance(it[k], str) and it[k].strip() for it in items for k in ("knowledge", "user_input", "reply"))
    with pytest.raises(ValueError, match="load_dialogue: which must be one of"):
        load_dialogue("sixteenth")


@pytest.mark.parametrize("which, articles", [("fresh", 40), ("second", 40), ("third", 40), ("fourth", 40),
                                             ("fifth", 40), ("sixth", 30), ("seventh", 40),
                                             ("eighth", 40), ("ninth", 40),
                                             ("tenth", 40), ("eleventh", 40), ("twelfth", 40),
                                             ("thirteenth", 40), ("fourteenth", 40)])
def test_each_summary_set_has_two_faithful_and_two_changed_summaries_an_article(which, articles):
    from collections import Counter

    from calibration.verifier.contrastive import load_summaries

    items = load_summaries(which)
    assert len(items) == 4 * articles and len({it["id"] for it in items}) == 4 * articles
    per_article = Counter((it["article_id"], it["label"]) for it in items)
    assert len({a for a, _ in per_article}) == articles and set(per_article.values()) == {2}


@pytest.mark.parametrize("which, size", [("train", 1000), ("test", 400), ("news", 600), ("chat", 990)])
def test_the_unit_sets_label_each_sentence_talk_or_checkable(which, size):
    """UNITS_TRAIN.md / UNITS_TEST.md: a claim exactly where a sentence is checkable; a sentence both writers
    wrote (short reactions, well-known facts) carries the same label in both."""
    from calibration.verifier.talk_units import load_units

    rows = load_units(which)
    assert len(rows) == size and len({r["sentence"] for r in rows}) == size
    assert all((r["claim"] is None) == (r["checkable"] == 0) for r in rows)
    other = {r["sentence"].strip().lower(): r["checkable"] for r in load_units("test" if which == "train" else "train")}
    assert all(other.get(r["sentence"].strip().lower(), r["checkable"]) == r["checkable"] for r in rows)
    with pytest.raises(ValueError, match="load_units: which must be one of"):
        load_units("dev")
