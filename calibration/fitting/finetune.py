"""``fit(judge, labels, optimizer="finetune")``: the verifier of a ``FaithfulnessWithVerifier`` fine-tuned on the
user's own labels.

Each labelled item becomes one (evidence, response) pair: the retrieved contexts joined, the whole response,
the label (scaled to [0, 1], then >= 0.5 = supported). A seeded, label-stratified share (``held_out``) of the
items is kept out of training for early stopping: after each epoch the held-out pairs are scored, and the
epoch with the best held-out ROC-AUC is kept, or no epoch at all when none beats the verifier it started from
(the result then says so and the judge is returned unchanged). Too few labels to measure that are refused
with a message, before any training: fewer than ``min_labels`` items, or fewer than ``min_per_class`` of a
label. ``fit``'s guard then checks the fine-tuned judge against the shipped one on train items held back
from both, like any optimizer.

Two options adapt with fewer labels in mind:

  * ``top_blocks=k`` trains only the last k encoder blocks, the pooler and the head. The lower blocks keep
    the shipped weights, so what enters block L-k is computed once per pair and reused by every epoch and by
    every fit of the same process (cross-fitting fits once per fold on the same items): an epoch then costs the
    top blocks alone. ``None`` (the default) trains every layer but the word embeddings.
  * ``contrast_pairs=True`` adds, for each training item labelled supported, a copy with one fact changed
    (``calibration.verifier.perturb.one_fact_changed``), labelled not supported, same evidence: labels of
    natural replies teach "copies the evidence, so supported", and these pairs say that one changed fact
    matters. Held-out items are never augmented.

The fine-tuned model is written as a Hugging Face folder (safetensors) under ``out`` and the returned judge
names it (``verifier=<folder>``), so a compiled judge saved as JSON points at it.

Owns: fine-tuning on labels. Must not train from scratch (``calibration.verifier.training``).
"""

from __future__ import annotations

import hashlib
import random
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from calibration.data.labelled import LabelledSet
from calibration.verifier.perturb import names_in, one_fact_changed
from calibration.verifier.training import roc_auc
from judges.lm.threads import usable_cores
from judges.lm.verifier import EMBEDDED_INT8
from judges.lm.verifier.files import load_shipped
from judges.metrics.rag.verified import FaithfulnessWithVerifier

MIN_LABELS = 40
MIN_PER_CLASS = 10
#: ``fit(..., optimizer="finetune", **options)``: the options that reach ``finetune_verifier``.
FINETUNE_OPTIONS = ("out", "epochs", "held_out", "learning_rate", "batch_size", "min_labels", "min_per_class",
                    "threads", "top_blocks", "contrast_pairs")
MAX_LENGTH = 256
#: Pairs whose lower-block states are kept in memory (``top_blocks``): enough for a few hundred labels and their
#: contrast pairs across the fits of one ``fit`` call, a few hundred MB at most.
LOWER_STATES_KEPT = 2048
_lower_states_kept: OrderedDict[tuple[int, str, str], Any] = OrderedDict()


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _pairs(data: LabelledSet, targets: np.ndarray) -> tuple[list[tuple[str, str]], np.ndarray]:
    pairs = [("\n\n".join(s.retrieved_contexts or []), s.response or "") for s in data.dataset]
    return pairs, (np.asarray(targets, float) >= 0.5).astype(int)


def _encode(tokenizer, pairs: list[tuple[str, str]]):
    return tokenizer([e for e, _ in pairs], [r for _, r in pairs], padding=True, truncation="longest_first",
                     max_length=MAX_LENGTH, return_tensors="pt")


def _lower_states(model, tokenizer, pairs: list[tuple[str, str]], start: int) -> list[Any]:
    """Per pair, the (unpadded) hidden states entering encoder block ``start``, from the shipped lower blocks;
    kept across calls (``LOWER_STATES_KEPT``). Right padding is masked, so a pair's states do not depend on
    the batch it was computed in."""
    import torch

    found = {p: _lower_states_kept[(start, *p)] for p in pairs if (start, *p) in _lower_states_kept}
    missing = sorted({p for p in pairs if p not in found}, key=lambda p: len(p[0]) + len(p[1]))
    model.eval()
    with torch.no_grad():  # not inference_mode: these states are inputs of trained blocks
        for at in range(0, len(missing), 32):
            chunk = missing[at:at + 32]
            encoded = _encode(tokenizer, chunk)
            states = model.bert(**encoded, output_hidden_states=True).hidden_states[start]
            for row, pair in enumerate(chunk):
                found[pair] = states[row, :int(encoded["attention_mask"][row].sum())].clone()
                _lower_states_kept[(start, *pair)] = found[pair]
                while len(_lower_states_kept) > LOWER_STATES_KEPT:
                    _lower_states_kept.popitem(last=False)
    return [found[p] for p in pairs]


