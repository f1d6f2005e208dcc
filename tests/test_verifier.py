"""The groundedness verifier: loading (shipped, a folder, broken files), chunking, the metric, the language
switch, and training (seeded, resumable) on a tiny slice."""

import json
import os
import shutil
import threading
from collections import Counter
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest

from judges import (
    FaithfulnesswithHHEM,
    FaithfulnessWithVerifier,
    SingleTurnSample,
    Verifier,
    VerifierError,
)
from judges.data.language import detect_language, split_sentences
from judges.data.opposites import direction_contrasts
from judges.lm.verifier import resolve_verifier
from judges.lm.verifier.files import SHIPPED_MANIFEST, SHIPPED_WEIGHTS, load_shipped
from judges.lm.verifier.onnx_graph import onnx_available, shipped_onnx, shipped_onnx_int8
from judges.lm.onnx_files import length_batches
from judges.lm.verifier.units import best_sentence, shortlist

pytest.importorskip("torch")
pytest.importorskip("transformers")

EVIDENCE = ("The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It was designed by the company of "
            "Gustave Eiffel. The tower is 330 metres tall.")


def tiny_folder(path: Path, labels=("not_supported", "supported"), seed: int = 0) -> Path:
    """A tiny BERT sequence classifier (random weights) with the base model's tokenizer: a stand-in for a
    user's own folder (an NLI model, HHEM, a multilingual model)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from judges.lm.files import embedded_embedder_path

    base = embedded_embedder_path()
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, num_labels=len(labels),
                        id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)})
    BertForSequenceClassification(config).save_pretrained(path)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(base / name, path / name)
    return path


def test_the_shipped_verifier_loads_and_tells_a_changed_fact_from_a_paraphrase():
    verifier = resolve_verifier(None)
    assert verifier is resolve_verifier("embedded") and verifier.languages == ("en",)
    p = verifier.probabilities([(EVIDENCE, "The Eiffel Tower was completed in 1889."),
                                (EVIDENCE, "The Eiffel Tower was completed in 1999."),
                                (EVIDENCE, "Work on the Paris landmark finished in 1889.")])
    assert p.shape == (3,) and ((0 <= p) & (p <= 1)).all()
    assert p[0] > p[1] and p[2] > p[1]


def test_a_float32_verifier_scores_each_pair_once_and_an_int8_one_every_time(monkeypatch):
    """The judge and the calibrator's verifier signal ask for the same (unit, claim) pairs: the second asks
    the model for none. int8 keeps nothing (its probabilities move with the batch a pair shares)."""
    verifier, int8 = Verifier(), Verifier(quantize=True)
    asked: list[int] = []
    for model in (verifier, int8):
        computed = model._computed
        monkeypatch.setattr(model, "_computed", lambda pairs, computed=computed: asked.append(len(pairs)) or computed(pairs))
    first = verifier.support([EVIDENCE], ["The Eiffel Tower was completed in 1889.", "It is in Rome."])
    scored = sum(asked)
    again = verifier.support([EVIDENCE], ["The Eiffel Tower was completed in 1889.", "It is in Rome."])
    assert again == first and sum(asked) == scored > 0
    pairs = [(EVIDENCE, "It is in Rome."), (EVIDENCE, "It is in Rome."), (EVIDENCE, "A new claim.")]
    before = len(asked)
    once, twice = verifier.probabilities(pairs), verifier.probabilities(pairs)
    assert once[0] == once[1] and np.array_equal(once, twice)
    assert len(asked) == before + 1 and asked[-1] <= 2  # the distinct new pairs, asked for once
    asked.clear()
    int8.probabilities(pairs[:2])
    int8.probabilities(pairs[:2])
    assert asked == [2, 2] and int8._known is None
    int8.forget()  # nothing kept: nothing to forget
    asked.clear()
    verifier.forget()  # a first reading again: the pairs are scored anew, to the same probabilities
    assert np.array_equal(verifier.probabilities(pairs), once) and asked == [2]


def test_the_int8_verifier_is_the_shipped_one_quantized_and_plugs_in_by_name(tmp_path):
    """``"embedded-int8"``: linear layers in int8, the same ranking as float32 on the Eiffel pairs (single
    probabilities can move by much more: docs/verifier.md measures the agreement); a metric takes it by name
    and a folder model can be quantized too."""
    pairs = [(EVIDENCE, "The Eiffel Tower was completed in 1889."), (EVIDENCE, "The Eiffel Tower was completed in 1999."),
             (EVIDENCE, "Work on the Paris landmark finished in 1889.")]
    int8 = resolve_verifier("embedded-int8")
    assert int8 is not resolve_verifier(None) and int8.name == "groundedness-minilm-int8"
    assert int8.runtime == ("onnx" if onnx_available() else "torch")
    on_torch = Verifier(quantize=True, runtime="torch")
    assert on_torch.name == int8.name and on_torch.runtime == "torch"
    assert ".quantized." in type(on_torch._model.bert.encoder.layer[0].attention.self.query).__module__
    full = resolve_verifier(None).probabilities(pairs)
    for quantized in (int8, on_torch):
        quick = quantized.probabilities(pairs)
        assert not np.array_equal(full, quick) and quick[0] > quick[1] and quick[2] > quick[1]  # same ranking
        assert np.array_equal(quick, Verifier(quantize=True, runtime=quantized.runtime).probabilities(pairs))
    result = FaithfulnessWithVerifier(verifier="embedded-int8").score(
        SingleTurnSample(response="The Eiffel Tower was completed in 1889.", retrieved_contexts=[EVIDENCE]))
    expected = int8.support([EVIDENCE], ["The Eiffel Tower was completed in 1889."])[0]["probability"]
    assert result.verdicts[0]["probability"] == pytest.approx(expected)
    folder = Verifier(str(tiny_folder(tmp_path / "m")), quantize=True)
    assert folder.name == "m-int8" and folder.probabilities(pairs[:1]).shape == (1,)
    for name in ("embedded", "embedded-int8"):  # English only: never the multilingual fallback
        with pytest.raises(ValueError, match="covers English only"):
            FaithfulnessWithVerifier(multilingual_verifier=name)
    from calibration.fitting.finetune import finetune_verifier

    with pytest.raises(ValueError, match="trains the float32 shipped verifier.*quantize"):
        finetune_verifier(FaithfulnessWithVerifier(verifier="embedded-int8"), None, None)


@pytest.mark.skipif(not onnx_available(), reason="needs onnxruntime and onnx (the embeddings extra)")
def test_on_onnx_runtime_the_shipped_verifier_gives_torchs_probabilities_from_a_cached_export(tmp_path, monkeypatch):
    """The default runtime for the shipped float32 verifier: its graph exported once into the cache (a
    damaged file exported again), the same token ids and chunks as the transformers tokenizer, probabilities
    within 1e-5 of torch's; the other runtimes and the fallback."""
    monkeypatch.setenv("DSPY_JUDGES_CACHE", str(tmp_path / "cache"))
    onnx, torch_ = Verifier(runtime="onnx"), Verifier(runtime="torch")
    assert onnx.runtime == "onnx" and torch_.runtime == "torch" and Verifier().runtime == "onnx"
    graph = shipped_onnx()
    assert graph.parent == tmp_path / "cache" and graph.name.startswith("groundedness-minilm.")
    long_evidence = " ".join(f"Fact number {i} says the river is {i} kilometres long." for i in range(80))
    pairs = [(EVIDENCE, "The Eiffel Tower was completed in 1889."), (EVIDENCE, "It was built in 1999."),
             (long_evidence, "The river is 37 kilometres long."), ("Ça coûte 30 € à Zürich.", "北京 is naïve."),
             ("a", "b " * 400)]
    assert np.abs(onnx.probabilities(pairs) - torch_.probabilities(pairs)).max() < 1e-5
    assert onnx.chunks([long_evidence]) == torch_.chunks([long_evidence]) and len(onnx.chunks([long_evidence])) > 3
    ids = [e.ids for e in onnx._tokenizer.encode_batch(pairs)]
    expected = [torch_._tokenizer(e, c, truncation="longest_first", max_length=256)["input_ids"] for e, c in pairs]
    assert [[i for i in row if i != 0] for row in ids] == expected  # the same ids, padding aside
    stamp = graph.stat().st_mtime_ns
    assert shipped_onnx() == graph and graph.stat().st_mtime_ns == stamp  # reused, not exported again
    graph.write_bytes(graph.read_bytes()[:5000])
    assert np.allclose(Verifier(runtime="onnx").probabilities(pairs[:2]), onnx.probabilities(pairs[:2]))
    assert graph.stat().st_size > 1_000_000  # the damaged file was exported again
    with pytest.raises(ValueError, match="runtime must be one of"):
        Verifier(runtime="gpu")
    with pytest.raises(ValueError, match="shipped verifier only"):
        Verifier(str(tiny_folder(tmp_path / "m")), runtime="onnx")
    # int8: the graph quantized once into the cache beside the float32 one; a damaged one is made again as int8
    int8 = Verifier("embedded-int8", runtime="onnx")
    assert int8.runtime == "onnx" and Verifier(quantize=True).runtime == "onnx"
    quantized = shipped_onnx_int8()
    assert quantized.parent == graph.parent and ".int8-ort" in quantized.name
    assert 1_000_000 < quantized.stat().st_size < graph.stat().st_size / 3
    quick = int8.probabilities(pairs[:2])
    assert not np.allclose(quick, onnx.probabilities(pairs[:2]), atol=1e-5) and quick[0] > quick[1]
    quantized.write_bytes(quantized.read_bytes()[:5000])
    assert np.array_equal(Verifier(quantize=True, runtime="onnx").probabilities(pairs[:2]), quick)
    assert 1_000_000 < quantized.stat().st_size < graph.stat().st_size / 3
    # two quantizing at once (two test processes, two evaluate threads): ONNX Runtime's quantizer writes a
    # side file under a fixed name beside its input; each must read its own link, or one deletes the other's
    quantized.unlink()
    made, failed = [], []

    def make():
        try:
            made.append(shipped_onnx_int8())
        except Exception as err:  # noqa: BLE001 - reported below
            failed.append(err)

    threads = [threading.Thread(target=make) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failed and made == [quantized, quantized]
    assert sorted(p.name for p in graph.parent.iterdir()) == sorted([graph.name, quantized.name])  # nothing left
    assert np.array_equal(Verifier(quantize=True, runtime="onnx").probabilities(pairs[:2]), quick)

    def broken(*args, **kwargs):
        raise RuntimeError("no exporter here")

    monkeypatch.setattr("judges.lm.verifier.onnx_graph.shipped_onnx", broken)
    with pytest.warns(RuntimeWarning, match="runs on torch.*no exporter here"):
        assert Verifier().runtime == "torch"
    with pytest.raises(VerifierError, match=r"could not run on ONNX Runtime \(graph cache .*cache\): no exporter here"):
        Verifier(runtime="onnx")
    monkeypatch.setattr("judges.lm.verifier.onnx_graph.onnx_available", lambda: False)
    assert Verifier().runtime == "torch"
    with pytest.raises(VerifierError, match=r"not installed: pip install 'dspy-judges\[embeddings\]'"):
        Verifier(runtime="onnx")


@pytest.mark.skipif(not onnx_available(), reason="needs onnxruntime and onnx (the embeddings extra)")
def test_an_unwritable_graph_cache_falls_back_to_torch_or_names_the_folder(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("DSPY_JUDGES_CACHE", str(tmp_path / "a-file" / "cache"))
    with pytest.warns(RuntimeWarning, match="cannot be written to .*a-file.*DSPY_JUDGES_CACHE"):
        assert Verifier().runtime == "torch"
    with pytest.raises(VerifierError, match="cannot be written to"):
        Verifier(runtime="onnx")
    # An existing folder that refuses the write (read-only; as root chmod would not stop it, so the probe's
    # write is made to fail): caught before torch loads, not by the exporter.
    locked = tmp_path / "locked"
    locked.mkdir()
    monkeypatch.setenv("DSPY_JUDGES_CACHE", str(locked))
    real_write = Path.write_bytes

    def read_only(self, data):
        if self.parent == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", read_only)
    with pytest.warns(RuntimeWarning, match="cannot be written to .*locked.*DSPY_JUDGES_CACHE"):
        assert Verifier().runtime == "torch"
    assert list(locked.iterdir()) == []


@pytest.mark.skipif(not onnx_available(), reason="needs onnxruntime and onnx (the embeddings extra)")
def test_stale_export_leftovers_are_swept_and_a_graph_onnx_cannot_run_is_kept(tmp_path, monkeypatch):
    import time

    import onnxruntime

    monkeypatch.setenv("DSPY_JUDGES_CACHE", str(tmp_path))
    graph = shipped_onnx()
    stale, fresh = tmp_path / "groundedness-minilm.x.onnx.1.2.partial", tmp_path / "groundedness-minilm.y.onnx.3.4.partial"
    for path in (stale, fresh):
        path.write_bytes(b"half a graph")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    assert shipped_onnx() == graph and not stale.exists() and fresh.exists()

    def refuse(*args, **kwargs):
        raise RuntimeError("unsupported opset")

    monkeypatch.setattr(onnxruntime, "InferenceSession", refuse)
    with pytest.raises(VerifierError, match="cannot run .*unsupported opset"):
        Verifier(runtime="onnx")
    assert graph.is_file()  # it passes onnx's checker: kept, not exported again and again


@pytest.mark.skipif(not onnx_available(), reason="needs onnxruntime and onnx (the embeddings extra)")
def test_a_process_scoring_with_the_cached_graph_never_imports_torch(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "DSPY_JUDGES_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    script = ("import sys; from judges import FaithfulnessWithVerifier, SingleTurnSample; "
              "r = FaithfulnessWithVerifier().score(SingleTurnSample(response='It was completed in 1889.', "
              "retrieved_contexts=['It was built in 1889.'])); "
              "print(r.supported_share, 'torch' in sys.modules, 'transformers' in sys.modules)")
    root = Path(__file__).resolve().parents[1]
    first = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True, timeout=300)
    second = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True, timeout=300)
    assert first.stdout.split() == ["1.0", "True", "True"], first.stderr[-2000:]  # the export needs torch, once
    assert second.stdout.split() == ["1.0", "False", "False"], second.stderr[-2000:]


