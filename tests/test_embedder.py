"""The embedder: the embedded model on ONNX Runtime, each text encoded once, and the signals that share it."""

import numpy as np
import pytest

from calibration.data.labelled import LabelledSet
from calibration.fitting.signals import feature_matrix, signal_columns
from judges.lm.embedder_onnx import OnnxTransformer, embedder_graph
from judges.lm.embeddings import (
    Embedder,
    default_embeddings,
    sentence_transformer_embedder,
)
from judges.lm.files import embedded_embedder_path
from judges.lm.onnx_files import onnx_available
from judges.metrics.grounding import alignment

needs_onnx = pytest.mark.skipif(not onnx_available(), reason="needs onnxruntime and onnx (the embeddings extra)")

TEXTS = ["The Eiffel Tower was completed in 1889.", "Short.", "北京 is naïve, ça coûte 30 €.",
         " ".join(f"Fact {i} says the river is {i} kilometres long." for i in range(60))]  # over 256 tokens: cut


@needs_onnx
def test_the_embedded_embedder_runs_on_onnx_runtime_with_sentence_transformers_vectors():
    onnx, torch_ = sentence_transformer_embedder(runtime="onnx"), sentence_transformer_embedder(runtime="torch")
    assert sentence_transformer_embedder() is onnx  # the default, one object a process
    assert np.abs(onnx.embed(TEXTS) - torch_.embed(TEXTS)).max() < 1e-5
    for text in TEXTS:
        mine, theirs = onnx.token_vectors(text), torch_.token_vectors(text)
        assert mine.shape == theirs.shape and np.abs(mine - theirs).max() < 1e-5
    assert len(onnx.token_vectors(TEXTS[3])) == 254  # cut at the model's 256 tokens, [CLS] and [SEP] dropped
    assert abs(alignment(TEXTS[0], TEXTS[3], onnx) - alignment(TEXTS[0], TEXTS[3], torch_)) < 1e-5
    assert embedder_graph(embedded_embedder_path()).name.startswith("embedder-")
    with pytest.raises(ValueError, match="runtime must be one of"):
        sentence_transformer_embedder(runtime="gpu")


@needs_onnx
def test_onnx_sessions_do_not_spin_between_runs():
    """Two sessions take turns in one judge (the talk classifier's embedder, then the verifier): a session's
    threads spinning after its run would take the cores the other one's run needs."""
    runner = OnnxTransformer(embedded_embedder_path())
    assert runner.session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"


@needs_onnx
def test_a_texts_vectors_do_not_depend_on_the_batch_it_runs_in():
    runner = OnnxTransformer(embedded_embedder_path(), batch_size=2)
    together = runner.run(TEXTS + ["x " * 40, "A"])
    alone = [runner.run([text])[0] for text in TEXTS]
    assert all(np.abs(a - b).max() < 1e-5 for a, b in zip(together, alone))


def counting_embedder() -> tuple[Embedder, list[list[str]]]:
    """An embedder with token vectors (a fixed random vector per word, [CLS] and [SEP] around them) that
    records every batch it is asked to encode."""
    calls: list[list[str]] = []

    def tokens(texts):
        calls.append(list(texts))
        return [np.stack([np.random.default_rng(abs(hash(w)) % 2**32).normal(size=8) for w in ["[CLS]", *t.split(), "[SEP]"]])
                for t in texts]

    return Embedder(None, name="counting", encode_tokens=tokens, pooled=True), calls


def test_each_distinct_text_is_encoded_once_and_read_back_after():
    embedder, calls = counting_embedder()
    embedder.prepare(["a b", "c d", "a b", ""])
    assert calls == [["a b", "c d"]]  # one batched call, each distinct text once, empty text left out
    vectors = embedder.embed(["a b", "c d"])
    assert embedder.token_vectors("a b").shape == (2, 8) and calls == [["a b", "c d"]]
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.allclose(embedder.embed(["e f"]), embedder.embed(["e f"])) and calls[1:] == [["e f"]]
    embedder.forget()  # a first reading again: each text is encoded anew
    embedder.embed(["a b", "e f"])
    assert calls[2:] == [["a b", "e f"]]
    small = Embedder(None, name="small", encode_tokens=lambda texts: [np.ones((3, 2))] * len(texts), pooled=True,
                     cache_size=2)
    small.prepare(["a", "b", "c"])
    assert list(small._tokens) == ["b", "c"]  # the oldest goes first
    with pytest.raises(ValueError, match="encode is required"):
        Embedder(None, name="nothing")


def test_the_signals_encode_every_text_once_for_all_signals_and_samples():
    embedder, calls = counting_embedder()
    data = LabelledSet.from_records([
        {"response": f"the tower is {n} metres", "retrieved_contexts": ["the tower is 300 metres tall"], "label": n % 2}
        for n in (100, 200, 300, 300)])
    with default_embeddings(embedder):
        columns = signal_columns(["embedding_similarity", "embedding_alignment", "token_overlap"], data.dataset)
        again = feature_matrix(["embedding_alignment", "embedding_similarity"], data.dataset)
    assert len(calls) == 1 and sorted(calls[0]) == sorted({s.response for s in data.dataset} |
                                                          {"the tower is 300 metres tall"})
    assert columns["embedding_alignment"][2] == pytest.approx(1.0)  # the same words: every token's best match
    assert np.array_equal(again, np.column_stack([columns["embedding_alignment"], columns["embedding_similarity"]]))
    assert feature_matrix([], data.dataset) is None
    assert feature_matrix(["token_overlap"], []).shape == (0, 1)