def _given(states):
    """A stand-in for the embeddings that returns ``states``, so the model's own forward (its attention masks,
    its pooler and head) runs on them."""
    import torch

    class Given(torch.nn.Module):
        def forward(self, *args, **kwargs):
            return states
    return Given()


def _top_logits(model, states: list[Any], start: int):
    """Logits of the model from block ``start`` up, given the states entering it (``_lower_states``)."""
    import torch

    width = max(len(s) for s in states)
    hidden = torch.zeros(len(states), width, states[0].shape[1])
    mask = torch.zeros(len(states), width, dtype=torch.long)
    for row, s in enumerate(states):
        hidden[row, :len(s)], mask[row, :len(s)] = s, 1
    bert = model.bert
    embeddings, blocks = bert.embeddings, bert.encoder.layer
    bert.embeddings, bert.encoder.layer = _given(hidden), torch.nn.ModuleList(list(blocks)[start:])
    try:
        return model(input_ids=torch.zeros_like(mask), attention_mask=mask).logits[:, 0]
    finally:
        bert.embeddings, bert.encoder.layer = embeddings, blocks


def _contrast_pairs(pairs: list[tuple[str, str]], labels: np.ndarray, train: list[int],
                    seed: int) -> list[tuple[str, str]]:
    """For each training item labelled supported, the reply with one fact changed (same evidence)."""
    rng = random.Random(f"{seed}:contrast-pairs")
    pool = sorted({name for i in train for name in names_in(pairs[i][0])})
    made = []
    for i in train:
        if labels[i] == 1 and (changed := one_fact_changed(pairs[i][1], pairs[i][0], rng, pool)):
            made.append((pairs[i][0], changed))
    return made