def test_a_missing_changed_or_unreadable_shipped_file_is_a_named_error(tmp_path):
    with pytest.raises(VerifierError, match="is missing"):
        load_shipped(tmp_path / "none.safetensors", SHIPPED_MANIFEST)
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(SHIPPED_WEIGHTS.read_bytes()[:1000])
    with pytest.raises(VerifierError, match="does not match its manifest"):
        load_shipped(cut, SHIPPED_MANIFEST)
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"sha256": json.loads(SHIPPED_MANIFEST.read_text())["sha256"].replace("a", "b")}))
    with pytest.raises(VerifierError, match="does not match"):
        load_shipped(SHIPPED_WEIGHTS, manifest)
    manifest.write_text("{not json")
    with pytest.raises(VerifierError, match="unreadable"):
        load_shipped(SHIPPED_WEIGHTS, manifest)


def test_any_sequence_classification_folder_plugs_in_with_its_supported_label(tmp_path):
    folder = tiny_folder(tmp_path / "nli", labels=("entailment", "neutral", "contradiction"))
    verifier = Verifier(folder)  # "entailment" is recognised as the supported label
    p = verifier.probabilities([(EVIDENCE, "It is tall."), ("a", "b")])
    assert p.shape == (2,) and ((0 < p) & (p < 1)).all()
    by_index = Verifier(folder, supported_label=0).probabilities([(EVIDENCE, "It is tall.")])
    assert by_index[0] == pytest.approx(p[0])
    other = tiny_folder(tmp_path / "odd", labels=("LABEL_0", "LABEL_1"))
    with pytest.raises(VerifierError, match="say which label means supported"):
        Verifier(other)
    with pytest.raises(VerifierError, match="no label named 'yes'"):
        Verifier(other, supported_label="yes")
    with pytest.raises(VerifierError, match="not a Hugging Face model folder"):
        Verifier(tmp_path)


def test_long_evidence_is_chunked_with_overlap_and_each_claim_takes_its_best_chunk_or_sentence(monkeypatch):
    verifier = resolve_verifier(None)
    sentences = [f"Fact number {i} says the river is {i} kilometres long." for i in range(40)]
    chunks = verifier.chunks([" ".join(sentences)])
    assert len(chunks) > 2
    for first, second in zip(chunks, chunks[1:]):  # consecutive chunks share a sentence
        assert first.split(". ")[-1].rstrip(".") in second
    units = verifier.units([" ".join(sentences)])
    assert units[:len(chunks)] == chunks and set(units[len(chunks):]) == set(sentences)
    rows = verifier.support([" ".join(sentences)], ["The river is 37 kilometres long."])
    assert rows[0]["chunk"] in units and "37" in rows[0]["sentence"]
    # Every other "Fact number" sentence gives the river another length, but the unit holding "37" supports the
    # claim: a sentence outside it does not override that support (a long text's sentences about alike things).
    assert rows[0]["probability"] >= 0.5 and rows[0]["contradiction"] is None
    only_chunks = Verifier(single_sentences=False, check_contradictions=False)
    assert only_chunks.units([" ".join(sentences)]) == chunks
    assert only_chunks.support([" ".join(sentences)], ["The river is 37 kilometres long."])[0]["chunk"] in chunks
    # A copied sentence next to another: the chunk alone misread it (P 0.13 in docs/verifier.md); its sentence not.
    evidence = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. The tower is 330 metres tall."
    claim = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris."
    assert only_chunks.support([evidence], [claim])[0]["probability"] < 0.5 < verifier.support([evidence], [claim])[0]["probability"]
    assert best_sentence("Cats purr. Dogs bark loudly.", "the dogs bark") == "Dogs bark loudly."
    # a unit's sentences from the split that made it: the same answer without splitting the unit again
    assert best_sentence("Cats purr. Dogs bark loudly.", "the dogs bark", ["Cats purr.", "Dogs bark loudly."]) == \
        "Dogs bark loudly."
    import judges.lm.verifier.model as V

    splits, real_split = [], V.split_sentences
    monkeypatch.setattr(V, "split_sentences", lambda text: splits.append(text) or real_split(text))
    verifier.support([" ".join(sentences)], ["The river is 37 kilometres long.", "Fact 2 is 2 kilometres."])
    assert splits == [" ".join(sentences)]  # the evidence is split once; its units are never split again


def test_a_shortlist_scores_each_claim_against_its_k_units_sharing_most_rare_words():
    units = ["The river is long. The lake is deep.", "The river is long.", "The lake is deep.",
             "The river flows north past the old mill."]
    # "river" is in three units, "mill" in one: the rare word decides; equals go shorter first.
    assert shortlist(units, ["The mill by the river.", "The lake is deep.", "Nothing shared at all."], 2) == [
        [1, 3], [0, 2], [0, 1, 2, 3]]  # no word shared: nothing to rank by, every unit
    assert shortlist(units, ["The mill by the river."], 1) == [[3]]
    sentences = [f"Fact number {i} says the river is {i} kilometres long." for i in range(40)]
    evidence = [" ".join(sentences)]
    # every shortlisted unit scored; the "Fact number" sentences contradict one another, so the unit rules are read
    # without the check against contradictions
    everything, short = Verifier(top_units=None), Verifier(stop_at=None, check_contradictions=False)
    claims = ["The river is 37 kilometres long.", "Fact number 3 says the river is 3 kilometres long."]
    units = everything.units(evidence)
    rows = short.support(evidence, claims)
    for row, claim, chosen in zip(rows, claims, shortlist(units, claims, 2)):
        assert row["chunk"] in [units[j] for j in chosen] and len(chosen) == 2
        p = everything.probabilities([(units[j], claim) for j in chosen])
        assert row["probability"] == pytest.approx(p.max(), abs=1e-6)
    assert rows[1]["sentence"] == sentences[3]  # its copy is on the list
    assert [r["units_scored"] for r in rows] == [2, 2]
    unshared = short.support(evidence, ["Zebras graze."])  # no word shared: every unit is scored
    assert unshared[0]["units_scored"] == len(units) > 2
    assert resolve_verifier(None).top_units == 2 and everything.top_units is None  # 2 is the default
    assert shortlist(units, claims, len(units)) == [list(range(len(units)))] * 2
    cut = Verifier(top_units=1).support([EVIDENCE], ["It was designed by the company of Gustave Eiffel."])
    assert cut[0]["chunk"] == "It was designed by the company of Gustave Eiffel."  # 1 of 4 units: its copy
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="top_units"):
            Verifier(top_units=bad)


def test_stop_at_scores_the_shortest_unit_first_and_the_rest_only_under_it():
    """With ``stop_at`` a claim whose shortest shortlisted unit reaches it is not scored further; its
    probability is then at most ``1 - stop_at`` under the best of every unit's, and every claim's verdict at
    ``stop_at`` is the one every unit gives."""
    sentences = [f"Fact number {i} says the river is {i} kilometres long." for i in range(40)]
    evidence = [" ".join(sentences)]
    claims = ["Fact number 3 says the river is 3 kilometres long.", "The river is 37 kilometres long.",
              "Fact number 5 says the lake is 9 kilometres deep."]
    full = Verifier(stop_at=None, check_contradictions=False).support(evidence, claims)  # (as the shortlist test)
    assert [r["units_scored"] for r in full] == [2, 2, 2]
    asked: list[list[tuple[str, str]]] = []
    cascade = Verifier(check_contradictions=False)
    assert cascade.stop_at == resolve_verifier(None).stop_at == 0.9  # the default
    real = cascade.probabilities
    cascade.probabilities = lambda pairs: asked.append(list(pairs)) or real(pairs)
    rows = cascade.support(evidence, claims)
    units = cascade.units(evidence)
    shortest = [min((units[j] for j in chosen), key=len) for chosen in shortlist(units, claims, 2)]
    assert asked[0] == list(zip(shortest, claims))  # the first pass: each claim against its shortest unit
    for row, whole in zip(rows, full):
        assert (row["probability"] >= 0.9) == (whole["probability"] >= 0.9)
        assert whole["probability"] - 0.1 <= row["probability"] <= whole["probability"] + 1e-9
    stopped = [row["units_scored"] == 1 for row in rows]
    assert all(row["chunk"] == unit for row, unit, s in zip(rows, shortest, stopped) if s)
    assert any(stopped) and all(row["probability"] >= 0.9 for row, s in zip(rows, stopped) if s)
    assert all(row == whole for row, whole, s in zip(rows, full, stopped) if not s)  # under 0.9: every unit
    assert sum(len(call) for call in asked) == sum(row["units_scored"] for row in rows) < 6
    strict = cascade.support(evidence, claims, cutoff=0.99)  # a higher cut-off: nothing stops under it
    assert [r["units_scored"] for r in strict] == [2, 2, 2]
    assert [r["probability"] for r in strict] == pytest.approx([r["probability"] for r in full], abs=1e-6)
    sample = SingleTurnSample(response=" ".join(claims[:2]), retrieved_contexts=evidence)
    for threshold, scored in ((0.5, [1, 1]), (0.99, [2, 2])):  # the metric's threshold is its cut-off
        verdicts = FaithfulnessWithVerifier(threshold=threshold).score(sample)["verdicts"]
        assert [v["units_scored"] for v in verdicts] == scored
    for bad in (0, -0.1, 1.5, True, "0.9"):
        with pytest.raises(ValueError, match="stop_at"):
            Verifier(stop_at=bad)


def test_direction_contrasts_turn_only_the_words_the_evidence_says_the_other_way_round():
    evidence = "Sales rose in May, and the north gate opened before noon."
    assert direction_contrasts("Sales fell in May.", evidence) == ["Sales rose in May."]
    assert direction_contrasts("Sales rose in May.", evidence) == []  # the evidence's own word
    assert direction_contrasts("The North gate opened After noon.", evidence) == ["The North gate opened Before noon."]
    assert direction_contrasts("Sales fell, then fell again.", evidence) == ["Sales rose, then fell again.",
                                                                            "Sales fell, then rose again."]
    assert direction_contrasts("Sales fell in May.", "Sales rose in May and fell in June.") == []  # it has both
    assert direction_contrasts("Sales ended lower in May.", evidence) == []  # "higher" is not in the evidence
    assert direction_contrasts("Die Preise fielen.", evidence) == []


def test_a_claim_the_evidence_says_the_other_way_round_is_checked_against_its_opposite():
    """``check_opposites`` (the default): a claim with a direction word whose opposite its unit uses instead is
    scored again as that opposite, against the same unit, and keeps min(P, sigmoid(logit P - logit P(opposite)));
    every other claim's row is what it would be without the check."""
    evidence = ["Sales rose in May, and the north gate opened before noon."]
    claims = ["Sales fell in May.", "Sales rose in May.", "The north gate opened after noon."]
    checked = Verifier(check_contradictions=False)  # the check against opposites alone (contradictions: below)
    plain = Verifier(check_opposites=False, check_contradictions=False)
    assert checked.check_opposites and resolve_verifier(None).check_opposites  # the default
    asked: list[list[tuple[str, str]]] = []
    real = checked.probabilities
    checked.probabilities = lambda pairs: asked.append(list(pairs)) or real(pairs)
    rows, alone = checked.support(evidence, claims), plain.support(evidence, claims)
    assert [r["opposite"] for r in rows] == ["Sales rose in May.", None, "The north gate opened before noon."]
    assert asked[-1] == [(evidence[0], "Sales rose in May."), (evidence[0], "The north gate opened before noon.")]
    for row, before in zip(rows, alone):
        if row["opposite"] is None:
            assert row == before and before["opposite"] is None
            continue
        logit = lambda p: np.log(p) - np.log1p(-p)  # noqa: E731
        margin = logit(before["probability"]) - logit(row["opposite_probability"])
        assert row["probability"] == pytest.approx(min(before["probability"], 1 / (1 + np.exp(-margin))), abs=1e-9)
        assert row["chunk"] == before["chunk"] and before["opposite"] is None
    assert rows[0]["probability"] < 0.5 < rows[0]["opposite_probability"]  # the shipped verifier prefers "rose"

    fixed = {"Sales fell in May.": 0.8, "Sales rose in May.": 0.95, "The north gate opened after noon.": 0.8,
             "The north gate opened before noon.": 0.3}  # a scripted scorer: the formula, by hand
    checked.probabilities = lambda pairs: np.array([fixed[claim] for _, claim in pairs])
    rows = checked.support(evidence, claims)
    # 0.8 * 0.05 / (0.8 * 0.05 + 0.2 * 0.95): odds 0.8/0.2 against 0.95/0.05
    assert [r["probability"] for r in rows] == pytest.approx([0.17391304, 0.95, 0.8])
    assert [r["opposite_probability"] for r in rows] == [0.95, None, 0.3]  # a less likely opposite changes nothing
    sample = SingleTurnSample(response="Sales fell in May.", retrieved_contexts=evidence)
    metric = FaithfulnessWithVerifier()
    assert ("contradicted by the evidence sentence 'Sales rose in May, and the north gate opened before noon.', "
            "which supports 'Sales rose in May.' instead") in metric.feedback(metric.score(sample))
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="check_opposites"):
            Verifier(check_opposites=bad)


def test_the_metric_scores_sentences_without_an_lm_and_names_the_failed_claim():
    metric = FaithfulnessWithVerifier(aggregate="mean")
    assert FaithfulnesswithHHEM is FaithfulnessWithVerifier and not metric.needs_lm
    sample = SingleTurnSample(response="The Eiffel Tower was completed in 1889. It is 950 metres tall.",
                              retrieved_contexts=[EVIDENCE])
    result = metric.score(sample)
    assert result.claims_source == "sentences" and len(result.verdicts) == 2
    probabilities = [r["probability"] for r in result.verdicts]
    assert result.weakest == min(probabilities) and result.score == pytest.approx(sum(probabilities) / 2)
    assert result.supported_share == sum(p >= 0.5 for p in probabilities) / 2
    assert FaithfulnessWithVerifier(aggregate="share").score(sample).score == result.supported_share
    assert FaithfulnessWithVerifier(aggregate="weakest").score(sample).score == result.weakest
    text = metric.feedback(result)
    assert "weakest claim P=" in text and f"(mean; {sum(p >= 0.5 for p in probabilities)} of 2 claims at P >= 0.5)" in text
    assert not result.verdicts[1]["supported"]
    assert "'It is 950 metres tall.' (P=0.0" in text and "contradicted by the evidence sentence" in text
    assert metric.score({"response": "", "retrieved_contexts": [EVIDENCE]}).undefined_reason
    with pytest.raises(ValueError, match="claims="):
        FaithfulnessWithVerifier(claims="words")
    with pytest.raises(ValueError, match=r"faithfulness_with_verifier: aggregate='median' is not one of"):
        FaithfulnessWithVerifier(aggregate="median")
    assert FaithfulnessWithVerifier(claims="lm").needs_lm


def test_a_judge_saved_before_aggregate_existed_loads_scoring_as_it_was_saved():
    """Saved compiled judges of FaithfulnessWithVerifier scored the share of supported claims; without
    ``aggregate`` in the file they load with ``"share"``, not today's default, so their calibrator still fits."""
    from calibration.fitting.compiled import CompiledJudge, checked_params, checksum

    body = CompiledJudge(FaithfulnessWithVerifier(aggregate="weakest")).to_dict()
    assert CompiledJudge.from_dict(body).judge.aggregate == "weakest"
    del body["judge"]["params"]["aggregate"]
    body["checksum"] = checksum({k: v for k, v in body.items() if k != "checksum"})
    assert CompiledJudge.from_dict(body).judge.aggregate == "share"
    assert FaithfulnessWithVerifier().aggregate == "combined"  # None resolves where the combination fits
    assert checked_params(FaithfulnessWithVerifier, {"threshold": 0.7}) == {"aggregate": "share", "unclaimed_score": 0.0,
                                                                         "threshold": 0.7}


def test_the_default_score_is_the_shipped_combination_of_named_inputs():
    """The combination's formula, read from its file by hand; the raw aggregates stay available by name."""
    from judges.metrics.rag.verified import COMBINATION, COMBINATION_INPUTS, shipped_combination

    metric = FaithfulnessWithVerifier()
    sample = SingleTurnSample(user_input="Is it old?", response="Oh wow, so cool! The Eiffel Tower was completed in "
                              "1889. It is 950 metres tall.", retrieved_contexts=[EVIDENCE])
    result = metric.score(sample)
    shipped = json.loads(COMBINATION.read_text(encoding="utf-8"))
    inputs = result.combination
    assert set(shipped["inputs"]) <= set(inputs) == set(COMBINATION_INPUTS)
    assert inputs["verifier_mean"] == result.mean_probability and inputs["verifier_weakest"] == result.weakest
    # "950" is not in the evidence; "Eiffel Tower" and "1889" are.
    assert inputs["learned_set_aside_share"] == pytest.approx(1 / 3) and inputs["specifics_supported"] == pytest.approx(2 / 3)
    z = sum(c * (inputs[n] - m) / s for n, m, s, c in zip(shipped["inputs"], shipped["mean"], shipped["scale"],
                                                           shipped["coef"])) + shipped["intercept"]
    gate = min(1.0, inputs[shipped["gate"].split(" / ")[0]] / 0.5) if shipped["gate"] else 1.0
    assert result.score == pytest.approx(gate / (1 + np.exp(-z)))
    assert result.set_aside == [{"sentence": "Oh wow, so cool!", "kind": "backchannel"}]
    text = metric.feedback(result)
    assert "(combined: verifier mean" in text and "'It is 950 metres tall.'" in text
    assert "read as talk, not capping the score: 'Oh wow, so cool!' (backchannel)" in text
    assert metric.model_identity()["combination"] == "sha256:" + shipped_combination()["sha256"]
    assert "combination" not in FaithfulnessWithVerifier(aggregate="mean").model_identity()
    assert FaithfulnessWithVerifier(aggregate="mean").score(sample).score == result.mean_probability
    # Talk has a low P of its own but does not cap the score; a changed fact does.
    faithful = metric.score(SingleTurnSample(response="Oh wow, I love Paris! The Eiffel Tower was completed in 1889. "
                                             "Have you been?", retrieved_contexts=[EVIDENCE]))
    changed = metric.score(SingleTurnSample(response="The Eiffel Tower was completed in 1899.",
                                            retrieved_contexts=[EVIDENCE]))
    assert faithful.weakest < 0.5 <= faithful.combination["learned_checkable_weakest"]
    assert faithful.score > changed.score
    # Fitted on the shipped verifier over the sentences: elsewhere the mean is the score, and "combined" is refused.
    assert FaithfulnessWithVerifier(claims="checkable").aggregate == "mean"
    assert FaithfulnessWithVerifier(verifier="/models/hhem").aggregate == "mean"
    assert FaithfulnessWithVerifier(verifier="embedded-int8").aggregate == "mean"
    for bad in ({"claims": "lm"}, {"verifier": "/models/hhem"}, {"verifier": "embedded-int8"}):
        with pytest.raises(ValueError, match="faithfulness_with_verifier: aggregate='combined' needs claims='sentences' and the shipped float32"):
            FaithfulnessWithVerifier(aggregate="combined", **bad)


def test_the_combinations_word_signals_read_the_whole_evidence_or_only_the_verifiers_units():
    """``words_read="units"``: the names, numbers and word pairs of a claim count as found only in the units the
    verifier read it against, so a distractor context holding its wrong number does not lift it."""
    from judges.metrics.rag.verified import shipped_combination

    metric = FaithfulnessWithVerifier()
    claim = "The Eiffel Tower is 93 metres tall."
    distractor = "The Statue of Liberty is 93 metres tall."
    checked = {"verdicts": [{"claim": claim, "probability": 0.1, "chunk": EVIDENCE}], "weakest": 0.1,
               "mean_probability": 0.1}
    whole, _ = metric.combination_inputs(metric.model(), claim, [EVIDENCE, distractor], checked)
    units, _ = metric.combination_inputs(metric.model(), claim, [EVIDENCE, distractor], checked, words_read="units")
    assert whole["specifics_supported"] == 1.0 and units["specifics_supported"] == pytest.approx(1 / 2)
    assert units["bigram_support"] < whole["bigram_support"] == 1.0
    assert {k: v for k, v in units.items() if k not in ("specifics_supported", "bigram_support")} == {
        k: v for k, v in whole.items() if k not in ("specifics_supported", "bigram_support")}
    # The shipped file reads the units: scored, whichever context the verifier reads, one specific is not found.
    assert shipped_combination()["words_read"] == "units"
    scored = metric.score(SingleTurnSample(response=claim, retrieved_contexts=[EVIDENCE, distractor]))
    assert scored.combination["specifics_supported"] == pytest.approx(1 / 2)
    with pytest.raises(ValueError, match="combination's words_read='sentences' is not one of"):
        metric.combination_inputs(metric.model(), claim, [EVIDENCE], checked, words_read="sentences")


def test_the_combinations_specifics_read_a_names_ending_as_its_file_says(monkeypatch):
    """``name_endings``: "keep" reads "Eiffel's" and "I'm" as names the evidence lacks; "strip" finds Eiffel and
    counts no "I". A score reads what the shipped file names ("keep" when it names nothing)."""
    from judges.metrics.rag.verified import shipped_combination

    metric = FaithfulnessWithVerifier()
    reply = "Well, I'm told Eiffel's tower was completed in 1889."
    checked = {"verdicts": [{"claim": reply, "probability": 0.9, "chunk": EVIDENCE}], "weakest": 0.9,
               "mean_probability": 0.9}
    kept, _ = metric.combination_inputs(metric.model(), reply, [EVIDENCE], checked, words_read="units")
    read, _ = metric.combination_inputs(metric.model(), reply, [EVIDENCE], checked, words_read="units",
                                        name_endings="strip")
    assert kept["specifics_supported"] == pytest.approx(1 / 3) and read["specifics_supported"] == 1.0
    assert {k: v for k, v in kept.items() if k != "specifics_supported"} == {
        k: v for k, v in read.items() if k != "specifics_supported"}
    assert shipped_combination()["name_endings"] == "strip"
    scored = metric.score(SingleTurnSample(response=reply, retrieved_contexts=[EVIDENCE]))
    assert scored.combination["specifics_supported"] == 1.0
    older = {k: v for k, v in shipped_combination().items() if k != "name_endings"}  # a file from before round 9
    monkeypatch.setattr("judges.metrics.rag.verified.shipped_combination", lambda: older)
    metric.model().forget()
    scored = metric.score(SingleTurnSample(response=reply, retrieved_contexts=[EVIDENCE]))
    assert scored.combination["specifics_supported"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="specifics: name_endings must be one of"):
        metric.combination_inputs(metric.model(), reply, [EVIDENCE], checked, name_endings="drop")