def finetune_verifier(judge: Any, data: LabelledSet, targets: np.ndarray, *, out: str | Path | None = None,
                      epochs: int = 4, held_out: float = 0.25, learning_rate: float = 2e-5, batch_size: int = 16,
                      min_labels: int = MIN_LABELS, min_per_class: int = MIN_PER_CLASS, seed: int = 0,
                      threads: int = 2, top_blocks: int | None = None,
                      contrast_pairs: bool = False) -> tuple[FaithfulnessWithVerifier, dict[str, Any]]:
    """(the judge with its fine-tuned verifier, or unchanged; a report). See the module docstring."""
    import torch

    if not isinstance(judge, FaithfulnessWithVerifier):
        raise ValueError(f"fit(optimizer='finetune') fine-tunes a FaithfulnessWithVerifier's verifier; "
                         f"{type(judge).__name__} has none (use another optimizer)")
    if judge.verifier == EMBEDDED_INT8:
        raise ValueError("fit(optimizer='finetune') trains the float32 shipped verifier; this judge names "
                         "'embedded-int8' (fine-tune with verifier='embedded', then quantize the result: "
                         "Verifier(folder, quantize=True))")
    if judge.verifier not in (None, "embedded"):
        raise ValueError("fit(optimizer='finetune') starts from the shipped verifier; this judge names "
                         f"{judge.verifier!r} (fine-tune that model with its own tools)")
    if top_blocks is not None and (isinstance(top_blocks, bool) or not isinstance(top_blocks, int) or top_blocks < 1):
        raise ValueError(f"fit(optimizer='finetune'): top_blocks must be None (every layer) or a number of encoder "
                         f"blocks >= 1, got {top_blocks!r}")
    if not isinstance(contrast_pairs, bool):
        raise ValueError(f"fit(optimizer='finetune'): contrast_pairs must be True or False, got {contrast_pairs!r}")
    pairs, labels = _pairs(data, targets)
    counts = {int(k): int((labels == k).sum()) for k in (0, 1)}
    if len(labels) < min_labels or min(counts.values()) < min_per_class:
        raise ValueError(f"fit(optimizer='finetune'): fine-tuning receives {len(labels)} labels ({counts[1]} supported, "
                         f"{counts[0]} not), too few to show that it beats the shipped verifier; it needs {min_labels}, "
                         f"with {min_per_class} of each label (fit needs 60 labelled training items for that with "
                         "its default guard and cross-fitting)")
    rng = random.Random(f"{seed}:finetune")
    held: list[int] = []
    for value in (0, 1):
        members = [i for i in range(len(labels)) if labels[i] == value]
        rng.shuffle(members)
        held += members[:max(2, int(round(held_out * len(members))))]
    train = [i for i in range(len(labels)) if i not in set(held)]
    torch.set_num_threads(min(threads, usable_cores()))  # never more threads than cores to run them
    torch.manual_seed(seed)
    model, tokenizer, _ = load_shipped()
    blocks = model.config.num_hidden_layers
    if top_blocks is not None and top_blocks > blocks:
        raise ValueError(f"fit(optimizer='finetune'): top_blocks={top_blocks} but the verifier has {blocks} blocks")
    made = _contrast_pairs(pairs, labels, train, seed) if contrast_pairs else []
    train_pairs = [pairs[i] for i in train] + made
    train_labels = np.concatenate([labels[train], np.zeros(len(made), int)])
    start = None if top_blocks is None else blocks - top_blocks

    if start is None:
        def logits_of(batch: list[tuple[str, str]]):
            return model(**_encode(tokenizer, batch)).logits[:, 0]
        trained = [p for n, p in model.named_parameters() if "word_embeddings" not in n]
    else:
        states = dict(zip(train_pairs + [pairs[i] for i in held],
                          _lower_states(model, tokenizer, train_pairs + [pairs[i] for i in held], start)))

        def logits_of(batch: list[tuple[str, str]]):
            return _top_logits(model, [states[p] for p in batch], start)
        trained = [p for n, p in model.named_parameters()
                   if n.startswith(("bert.pooler", "classifier"))
                   or any(n.startswith(f"bert.encoder.layer.{k}.") for k in range(start, blocks))]

    def scores(indices: list[int]) -> np.ndarray:
        model.eval()
        with torch.no_grad():
            return torch.sigmoid(logits_of([pairs[i] for i in indices])).numpy()

    begin = roc_auc(labels[held], scores(held))
    best, best_state, history = begin, None, []
    optimizer = torch.optim.AdamW(trained, lr=learning_rate, weight_decay=0.01)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    for epoch in range(1, epochs + 1):
        model.train()
        order = list(range(len(train_pairs)))
        rng.shuffle(order)
        for at in range(0, len(order), batch_size):
            batch = order[at:at + batch_size]
            loss = loss_fn(logits_of([train_pairs[i] for i in batch]),
                           torch.tensor(train_labels[batch], dtype=torch.float32))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        value = roc_auc(labels[held], scores(held))
        history.append({"epoch": epoch, "held_out_roc_auc": value})
        if value is not None and (best is None or value > best):
            best, best_state = value, {k: v.detach().clone() for k, v in model.state_dict().items()}
    trained_text = "every layer" if start is None else f"the last {top_blocks} of {blocks} blocks and the head"
    report = {"labels": len(labels), "trained_on": len(train), "held_out": len(held), "contrast_pairs": len(made),
              "trained_layers": trained_text, "shipped_held_out_roc_auc": begin, "epochs": history}
    epochs_text = ", ".join("n/a" if e["held_out_roc_auc"] is None else f"{e['held_out_roc_auc']:.3f}"
                            for e in history)
    what = (f"epochs {epochs_text}; trained {trained_text} on {len(train)} of {len(labels)} items"
            + (f" and {len(made)} contrast pairs" if contrast_pairs else ""))
    if best_state is None:
        report["kept"] = "shipped"
        report["decision"] = (f"the shipped verifier was kept: no epoch beat it on the {len(held)} held-out items "
                              f"(shipped ROC-AUC {_num(begin)}; {what})")
        return judge, report
    model.load_state_dict(best_state)
    options = (top_blocks, contrast_pairs) if top_blocks is not None or contrast_pairs else ()
    digest = hashlib.sha256(repr((sorted(pairs), labels.tolist(), seed, *options)).encode()).hexdigest()[:12]
    folder = (Path(out) if out is not None else Path("runs") / "finetuned-verifier" / digest).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    report["kept"] = "fine-tuned"
    report["decision"] = (f"the fine-tuned verifier was kept: held-out ROC-AUC {best:.3f} against {_num(begin)} for "
                          f"the shipped one on {len(held)} items ({what})")
    report["folder"] = str(folder)  # absolute: the judge loads from any working directory
    params = {**judge.get_params(), "verifier": str(folder)}
    if params.get("aggregate") == "combined":  # fitted on the shipped verifier: a fine-tuned one scores the mean
        params["aggregate"] = None
    return FaithfulnessWithVerifier(**params, lm=judge.judge_lm, adapter=judge.judge_adapter), report