def test_a_unit_set_aside_as_talk_is_checked_when_it_repeats_the_evidence():
    """``talk_echo``: the classifier sets aside a copy of the evidence with its negation removed; with a share named,
    that copy is checked (its P caps the score), while talk and a question sharing few frame words stay aside."""
    from judges.data.contrasts import frame_echo

    evidence = "The strike planned for next week will not take place, the union said after talks."
    copy = "The strike planned for next week will take place."
    assert frame_echo(copy, evidence) == 1.0
    assert frame_echo("Oh, I would love to visit the caves someday!", "Visitors to Harwood Caves fell.") < 0.5
    assert frame_echo("It will take place.", evidence) == 0.0  # fewer than three frame words: nothing to repeat
    metric = FaithfulnessWithVerifier()
    checked = {"verdicts": [{"claim": copy, "probability": 0.3, "chunk": evidence}], "weakest": 0.3,
               "mean_probability": 0.3}
    alone, aside = metric.combination_inputs(metric.model(), copy, [evidence], checked, words_read="units")
    assert [u["sentence"] for u in aside] == [copy] and alone["learned_nothing_checkable"] == 1.0
    echoed, aside = metric.combination_inputs(metric.model(), copy, [evidence], checked, words_read="units",
                                              talk_echo=0.8)
    assert aside == [] and echoed["learned_checkable_weakest"] == 0.3 and echoed["learned_nothing_checkable"] == 0.0
    talk = "Haha, that sounds like a relief for everyone. Will the strike planned for next week take place?"
    assert frame_echo(split_sentences(talk)[1], evidence) == 1.0  # a question: set aside however much it repeats
    rows = {"verdicts": [{"claim": c, "probability": 0.2, "chunk": evidence} for c in split_sentences(talk)],
            "weakest": 0.2, "mean_probability": 0.2}
    kept_talk, aside = metric.combination_inputs(metric.model(), talk, [evidence], rows, talk_echo=0.8)
    assert len(aside) == 2 and kept_talk["learned_nothing_checkable"] == 1.0
    # An echoed unit the sentences did not give a row is verified on its own.
    other = {"verdicts": [{"claim": "Another sentence.", "probability": 0.3, "chunk": evidence}], "weakest": 0.3,
             "mean_probability": 0.3}
    fresh, _ = metric.combination_inputs(metric.model(), copy, [evidence], other, talk_echo=0.8)
    assert fresh["learned_checkable_weakest"] == pytest.approx(
        metric.verify_claims(metric.model(), [copy], [evidence])["weakest"])
    with pytest.raises(ValueError, match="talk_echo=0, not a share"):
        metric.combination_inputs(metric.model(), copy, [evidence], checked, talk_echo=0)


def test_the_combinations_specifics_match_as_its_file_says(monkeypatch, tmp_path):
    """``specifics_match``: "substring" finds a changed "33" inside the evidence's "330"; "whole" does not. A score
    reads what the shipped file names ("substring" when it names nothing); a file naming another value is refused."""
    from judges.metrics.rag import verified

    metric = FaithfulnessWithVerifier()
    reply = "The tower is 33 metres tall and was completed in 1889."
    checked = {"verdicts": [{"claim": reply, "probability": 0.9, "chunk": EVIDENCE}], "weakest": 0.9,
               "mean_probability": 0.9}
    anywhere, _ = metric.combination_inputs(metric.model(), reply, [EVIDENCE], checked, words_read="units",
                                            name_endings="strip")
    whole, _ = metric.combination_inputs(metric.model(), reply, [EVIDENCE], checked, words_read="units",
                                         name_endings="strip", specifics_match="whole")
    assert anywhere["specifics_supported"] == 1.0 and whole["specifics_supported"] == pytest.approx(1 / 2)
    assert {k: v for k, v in anywhere.items() if k != "specifics_supported"} == {
        k: v for k, v in whole.items() if k != "specifics_supported"}
    sample = SingleTurnSample(response=reply, retrieved_contexts=[EVIDENCE])
    assert verified.shipped_combination()["specifics_match"] == "whole"  # round 11
    assert metric.score(sample).combination["specifics_supported"] == pytest.approx(1 / 2)
    for named, expected in (({}, 1.0), ({"specifics_match": "whole"}, 1 / 2), ({"specifics_match": "substring"}, 1.0)):
        file = {k: v for k, v in verified.shipped_combination().items() if k != "specifics_match"} | named
        monkeypatch.setattr("judges.metrics.rag.verified.shipped_combination", lambda file=file: file)
        metric.model().forget()
        assert metric.score(sample).combination["specifics_supported"] == pytest.approx(expected)
    monkeypatch.undo()
    with pytest.raises(ValueError, match="specifics: match must be one of"):
        metric.combination_inputs(metric.model(), reply, [EVIDENCE], checked, specifics_match="prefix")
    wrong, shipped = tmp_path / "combination.json", json.loads(verified.COMBINATION.read_text())
    n = len(shipped["inputs"])
    monkeypatch.setattr(verified, "COMBINATION", wrong)
    try:
        for named, message in (({"specifics_match": "prefix"}, "says specifics_match='prefix', not one of"),
                               ({"talk_echo": 1.5}, r"says talk_echo=1.5, not a share in \(0, 1\]"),
                               ({"talk_echo": True}, "says talk_echo=True, not a share"),
                               ({"questions": "never"}, "says questions='never', not one of"),
                               ({"inputs": [*shipped["inputs"][:-1], "novelty"]},
                                r"names inputs \['novelty'\]: not among"),
                               ({"coef": shipped["coef"][:-1]}, f"gives {n} inputs but {n} means, {n} scales, "
                                f"{n - 1} coefficients"),
                               ({"inputs": [*shipped["inputs"][:-1], shipped["inputs"][0]]}, "one twice"),
                               ({"gate": "verifier_weakest / 0.4"}, "says gate='verifier_weakest / 0.4', not"),
                               ({"gate": "novelty / 0.5"}, "says gate='novelty / 0.5', not")):
            wrong.write_text(json.dumps(shipped | named))
            verified.shipped_combination.cache_clear()
            with pytest.raises(ValueError, match=message):
                verified.shipped_combination()
        wrong.write_text(json.dumps({k: v for k, v in shipped.items() if k != "intercept"}))
        verified.shipped_combination.cache_clear()
        with pytest.raises(ValueError, match=r"has no \['intercept'\]"):
            verified.shipped_combination()
    finally:
        monkeypatch.undo()
        verified.shipped_combination.cache_clear()


def test_the_combinations_questions_are_set_aside_by_the_rules_as_its_file_says(monkeypatch):
    """``questions="rules"``: a question the classifier keeps is set aside, so its low P no longer caps the reply;
    with "classifier" (a file naming nothing) the classifier decides alone. A score reads what the file names."""
    from judges.metrics.rag import verified

    metric = FaithfulnessWithVerifier()
    monkeypatch.setattr("judges.metrics.rag.claims.shipped_talk_classifier",
                        lambda: type("Keeps", (), {"checkable": staticmethod(lambda s: [True] * len(s))})())
    reply = "The Eiffel Tower was completed in 1889. Was it the tallest tower back then?"
    claim, question = split_sentences(reply)
    checked = {"verdicts": [{"claim": claim, "probability": 0.9, "chunk": EVIDENCE},
                            {"claim": question, "probability": 0.1, "chunk": EVIDENCE}],
               "weakest": 0.1, "mean_probability": 0.5}
    alone, aside = metric.combination_inputs(metric.model(), reply, [EVIDENCE], checked)
    assert aside == [] and alone["learned_checkable_weakest"] == 0.1
    ruled, aside = metric.combination_inputs(metric.model(), reply, [EVIDENCE], checked, questions="rules")
    assert aside == [{"sentence": question, "kind": "question"}]
    assert ruled["learned_checkable_weakest"] == 0.9 and ruled["learned_set_aside_share"] == 0.5
    assert {k: v for k, v in ruled.items() if not k.startswith("learned_")} == {
        k: v for k, v in alone.items() if not k.startswith("learned_")}  # the sentences' inputs are the same
    sample = SingleTurnSample(response=reply, retrieved_contexts=[EVIDENCE])
    for named, expected in (({}, []), ({"questions": "rules"}, [question]), ({"questions": "classifier"}, [])):
        file = {k: v for k, v in verified.shipped_combination().items() if k != "questions"} | named
        monkeypatch.setattr("judges.metrics.rag.verified.shipped_combination", lambda file=file: file)
        assert [u["sentence"] for u in metric.score(sample).set_aside] == expected
    with pytest.raises(ValueError, match="questions='always' is not one of"):
        metric.combination_inputs(metric.model(), reply, [EVIDENCE], checked, questions="always")


def test_the_combination_verifies_only_the_kept_units_that_are_not_sentences(monkeypatch):
    """A unit the talk classifier keeps whole was verified as a sentence: its row is read back, not scored again;
    a claim taken out of a hedge is verified, alone. The score is the same as verifying every kept unit."""
    metric = FaithfulnessWithVerifier()
    asked: list[list[str]] = []
    verify = metric.verify_claims
    monkeypatch.setattr(metric, "verify_claims", lambda v, claims, e: asked.append(list(claims)) or verify(v, claims, e))
    plain = metric.score(SingleTurnSample(response="The Eiffel Tower was completed in 1889. It is 330 metres tall.",
                                          retrieved_contexts=[EVIDENCE]))
    assert asked == [["The Eiffel Tower was completed in 1889.", "It is 330 metres tall."]]
    asked_plain = asked[0]
    asked.clear()
    hedged = metric.score(SingleTurnSample(response="I think the Eiffel Tower was completed in 1889.",
                                           retrieved_contexts=[EVIDENCE]))
    assert asked == [["I think the Eiffel Tower was completed in 1889."], ["the Eiffel Tower was completed in 1889."]]
    metric.model().forget()  # every kept unit verified anew, none read back
    for result, kept in ((plain, asked_plain), (hedged, asked[1])):
        every = verify(metric.model(), kept, [EVIDENCE])
        assert result.combination["learned_checkable_mean"] == pytest.approx(every["mean_probability"], abs=1e-9)
        assert result.combination["learned_checkable_weakest"] == pytest.approx(every["weakest"], abs=1e-9)


def test_text_out_of_the_verifiers_language_is_flagged_or_goes_to_the_multilingual_model(tmp_path):
    sample = SingleTurnSample(response="埃菲尔铁塔于1889年建成。", retrieved_contexts=["埃菲尔铁塔于1889年为巴黎世界博览会建成。"])
    assert detect_language(sample.response) == "zh"
    flagged = FaithfulnessWithVerifier().score(sample)
    assert flagged.score == 0.0 and flagged.out_of_language == "zh" and "multilingual_verifier" in flagged.undefined_reason
    folder = tiny_folder(tmp_path / "multilingual")
    switched = FaithfulnessWithVerifier(multilingual_verifier=str(folder)).score(sample)
    assert switched.verifier == "multilingual" and not switched.get("undefined_reason")
    assert not switched.get("combination") and switched.score == switched.mean_probability  # fitted on English
    english = FaithfulnessWithVerifier(multilingual_verifier=str(folder)).score(
        {"response": "It was completed in 1889.", "retrieved_contexts": [EVIDENCE]})
    assert english.verifier == "groundedness-minilm"


@pytest.mark.long(why='trains the verifier for a few steps twice (seeded, resumed) on torch')
def test_training_is_seeded_resumable_and_writes_safetensors_only(tmp_path, shared_data):
    from dataclasses import replace

    from safetensors.torch import load_file

    from calibration.verifier.training import (
        MANIFEST_NAME,
        WEIGHTS_NAME,
        TrainConfig,
        train_verifier,
    )

    pytest.importorskip("calibration.verifier.pairs")
    config = TrainConfig(per_source={"fever_symmetric": 32}, perturbed=16, begin_parts=(), held_out=8, batch_size=8,
                         max_length=48, eval_every=3, checkpoint_every=2)
    whole = train_verifier(tmp_path / "whole", config, progress=False)
    stopped = train_verifier(tmp_path / "resumed", config, progress=False, max_steps=3)
    assert not stopped.exists() and (tmp_path / "resumed" / "checkpoint" / "state.safetensors").is_file()
    with pytest.raises(ValueError, match="another configuration \\(differs in perturbed\\)"):
        train_verifier(tmp_path / "resumed", replace(config, perturbed=8), progress=False)
    state = tmp_path / "resumed" / "checkpoint" / "state.json"  # written before as_replies existed: its default
    written = json.loads(state.read_text())
    del written["config"]["as_replies"]
    state.write_text(json.dumps(written))
    with pytest.raises(ValueError, match="differs in as_replies"):
        train_verifier(tmp_path / "resumed", replace(config, as_replies=0.5), progress=False)
    resumed = train_verifier(tmp_path / "resumed", replace(config, eval_every=4), progress=False)
    a, b = load_file(str(whole)), load_file(str(resumed))
    assert set(a) == set(b) and all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)
    manifest = json.loads((tmp_path / "whole" / MANIFEST_NAME).read_text())
    assert manifest["history"] and manifest["stored_as"] == "float16" and whole.name == WEIGHTS_NAME
    assert not any(p.suffix in (".pt", ".pkl", ".bin") for p in tmp_path.rglob("*"))
    _, _, meta = load_shipped(whole, tmp_path / "whole" / MANIFEST_NAME)
    assert meta["sha256"] == manifest["sha256"]


@pytest.mark.long(why='trains the verifier, interrupts and resumes it on torch')
def test_average_from_writes_the_average_of_late_snapshots_beside_the_same_run_and_survives_a_resume(
        tmp_path, monkeypatch, shared_data):
    from dataclasses import replace

    from safetensors.torch import load_file

    from calibration.verifier import training as verifier_training
    from calibration.verifier.training import MANIFEST_NAME, WEIGHTS_NAME, TrainConfig, train_verifier

    monkeypatch.setattr(verifier_training, "AVERAGE_EVERY", 2)
    plain = TrainConfig(per_source={"fever_symmetric": 32}, perturbed=16, begin_parts=(), held_out=8, batch_size=8,
                        max_length=48, eval_every=100, checkpoint_every=3)
    config = replace(plain, average_from=0.3)
    final = train_verifier(tmp_path / "plain", plain, progress=False)
    whole = train_verifier(tmp_path / "whole", config, progress=False)
    train_verifier(tmp_path / "resumed", config, progress=False, max_steps=4)  # stops with snapshots taken
    train_verifier(tmp_path / "resumed", config, progress=False)
    a, b = load_file(str(final)), load_file(str(whole))
    assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)  # the average never feeds back
    averaged = tmp_path / "whole" / "averaged" / WEIGHTS_NAME
    avg, again = load_file(str(averaged)), load_file(str(tmp_path / "resumed" / "averaged" / WEIGHTS_NAME))
    assert set(avg) == set(a) and any(not np.array_equal(avg[k].numpy(), a[k].numpy()) for k in a)
    assert all(np.array_equal(avg[k].numpy(), again[k].numpy()) for k in avg)  # resumed: the same average
    _, _, meta = load_shipped(averaged, averaged.parent / MANIFEST_NAME)
    assert "snapshots" in meta["averaged"]
    with pytest.raises(ValueError, match="average_from must be a share in"):
        train_verifier(tmp_path / "bad", replace(plain, average_from=1.5), progress=False)


def test_begin_repeat_puts_the_begin_pairs_in_the_mix_that_many_times_on_one_side_of_the_split(shared_data):
    from dataclasses import replace

    from calibration.verifier.mix import training_mix
    from calibration.verifier.training import TrainConfig

    config = TrainConfig(per_source={"fever_symmetric": 40}, perturbed=0, begin_parts=("tc",), held_out=60)
    once, twice = (training_mix(replace(config, begin_repeat=n)) for n in (1, 2))

    def begin(pairs):
        return sorted(p.group for p in pairs if p.source.startswith("begin_"))

    assert begin(once[0] + once[1]) and begin(twice[0] + twice[1]) == sorted(begin(once[0] + once[1]) * 2)
    assert not {p.group for p in twice[0]} & {p.group for p in twice[1]}  # a repeated pair never on both sides
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="begin_repeat must be an int >= 1"):
            training_mix(replace(config, begin_repeat=bad))


def test_as_replies_dresses_that_share_of_the_rule_made_pairs_and_keeps_the_rest_of_the_mix(shared_data):
    from dataclasses import replace

    from calibration.verifier.mix import training_mix
    from calibration.verifier.training import TrainConfig

    config = TrainConfig(per_source={"fever_symmetric": 200}, perturbed=300, begin_parts=(), held_out=0)
    bare, dressed = training_mix(config)[0], training_mix(replace(config, as_replies=0.5))[0]
    assert len(bare) == len(dressed)
    replies = [p for p in dressed if p.source.endswith("_reply")]
    assert 100 < len(replies) < 200 and {p.label for p in replies} == {0, 1}
    for p, twin in zip(dressed, bare):  # the same pairs in the same order; only a dressed claim differs
        assert (p.evidence, p.label, p.group) == (twin.evidence, twin.label, twin.group)
        if p.source.endswith("_reply"):  # dressed: changed, unless lower case was all it got and had
            assert p.claim != twin.claim or twin.claim == twin.claim.lower()
        else:
            assert p.claim == twin.claim
    for bad in (-0.1, 1.5, True, "half"):
        with pytest.raises(ValueError, match="as_replies must be a share in"):
            training_mix(replace(config, as_replies=bad))


def test_compressed_adds_compressions_of_both_labels_to_the_rule_made_pairs(shared_data):
    from dataclasses import replace

    from calibration.verifier.mix import training_mix
    from calibration.verifier.training import TrainConfig

    config = TrainConfig(per_source={"fever_symmetric": 200}, perturbed=300, begin_parts=(), held_out=0)
    mix = training_mix(replace(config, compressed=0.5))[0]
    assert len(mix) == len(training_mix(config)[0])
    sources = Counter(p.source for p in mix if "compressed" in p.source)
    assert sources["perturbed_compressed"] > 0 and any(s.endswith("_compressed") and s != "perturbed_compressed"
                                                       for s in sources)
    for bad in (-0.1, 1.5, True, "half"):
        with pytest.raises(ValueError, match="compressed must be a share in"):
            training_mix(replace(config, compressed=bad))
    positives_only = training_mix(replace(config, compressed=0.5, compressed_negatives=False))[0]
    sources = Counter(p.source for p in positives_only if "compressed" in p.source)
    assert sources["perturbed_compressed"] > 0 and set(sources) == {"perturbed_compressed"}
    with pytest.raises(ValueError, match="compressed_negatives must be True or False"):
        training_mix(replace(config, compressed_negatives=0))


def test_direction_adds_minimal_pairs_of_a_flipped_and_a_kept_sentence_on_one_side_of_the_split(shared_data):
    from dataclasses import replace

    from calibration.verifier.mix import training_mix
    from calibration.verifier.soup import scaled
    from calibration.verifier.training import TrainConfig

    config = TrainConfig(per_source={"fever_symmetric": 200}, perturbed=100, begin_parts=(), held_out=40)
    plain, more = training_mix(config), training_mix(replace(config, direction=60))
    added = [p for p in more[0] + more[1] if p.source.startswith("direction_")]
    assert Counter(p.source for p in added) == {"direction_flipped": 30, "direction_kept": 30}
    assert sorted((p.evidence, p.claim) for p in plain[0] + plain[1]) == \
        sorted((p.evidence, p.claim) for p in more[0] + more[1] if not p.source.startswith("direction_"))
    groups: dict[str, list] = {}
    for p in added:
        groups.setdefault(p.group, []).append(p)
    for flipped, kept in (sorted(pair, key=lambda p: p.label) for pair in groups.values()):
        assert (flipped.label, kept.label, flipped.evidence) == (0, 1, kept.evidence)
        assert kept.claim in kept.evidence and flipped.claim not in flipped.evidence
        assert len(flipped.claim.split()) == len(kept.claim.split())  # one word changed, nothing else
        assert sum(a != b for a, b in zip(flipped.claim.split(), kept.claim.split())) == 1
    held = {p.group for p in more[1]}
    assert all((p.group in held) == (p in more[1]) for p in added)  # a pair's two halves on one side
    assert scaled(replace(config, direction=60), 0.5).direction == 30
    odd = training_mix(replace(config, direction=7))
    assert Counter(p.source for p in odd[0] + odd[1] if p.source.startswith("direction_")) == \
        {"direction_flipped": 3, "direction_kept": 3}  # an odd count gives one pair fewer


@pytest.mark.parametrize(("field", "bad", "says"), [
    ("seed", 1.5, "seed must be an int"), ("perturbed", -1, "perturbed must be an int >= 0"),
    ("summeval", 2.5, "summeval must be an int >= 0"), ("summeval", True, "summeval must be an int >= 0"),
    ("other_words", "10", "other_words must be an int >= 0"), ("direction", -2, "direction must be an int >= 0"),
    ("batch_size", 0, "batch_size must be an int >= 1"),
    ("threads", 0, "threads must be an int >= 1"), ("warmup", 1.5, "warmup must be a share in"),
    ("debias", float("nan"), "debias must be a share in"), ("learning_rate", 0, "learning_rate must be a finite number > 0"),
    ("learning_rate", float("inf"), "learning_rate must be a finite"), ("weight_decay", -0.1, "weight_decay must be"),
    ("per_source", [("mnli", 10)], "per_source must be a dict"),
    ("per_source", {"q2_wow": 10}, r"per_source\['q2_wow'\] is held out for evaluation"),
    ("per_source", {"nope": 10}, r"per_source\['nope'\] is not one of"),
    ("per_source", {"mnli": -1}, r"per_source\['mnli'\] must be an int >= 0"),
    ("begin_parts", "cmu", "begin_parts must be a sequence of"), ("begin_parts", ("cmu", "x"), "begin_parts must be"),
    ("precision", "float16", "precision must be 'float32' or 'bfloat16'"),
    ("frozen_layers", -1, "frozen_layers must be an int >= 0"),
    ("frozen_layers", 6, r"frozen_layers must be an int in \[0, 5\]"),
])
def test_train_config_checks_each_field_as_it_is_made(field, bad, says):
    """Up front, before any data is read: the error names TrainConfig and the field (and the source, for
    per_source), whether the config is made directly or with ``replace``."""
    from dataclasses import replace

    from calibration.verifier.training import TrainConfig

    with pytest.raises(ValueError, match=f"TrainConfig: {says}"):
        TrainConfig(**{field: bad})
    with pytest.raises(ValueError, match=f"TrainConfig: {says}"):
        replace(TrainConfig(), **{field: bad})
    assert TrainConfig(begin_parts=["tc"]).begin_parts == ("tc",)


@pytest.mark.long(why='one step of training in bfloat16 on a CPU without bfloat16 units (its first step costs seconds)')
def test_training_in_bfloat16_runs_and_differs_from_float32(tmp_path, shared_data):
    """``precision="bfloat16"`` autocasts the forward passes (weights stay float32): the same run (one step
    here), other tensors."""
    from dataclasses import replace

    from safetensors.torch import load_file

    from calibration.verifier.training import TrainConfig, train_verifier

    config = TrainConfig(per_source={"fever_symmetric": 16}, perturbed=4, begin_parts=(), held_out=4, batch_size=16,
                         eval_every=1000, max_length=48)
    plain = load_file(str(train_verifier(tmp_path / "f32", config, progress=False)))
    half = load_file(str(train_verifier(tmp_path / "bf16", replace(config, precision="bfloat16"), progress=False)))
    assert set(plain) == set(half) and all(half[k].dtype == plain[k].dtype for k in plain)
    assert any(not (plain[k] == half[k]).all() for k in plain)


def test_frozen_layers_keep_the_embeddings_and_the_lowest_layers_as_the_base_has_them(tmp_path, shared_data):
    """``frozen_layers=2``: every embedding and encoder layers 0-1 come out as the base weights, layer 2 up
    and the head are trained; the manifest lists what stayed frozen."""
    import json
    from dataclasses import replace

    import torch
    from safetensors.torch import load_file

    from calibration.verifier.training import MANIFEST_NAME, TrainConfig, train_verifier
    from judges.lm.verifier.files import base_classifier

    config = TrainConfig(per_source={"fever_symmetric": 32}, perturbed=16, begin_parts=(), held_out=8, batch_size=8,
                         max_length=48, eval_every=1000, frozen_layers=2)
    trained = load_file(str(train_verifier(tmp_path / "frozen", config, progress=False)))
    base = base_classifier(num_labels=1)[0].state_dict()

    def same(name: str) -> bool:  # the file holds float16
        return torch.equal(trained[name], base[name].to(torch.float16))

    assert same("bert.embeddings.position_embeddings.weight") and same("bert.embeddings.LayerNorm.weight")
    assert same("bert.encoder.layer.0.attention.self.query.weight") and same("bert.encoder.layer.1.output.dense.weight")
    assert not same("bert.encoder.layer.2.attention.self.query.weight")
    assert not same("bert.encoder.layer.5.output.dense.weight")
    frozen = json.loads((tmp_path / "frozen" / MANIFEST_NAME).read_text(encoding="utf-8"))["frozen"]
    assert "bert.encoder.layer.1.output.dense.weight" in frozen and not any(".layer.2." in n for n in frozen)
    plain = load_file(str(train_verifier(tmp_path / "plain", replace(config, frozen_layers=0), progress=False)))
    assert not torch.equal(plain["bert.encoder.layer.0.attention.self.query.weight"],
                           base["bert.encoder.layer.0.attention.self.query.weight"].to(torch.float16))


def labelled(n: int, positives: int):
    from calibration.data.labelled import LabelledSet
    from judges import EvaluationDataset

    samples, labels = [], []
    for i in range(n):
        supported = i < positives
        year = 1889 if supported else 1889 + 1 + i
        samples.append(SingleTurnSample(response=f"The Eiffel Tower was completed in {year}.",
                                        retrieved_contexts=[EVIDENCE]))
        labels.append(int(supported))
    return LabelledSet("eiffel", EvaluationDataset(samples), labels, "binary", "written for this test")


def test_finetune_refuses_too_few_labels_and_fits_otherwise(tmp_path):
    from calibration.fitting.finetune import finetune_verifier
    from calibration.fitting.fit import fit

    with pytest.raises(ValueError, match=r"needs at least 40 labelled training items with these settings; here it "
                                         r"trains on 30 of the 30 labelled items \(no guard: all of them\) \(6 of the "
                                         r"rarer label\), and it needs 40 there \(10 of each label\)"):
        fit(FaithfulnessWithVerifier(), labelled(30, 6), optimizer="finetune", calibrator=None, guard=0)
    with pytest.raises(ValueError, match=r"receives 30 labels \(6 supported, 24 not\), too few"):  # its own check
        finetune_verifier(FaithfulnessWithVerifier(), labelled(30, 6), np.asarray(labelled(30, 6).labels, float))
    with pytest.raises(ValueError, match="has none"):
        finetune_verifier(SimpleMetricStandIn(), labelled(40, 20), np.zeros(40))
    data = labelled(40, 20)
    judge, report = finetune_verifier(FaithfulnessWithVerifier(), data, np.asarray(data.labels, float),
                                      out=tmp_path / "tuned", epochs=1, seed=0)
    assert report["labels"] == 40 and report["held_out"] == 10 and len(report["epochs"]) == 1
    assert report["kept"] in ("shipped", "fine-tuned") and report["decision"].startswith(f"the {report['kept']} verifier")
    assert "epochs " in report["decision"] and "trained every layer on 30 of 40 items" in report["decision"]
    if judge.verifier is not None:  # an epoch beat the shipped verifier: the judge names the written folder
        assert Path(judge.verifier).is_absolute() and (tmp_path / "tuned" / "model.safetensors").is_file()
        assert Path(judge.verifier) == (tmp_path / "tuned").resolve()
        assert 0.0 <= judge.score(data.dataset[0]).score <= 1.0


class SimpleMetricStandIn:
    verifier = None


def test_a_finetune_that_kept_the_shipped_verifier_says_so_and_is_never_called_compiled(monkeypatch):
    import importlib

    from calibration.fitting.fit import fit

    fitting = importlib.import_module("calibration.fitting.fit")  # the package's name `fit` is the function

    def kept_shipped(judge, data, targets, **options):
        return judge, {"labels": len(data), "trained_on": 34, "held_out": 11, "kept": "shipped", "epochs": [
            {"epoch": 1, "held_out_roc_auc": 0.8}], "decision": "the shipped verifier was kept: no epoch beat it"}

    monkeypatch.setattr(fitting, "finetune_verifier", kept_shipped)
    data = labelled(60, 30)
    compiled = fit(FaithfulnessWithVerifier(), data, optimizer="finetune", calibrator=None)
    assert compiled.report["finetune"]["kept"] == "shipped" and compiled.judge.verifier is None
    assert compiled.report["guard"]["decision"].startswith("the shipped verifier was kept")
    assert "compiled kept" not in json.dumps(compiled.to_dict())
    from calibration.agreement.record import CalibrationRun

    run = CalibrationRun("eiffel", [0, 1, 0, 1], {"judge": [0.1, 0.9, 0.2, 0.8]},
                         meta={"finetune": {"finetune": compiled.report["finetune"]},
                               "guard": {"finetune": compiled.report["guard"]["decision"]}})
    findings = run.findings(n_bootstrap=20)
    assert "Fine-tuning (finetune): the shipped verifier was kept: no epoch beat it." in findings
    assert not [f for f in findings if f.startswith("Compiling (finetune)")]


def test_a_finetuned_compiled_judge_loads_from_any_working_directory_and_a_moved_run_folder(tmp_path, monkeypatch):
    from calibration.fitting.compiled import CompiledJudge

    run = tmp_path / "runs" / "calibrate" / "x"
    (run / "finetuned-verifier").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    judge = FaithfulnessWithVerifier(verifier="runs/calibrate/x/finetuned-verifier")  # relative, as the CLI made it
    saved = CompiledJudge(judge).save(run / "compiled.json")
    assert json.loads(saved.read_text())["judge"]["params"]["verifier"] == "finetuned-verifier"  # beside the file
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert CompiledJudge.load(saved).judge.verifier == str((run / "finetuned-verifier").resolve())
    moved = tmp_path / "moved"
    run.rename(moved)
    assert CompiledJudge.load(moved / "compiled.json").judge.verifier == str((moved / "finetuned-verifier").resolve())


def test_the_verifier_metric_runs_on_evaluates_threads():
    """A fast tokenizer entered from two threads at once fails ("Already borrowed"): the verifier serialises it."""
    from judges import evaluate

    rows = [{"response": f"The tower is {300 + i} metres tall. It was completed in 1889.", "retrieved_contexts": [EVIDENCE]}
            for i in range(16)]
    result = evaluate(rows, [FaithfulnessWithVerifier()], num_threads=4, progress=False)
    assert result.failures == [] and len(result.records) == 16


def test_response_groundedness_with_the_verifier_rates_sentences_without_an_lm():
    from judges import ResponseGroundedness

    metric = ResponseGroundedness(verifier="embedded")
    assert not metric.needs_lm and metric.needs_verifier and ResponseGroundedness().needs_lm
    assert metric.get_params()["verifier"] == "embedded"
    grounded = metric.score({"response": "The Eiffel Tower was completed in 1889.", "retrieved_contexts": [EVIDENCE]})
    mixed = metric.score({"response": "The Eiffel Tower was completed in 1889. It was painted green by Napoleon in 1700.",
                          "retrieved_contexts": [EVIDENCE]})
    assert grounded.ratings == [2] and grounded.score == 1.0
    assert [row["supported"] for row in mixed.verdicts] == [True, False]  # P 0.96 and 0.04 with the shipped weights
    assert mixed.ratings == [1] and mixed.score == 0.5 and mixed.weakest < grounded.weakest
    assert "Napoleon" in metric.feedback(mixed)
    invented = metric.score({"response": "It was painted green by Napoleon in 1700.", "retrieved_contexts": [EVIDENCE]})
    assert invented.ratings == [0] and invented.score == 0.0
    foreign = metric.score({"response": "埃菲尔铁塔于1889年建成。", "retrieved_contexts": ["埃菲尔铁塔于1889年建成。"]})
    assert foreign.score == 0.0 and foreign.out_of_language == "zh"
    with pytest.raises(ValueError, match="response_groundedness: threshold"):
        ResponseGroundedness(verifier="embedded", threshold=2)


def test_summarization_with_the_verifier_scales_the_score_by_supported_sentences():
    from dspy.utils.dummies import DummyLM

    from judges import SummarizationScore

    summary = "The Eiffel Tower was completed in 1889. It was designed by Leonardo da Vinci in Rome."

    def lm():
        return DummyLM([{"keyphrases": ["1889", "Gustave Eiffel"]},
                        {"questions": ["Was the tower completed in 1889?", "Did Gustave Eiffel's company design it?"]},
                        {"answers": [True, False]}])

    plain = SummarizationScore(lm=lm()).score({"response": summary, "reference_contexts": [EVIDENCE]})
    checked = SummarizationScore(lm=lm(), verifier="embedded").score({"response": summary, "reference_contexts": [EVIDENCE]})
    assert plain.qa_score == checked.qa_score == 0.5 and "groundedness" not in plain
    assert [r["supported"] for r in checked.verdicts] == [True, False]  # da Vinci in Rome: P 0.06
    assert checked.groundedness == 0.5 and checked.score == pytest.approx(plain.score * 0.5)
    text = SummarizationScore(verifier="embedded").feedback(checked)
    assert f"groundedness {checked.groundedness:.2f}" in text
    foreign = SummarizationScore(lm=DummyLM([]), verifier="embedded").score(
        {"response": "埃菲尔铁塔于1889年建成。", "reference_contexts": ["埃菲尔铁塔于1889年为巴黎世界博览会建成。"]})
    assert foreign.score == 0.0 and foreign.out_of_language == "zh"  # before any LM call: the DummyLM has none


def test_a_run_file_knows_its_verifier_and_refuses_a_resume_with_other_weights_or_windows(tmp_path, monkeypatch):
    """Run-file identity holds the verifier a metric loads (its weights' hash, int8, the library's scoring
    defaults), not only the metric's settings: a run file scored with other weights or other window sizes is
    refused, naming what changed, instead of mixing the two kinds of score."""
    from judges import ExactMatch, ResponseGroundedness
    from judges.data import nouns
    from judges.lm.verifier import verifier_identity
    from judges.run.records import metric_config
    from judges.run.run_file import RunFile, run_header

    shipped = metric_config(FaithfulnessWithVerifier())["models"]["verifier"]
    manifest = json.loads(SHIPPED_MANIFEST.read_text())
    assert shipped == {"max_length": 256, "chunk_tokens": 128, "single_sentences": True, "top_units": 2,
                       "stop_at": 0.9, "check_opposites": True, "check_contradictions": True,
                       "closest_when_unsupported": True, "check_swaps": "names-numbers-nouns",
                       "swap_libraries": f"lemminflect {version('lemminflect')}, text2num {version('text2num')}",
                       "swap_lexicon": nouns.lexicon_identity(),
                       "weights": f"groundedness-minilm sha256:{manifest['sha256']}", "int8": False}
    int8 = metric_config(FaithfulnessWithVerifier(verifier="embedded-int8"))["models"]["verifier"]
    assert int8["int8"].startswith(resolve_verifier("embedded-int8").runtime + " ")  # "onnx 1.32.0": they differ
    assert (int8["batch_size"], int8["padding_ratio"]) == (16, 1.25)  # int8's activation scale is per batch
    assert "models" not in metric_config(ExactMatch()) and "verifier" not in metric_config(ResponseGroundedness())["models"]
    assert metric_config(ResponseGroundedness(verifier="embedded"))["models"] == {"verifier": shipped}  # no LM
    from calibration.fitting.compiled import CompiledJudge

    from judges.lm.talk import talk_identity
    from judges.metrics.rag.verified import shipped_combination

    # The default score is the shipped combination, which reads the talk classifier: both are named too.
    around = {"combination": "sha256:" + shipped_combination()["sha256"], "talk_classifier": talk_identity()}
    assert metric_config(CompiledJudge(FaithfulnessWithVerifier()))["models"] == {"verifier": shipped} | around
    assert metric_config(FaithfulnessWithVerifier(aggregate="mean"))["models"] == {"verifier": shipped}

    folder = tiny_folder(tmp_path / "mine")
    first = verifier_identity(str(folder))["weights"]
    assert first.startswith("sha256:") and verifier_identity(str(folder))["weights"] == first
    (folder / "config.json").write_text((folder / "config.json").read_text() + " ")  # retrained into the same folder
    assert verifier_identity(str(folder))["weights"] != first
    with pytest.raises(VerifierError, match="no config.json"):
        verifier_identity(str(tmp_path))
    both = FaithfulnessWithVerifier(multilingual_verifier=str(folder))
    assert set(metric_config(both)["models"]) == {"verifier", "multilingual_verifier", "combination", "talk_classifier"}

    metric, path = FaithfulnessWithVerifier(), tmp_path / "run.jsonl"
    with RunFile(path, run_header(["a"], [metric.name], [metric])):
        pass
    with RunFile(path, run_header(["a"], [metric.name], [metric])):
        pass  # the same verifier: resumed
    monkeypatch.setitem(Verifier.__init__.__kwdefaults__, "chunk_tokens", 160)  # a library with other windows
    with pytest.raises(ValueError, match=r"other metrics than this run \(faithfulness_with_verifier\.models\.verifier"
                                         r"\.chunk_tokens: 128 in the file, 160 now\); use a new run file"):
        RunFile(path, run_header(["a"], [metric.name], [metric]))


def test_pairs_are_batched_by_token_length_and_padding_changes_no_probability():
    """Batches hold pairs within ``padding_ratio`` of each other's token length, shortest first, up to
    ``batch_size``; each is padded to its own longest pair, which masks out: the probabilities are those of
    one batch padded to the longest pair."""
    assert length_batches([30, 150, 32, 140, 31, 200], 16, 1.25) == [[0, 4, 2], [3, 1], [5]]
    assert length_batches([30, 150, 32, 140, 31, 200], 2, 1.25) == [[0, 4], [2], [3, 1], [5]]
    assert length_batches([5, 9], 16, 2.0) == [[0, 1]] and length_batches([], 16, 1.25) == []
    pairs = [(EVIDENCE, "It was completed in 1889."), ("The tower is 330 metres tall.", "It is 330 m tall."),
             (EVIDENCE + " " + EVIDENCE, "Gustave Eiffel's company designed it for the World's Fair."),
             ("Paris.", "Paris is in France.")]
    for runtime in ("torch", "onnx") if onnx_available() else ("torch",):
        one = Verifier(runtime=runtime, padding_ratio=1e9).probabilities(pairs)
        apart = Verifier(runtime=runtime, padding_ratio=1.0, batch_size=3).probabilities(pairs)
        alone = [Verifier(runtime=runtime).probabilities([pair])[0] for pair in pairs]
        assert np.allclose(one, apart, atol=1e-5) and np.allclose(one, alone, atol=1e-5)
    for bad in (0.5, True, "1.25", float("nan")):
        with pytest.raises(ValueError, match="padding_ratio"):
            Verifier(padding_ratio=bad)


def test_contrasts_name_the_one_detail_a_frame_sharing_sentence_says_otherwise():
    from judges.data.contrasts import contrasts, shares_frame, specific_spans

    assert specific_spans("It opened on March 4, 1962 in Tarnby.") == [(13, 20, "date"), (22, 26, "number"),
                                                                       (30, 36, "name")]
    claim = "Mount Everest is 8,856 metres tall."
    assert contrasts(claim, "Mount Everest is 8,849 metres tall.") == ["Mount Everest is 8,849 metres tall."]
    assert contrasts(claim, "Everest lies on the border of Nepal and China.") == []  # another matter: no frame
    assert contrasts(claim, claim) == [] and contrasts("Obama was born in Kenya.", "Obama was born in Hawaii.") == [
        "Obama was born in Hawaii."]
    assert contrasts("Prices fell in May.", "Prices rose in May.") == ["Prices rose in May."]
    assert contrasts("The bridge opened on March 14.", "The bridge opened to traffic on March 4.") == [
        "The bridge opened on March 4."]
    # two content words: both must be shared ("widened" is not in the sentence)
    assert not shares_frame("The bridge was widened in 1985.", "The bridge opened in 1962.")


def test_unrelated_sentences_do_not_lift_a_contradicted_claim_and_the_feedback_names_the_contradiction():
    """The issue's case: the contradicting sentence alone, then with a sentence about something else that the
    model scores higher; the claim's score must not rise, and the feedback must name the contradiction."""
    claim = "Mount Everest is 8,856 metres tall."
    says, other = "Mount Everest is 8,849 metres tall.", "Everest lies on the border of Nepal and China."
    verifier, before = resolve_verifier(None), Verifier(check_contradictions=False, closest_when_unsupported=False)
    assert before.support([says, other], [claim])[0]["probability"] > before.support([says], [claim])[0]["probability"]
    alone, mixed = verifier.support([says], [claim])[0], verifier.support([other, says], [claim])[0]
    assert mixed["probability"] <= alone["probability"] + 1e-9 and alone["probability"] < 0.05
    assert mixed["contradiction"]["sentence"] == says and mixed["sentence"] == says
    assert mixed["contradiction"]["contrast"] == says and mixed["contradiction"]["probability"] > 0.5
    metric = FaithfulnessWithVerifier()
    text = metric.feedback(metric.score({"response": claim, "retrieved_contexts": [other, says]}))
    assert f"contradicted by the evidence sentence {says!r}, which supports {says!r} instead" in text


def test_the_contradiction_formula_and_the_closest_unit_on_a_scripted_scorer():
    """sigmoid(logit P(claim | sentence) - logit P(contrast | sentence)), only where the contrast is supported
    and preferred; a claim supported nowhere is read at the unit sharing most of its words."""
    claim, says, other = "The dam is 40 metres high.", "The dam is 55 metres high.", "The dam has a fish ladder."
    fixed = {(says, claim): 0.2, (says, "The dam is 55 metres high."): 0.8, (other, claim): 0.45}
    verifier = Verifier()
    verifier.probabilities = lambda pairs: np.array([fixed.get(tuple(p), 0.3) for p in pairs])
    row = verifier.support([says, other], [claim])[0]
    # odds 0.2/0.8 against 0.8/0.2: 1/17; the sentence saying "55" decides, not the fish ladder's 0.45
    assert row["probability"] == pytest.approx(1 / 17) and row["chunk"] == says
    fixed[(says, "The dam is 55 metres high.")] = 0.4  # a contrast the sentence does not support: no contradiction
    row = verifier.support([says, other], [claim])[0]
    assert row["contradiction"] is None and row["probability"] == 0.2 and row["chunk"] == says  # the closest unit
    plain = Verifier(closest_when_unsupported=False)
    plain.probabilities = verifier.probabilities
    assert plain.support([says, other], [claim])[0]["probability"] == 0.45  # the best unit, a sentence on else
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="closest_when_unsupported"):
            Verifier(closest_when_unsupported=bad)


def test_files_saved_before_the_verifier_moved_load_and_its_run_file_names_what_changed_since(tmp_path, monkeypatch):
    """tests/data holds a run file and a compiled judge saved at 0306f0d, before the verifier's modules moved
    into judges/lm/verifier/ and calibration/verifier/: the compiled judge loads and scores as it did then. The
    run file resumed until the swap checks became the default; since, it is refused with either aggregate,
    naming the setting that changed, instead of mixing scores read without and with them."""
    from judges import ExactMatch, evaluate
    from judges.lm.verifier.model import Verifier as Moved

    data = Path(__file__).parent / "data"
    samples = [
        {"response": "The Eiffel Tower was finished in 1889.", "reference": "The Eiffel Tower was finished in 1889.",
         "retrieved_contexts": ["The Eiffel Tower was completed in 1889 for the World's Fair."]},
        {"response": "It is 950 metres tall.", "retrieved_contexts": ["The tower is 330 metres tall."],
         "reference": "It is 330 metres tall."},
        {"response": "Paris is in France.", "retrieved_contexts": ["Paris is the capital of France."],
         "reference": "Paris is in France."}]
    run = tmp_path / "run.jsonl"
    shutil.copy(data / "run_before_the_move.jsonl", run)
    monkeypatch.setattr(Moved, "support", lambda *a, **k: pytest.fail("a refused run scored"))
    for aggregate in ("mean", None):
        with pytest.raises(ValueError, match=r"models\.verifier\.check_swaps: only now"):
            evaluate(samples, [FaithfulnessWithVerifier(aggregate=aggregate), ExactMatch()], run_file=run)
    # with the scoring settings of the day it was saved, it resumes with the mean without scoring again
    from judges.lm.verifier import model as verifier_model

    monkeypatch.setattr(verifier_model, "SCORING_SETTINGS", tuple(
        name for name in verifier_model.SCORING_SETTINGS if name != "check_swaps"))
    result = evaluate(samples, [FaithfulnessWithVerifier(aggregate="mean"), ExactMatch()], run_file=run)
    assert result.summary()["faithfulness_with_verifier"]["mean"] == pytest.approx(0.6238380973854895)
    monkeypatch.undo()
    from calibration.fitting.compiled import CompiledJudge

    loaded = CompiledJudge.load(data / "verifier_platt_before_the_move.json")
    assert loaded.score(samples[0]).score == pytest.approx(0.8580565590742742, abs=1e-6)


def test_swapped_entities_give_contrasts_only_when_asked():
    """``contrasts(..., swaps=True)``: an opening name the sentence replaces, and any one short span; off by
    default, where the contradiction check reads only specifics and directions."""
    from judges.data.contrasts import contrasts

    assert contrasts("Sydney is the capital of Australia.", "The capital of Australia is Canberra.") == []
    assert contrasts("Sydney is the capital of Australia.", "The capital of Australia is Canberra.",
                     swaps=True) == ["Canberra is the capital of Australia."]
    assert contrasts("Plants absorb oxygen from the air.", "Plants absorb carbon dioxide from the air.",
                     swaps=True) == ["Plants absorb carbon dioxide from the air."]
    assert contrasts("Insects have eight legs.", "Insects have six legs.", swaps=True) == ["Insects have six legs."]
    assert contrasts("Many birds migrate south.", "Swallows migrate south in autumn.", swaps=True) == []
    # "names": the opening name alone; a one-span change of wording is no contrast there
    assert contrasts("Sydney is the capital of Australia.", "The capital of Australia is Canberra.",
                     swaps="names") == ["Canberra is the capital of Australia."]
    assert contrasts("Plants absorb oxygen from the air.", "Plants absorb carbon dioxide from the air.",
                     swaps="names") == []
    assert contrasts("It is one of the main forms.", "It is one of the major forms.", swaps=True) != []
    assert contrasts("It is one of the main forms.", "It is one of the major forms.", swaps="names") == []
    # a discourse word opens a reply, it names nothing; a name's first word is no new name beside its last
    for reply in ("Yes, he was a pioneer of rockabilly!", "Well, politically it is divided in two parts."):
        assert contrasts(reply, "Accompanied by Scotty Moore, Presley was a pioneer of rockabilly; politically it "
                                "is divided in two parts.", swaps="names") == []
    assert contrasts("Paul Merson criticised the call-up last week.", "Pundit Merson criticised the call-up last "
                     "week, said Sky Sports.", swaps="names") == []


def test_an_opening_word_is_a_name_only_where_no_lexicon_lists_it():
    """``may_be_a_name``: a contraction, an opening or function word, a month or weekday, or a word of
    LemmInflect's lexicon (a common noun, verb, adjective or number word; also a name that is a word, "Mercury")
    opening a sentence is no name; "Sydney" and "Darwin's" may be."""
    from judges.data.contrasts import contrasts, may_be_a_name

    for word in ("Wasn't", "It's", "Gorgeous", "Surprise", "If", "Lead", "All", "Sixty-four", "Well", "Plants",
                 "April", "Monday", "Mercury"):
        assert not may_be_a_name(word), word
    for word in ("Sydney", "Gregor", "Darwin's", "Orinoco"):
        assert may_be_a_name(word), word
    assert contrasts("Wasn't it invented by a Hungarian architect?", "The puzzle was invented in 1974 by the "
                     "Hungarian architect Erno Rubik.", swaps="names-numbers") == []
    assert contrasts("Lead traces were found in soil samples taken at the Brannock site.", "The soil samples from "
                     "the Brannock site were analysed at a laboratory in Hartwell.", swaps="names-numbers") == []


def test_spelled_numbers_are_numbers_to_the_names_numbers_swaps():
    """``swaps="names-numbers"``: the opening name, and spelled numbers read as numbers on both sides (by
    text_to_num): a count only against a count, an ordinal against an ordinal; the same value is no contrast."""
    from judges.data.contrasts import contrasts

    assert contrasts("Insects have eight legs.", "Insects have six legs.") == []
    assert contrasts("Insects have eight legs.", "Insects have six legs.", swaps="names-numbers") == [
        "Insects have 6 legs."]
    assert contrasts("Insects have 8 legs.", "Insects have six legs.", swaps="names-numbers") == ["Insects have 6 legs."]
    assert contrasts("He came fifth in the race.", "He came 3rd in the race.", swaps="names-numbers") == [
        "He came 3rd in the race."]
    assert contrasts("Algeria is the tenth largest country in Africa.", "Algeria is the 10th largest country in "
                     "Africa.", swaps="names-numbers") == []
    assert contrasts("He came on in the 83rd minute of the game.", "He came on with seven minutes of the game "
                     "left.", swaps="names-numbers") == []
    assert contrasts("Sydney is the capital of Australia.", "The capital of Australia is Canberra.",
                     swaps="names-numbers") == ["Canberra is the capital of Australia."]
    assert contrasts("Plants absorb oxygen from the air.", "Plants absorb carbon dioxide from the air.",
                     swaps="names-numbers") == []
    # whole numbers: 8 is not found inside 1998, 6 not inside 16
    assert contrasts("The team had eight players in 1998.", "The team had six players in 1998.",
                     swaps="names-numbers") == ["The team had 6 players in 1998."]
    assert contrasts("Insects have six legs.", "Insects have sixteen legs.", swaps="names-numbers") == [
        "Insects have 16 legs."]
    # a lone "one" is a pronoun as often as a count; "8%" is the 8 of "8 percent"
    assert contrasts("No one knows who painted the two portraits.", "Nobody knows who painted the 2 portraits.",
                     swaps="names-numbers") == []
    assert contrasts("Sales dropped 8% in the second quarter.", "Sales fell by 8 percent in the second quarter.",
                     swaps="names-numbers") == []
    with pytest.raises(ValueError, match="swaps must be one of"):
        contrasts("Insects have six legs.", "Insects have six legs.", swaps="names-number")


def test_wordnet_nouns_tell_a_synonym_or_a_broader_noun_from_a_swap():
    """``judges.data.nouns``: a noun (or its singular, or a phrase WordNet lists) is known; a claim's noun may
    stand for the evidence's when they share a sense or the claim's is the broader; not when it is narrower or
    another of the same kind."""
    from judges.data import nouns

    assert nouns.is_noun("carbon dioxide") and nouns.is_noun("children") and nouns.is_noun("Oxygen")
    assert not nouns.is_noun("absorb") and not nouns.is_noun("") and not nouns.is_noun("quickly")
    for claim, evidence in (("movie", "film"), ("children", "kids"), ("pupils", "students"), ("animal", "dogs"),
                            ("store", "shop")):
        assert nouns.may_stand_for(claim, evidence), (claim, evidence)
    for claim, evidence in (("oxygen", "carbon dioxide"), ("sister", "brother"), ("dog", "animal"),
                            ("marble", "bronze"), ("teachers", "students")):
        assert not nouns.may_stand_for(claim, evidence), (claim, evidence)


def test_the_noun_lexicon_builder_reads_wordnet_synsets_and_hypernyms(tmp_path):
    """``calibration.verifier.wordnet_nouns`` reads data.noun's words and hypernyms (``@``, ``@i``), skips the
    licence header, joins a multi-word lemma with spaces, and names the line it cannot parse."""
    from calibration.verifier.wordnet_nouns import build

    folder = tmp_path / "wordnet"
    folder.mkdir()
    (folder / "data.noun").write_text(
        "  1 This software and database is being provided to you\n"
        "00000001 03 n 01 substance 0 000 | matter\n"
        "00000002 27 n 02 carbon_dioxide 0 CO2 0 001 @ 00000001 n 0000 | a gas\n"
        "00000003 27 n 01 oxygen 0 002 @ 00000001 n 0000 ~ 00000001 n 0000 | a gas\n", encoding="latin-1")
    found = build(folder, tmp_path / "nouns.npz")
    assert found["lemmas"] == 4 and found["synsets"] == 3
    with np.load(tmp_path / "nouns.npz", allow_pickle=False) as lexicon:
        assert lexicon["lemmas"].tobytes().decode().split("\n") == ["carbon dioxide", "co2", "oxygen", "substance"]
        assert lexicon["sense_starts"].tolist() == [0, 1, 2, 3, 4] and lexicon["senses"].tolist() == [1, 1, 2, 0]
        assert lexicon["hypernym_starts"].tolist() == [0, 0, 1, 2] and lexicon["hypernyms"].tolist() == [0, 0]
    (folder / "data.noun").write_text("00000001 03 n zz substance 0 000 | matter\n", encoding="latin-1")
    with pytest.raises(ValueError, match="line 1 is not a WordNet synset line"):
        build(folder, tmp_path / "nouns.npz")


def test_names_numbers_nouns_swaps_read_a_swapped_noun_and_spare_a_synonym():
    """``swaps="names-numbers-nouns"``: what "names-numbers" reads, and one noun the claim puts where the
    sentence has another that it may not stand for, everything else in order; a synonym, a broader noun, a verb
    and a noun the sentence holds elsewhere are no swap."""
    from judges.data.contrasts import contrasts, noun_swap_contrasts

    nouns = "names-numbers-nouns"
    assert contrasts("Plants absorb oxygen from the air.", "Plants absorb carbon dioxide from the air.",
                     swaps=nouns) == ["Plants absorb carbon dioxide from the air."]
    assert contrasts("She watched the film with her sister.", "She watched the film with her brother.",
                     swaps=nouns) == ["She watched the film with her brother."]
    assert contrasts("Sydney is the capital of Australia.", "The capital of Australia is Canberra.",
                     swaps=nouns) == ["Canberra is the capital of Australia."]
    for claim, sentence in (("She watched the movie with her brother.", "She watched the film with her brother."),
                            ("The pupils finished the exam early.", "The students finished the exam early."),
                            ("They buy cars every year.", "They purchase cars every year."),
                            ("Plants take in carbon dioxide from the air.", "Plants absorb carbon dioxide from the air."),
                            ("The dog chased the cat.", "The cat chased the dog.")):
        assert noun_swap_contrasts(claim, sentence) == [], claim
    assert noun_swap_contrasts("He went for a run before work.", "He went for a walk before work.") == [
        "He went for a walk before work."]
    # a name is no common noun (unless its capital only opens the text), nor a phrase WordNet does not list whole
    assert noun_swap_contrasts("The production runs until 14 June.", "The Glass Orchard runs until 14 June.") == []
    assert noun_swap_contrasts("the salt year sold well.", "the book sold well.") == []
    assert noun_swap_contrasts("Oxygen is what plants absorb.", "Carbon dioxide is what plants absorb.") == [
        "Carbon dioxide is what plants absorb."]
    assert contrasts("Plants absorb oxygen from the air.", "Plants absorb carbon dioxide from the air.",
                     swaps="names-numbers") == []


def test_check_swaps_caps_a_swapped_claim_and_a_shared_word_sentence_no_longer_lifts_it():
    """Off, a shared-word sentence about another subject lifts a contradicted claim; every swap check caps it,
    and the default ("names-numbers-nouns") reads "eight" against "six" as numbers and "oxygen" against "carbon
    dioxide" as a swapped noun."""
    from judges.lm.verifier import Verifier

    off, swaps = Verifier(check_swaps=False), Verifier(check_swaps=True)
    evidence = ["Insects have six legs. A spider has eight legs."]
    assert off.support(evidence, ["Insects have eight legs."])[0]["probability"] > 0.5  # lifted by the spider
    capped = swaps.support(evidence, ["Insects have eight legs."])[0]
    assert capped["probability"] < 0.5 and capped["contradiction"]["sentence"] == "Insects have six legs."
    assert swaps.support(evidence, ["Insects have six legs."])[0]["probability"] > 0.5
    assert swaps.support(["The capital of Australia is Canberra."],
                         ["Sydney is the capital of Australia."])[0]["probability"] < 0.5
    names = Verifier(check_swaps="names")
    assert names.support(["The capital of Australia is Canberra."],
                         ["Sydney is the capital of Australia."])[0]["probability"] < 0.5
    numbers = resolve_verifier(None)  # the default: "names-numbers-nouns"
    assert numbers.check_swaps == "names-numbers-nouns"
    assert numbers.support(["Plants absorb carbon dioxide from the air."],
                           ["Plants absorb oxygen from the air."])[0]["probability"] < 0.5
    assert numbers.support(["She watched the film with her brother."],
                           ["She watched the movie with her brother."])[0]["probability"] > 0.5
    capped = numbers.support(evidence, ["Insects have eight legs."])[0]
    # "six" is a spelled number and a WordNet noun: either reading may be the strongest contrast
    assert capped["probability"] < 0.5 and capped["contradiction"]["contrast"] in ("Insects have 6 legs.",
                                                                                 "Insects have six legs.")
    assert numbers.support(evidence, ["Insects have six legs."])[0]["probability"] > 0.5
    for wrong in (1, "yes", None, "numbers"):
        with pytest.raises(ValueError, match="check_swaps must be one of"):
            Verifier(check_swaps=wrong)
    # The swap checks read English words: a verifier for another language keeps the setting but does not read them.
    other = Verifier(languages=("de",))
    assert other.check_swaps == "names-numbers-nouns" and other.swaps_read is False
    assert numbers.swaps_read == "names-numbers-nouns"
    row = other.support(["The capital of Australia is Canberra."], ["Sydney is the capital of Australia."])[0]
    assert row["contradiction"] is None and row["probability"] > 0.5


def test_finetuning_the_top_blocks_trains_them_alone_reuses_lower_states_and_adds_contrast_pairs(tmp_path):
    from safetensors.torch import load_file

    from calibration.data.labelled import LabelledSet
    from calibration.fitting import finetune
    from judges import EvaluationDataset
    from judges.lm.verifier.files import load_shipped

    # Labels the shipped verifier ranks backwards (copies unsupported, paraphrases supported): one that
    # learns anything beats it on the held-out items, so the fine-tuned weights are kept and can be read.
    samples, labels = [], []
    for i in range(24):
        samples.append(SingleTurnSample(response=f"Work on the tower in Paris ended in the year {1889 + (i % 3) * 0}"
                                                 f"{'.' if i % 2 else ', people say.'}", retrieved_contexts=[EVIDENCE]))
        labels.append(1)
        samples.append(SingleTurnSample(response="The Eiffel Tower was completed in 1889." + " Indeed." * (i % 3),
                                        retrieved_contexts=[EVIDENCE]))
        labels.append(0)
    data = LabelledSet("backwards", EvaluationDataset(samples), labels, "binary", "written for this test")
    with pytest.raises(ValueError, match="top_blocks must be None"):
        finetune.finetune_verifier(FaithfulnessWithVerifier(), data, np.asarray(labels, float), top_blocks=0)
    with pytest.raises(ValueError, match="contrast_pairs must be True or False"):
        finetune.finetune_verifier(FaithfulnessWithVerifier(), data, np.asarray(labels, float), contrast_pairs=1)
    finetune._lower_states_kept.clear()
    judge, report = finetune.finetune_verifier(FaithfulnessWithVerifier(), data, np.asarray(labels, float),
                                               out=tmp_path / "top", epochs=3, learning_rate=1e-3, top_blocks=1,
                                               contrast_pairs=True)
    assert report["trained_layers"] == "the last 1 of 6 blocks and the head"
    assert report["contrast_pairs"] == 18  # each supported training item has a number to change
    assert "and 18 contrast pairs" in report["decision"]
    assert report["kept"] == "fine-tuned", report["decision"]
    kept = dict(finetune._lower_states_kept)  # the states entering block 5, per pair
    assert all((5, EVIDENCE, s.response) in kept for s in samples) and len(kept) > len({s.response for s in samples})
    tuned, shipped = load_file(tmp_path / "top" / "model.safetensors"), load_shipped()[0].state_dict()
    changed = {name for name, value in tuned.items() if name in shipped
               and not np.array_equal(value.float().numpy(), shipped[name].float().numpy())}
    assert changed and all(n.startswith(("bert.encoder.layer.5.", "bert.pooler", "classifier")) for n in changed)
    assert any(n.startswith("bert.encoder.layer.5.") for n in changed) and "classifier.weight" in changed
    assert judge.score(samples[0]).score > judge.score(samples[1]).score  # it learned the (backwards) labels
    finetune.finetune_verifier(FaithfulnessWithVerifier(), data, np.asarray(labels, float), out=tmp_path / "again",
                               epochs=1, top_blocks=1)  # a second fit (a cross-fitting fold) computes no new states
    assert list(finetune._lower_states_kept) == list(kept)


def test_a_claims_shortlist_is_the_same_in_every_process():
    """The shortlist's weighted sum over the words a claim shares with a unit iterates a set, whose order
    follows the process's hash seed. Summed exactly, the chosen units do not depend on it (a plain sum picked
    other units for some distractor-set claims under some seeds)."""
    import subprocess
    import sys

    script = ("import json\n"
              "from judges.lm.verifier import resolve_verifier\n"
              "from judges.lm.verifier.units import shortlist\n"
              "from calibration.verifier.contrastive import load_distractors\n"
              "v = resolve_verifier(None)\n"
              "print(json.dumps([shortlist(v.units([it['evidence'], *it['distractors']]),\n"
              "                            [it['contradicted'], it['supported']], 2)\n"
              "                  for w in ('first', 'second') for it in load_distractors(w)]))\n")
    root = Path(__file__).resolve().parents[1]
    printed = {subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in (1, 2, 3, 4)}
    assert len(printed) == 1 and len(json.loads(printed.pop())) == 96
