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

The fine-tuned model is written as a Hugging Face folder (safetensors) under ``out`` and the returned judge
names it (``verifier=<folder>``), so a compiled judge saved as JSON points at it.

Owns: fine-tuning on labels. Must not train from scratch (``calibration.verifier.training``).
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import numpy as np

from calibration.data.labelled import LabelledSet
from calibration.verifier.training import roc_auc
from judges.lm.threads import usable_cores
from judges.lm.verifier import EMBEDDED_INT8
from judges.lm.verifier.files import load_shipped
from judges.metrics.rag.verified import FaithfulnessWithVerifier

MIN_LABELS = 40
MIN_PER_CLASS = 10
#: ``fit(..., optimizer="finetune", **options)``: the options that reach ``finetune_verifier``.
FINETUNE_OPTIONS = ("out", "epochs", "held_out", "learning_rate", "batch_size", "min_labels", "min_per_class",
                    "threads")


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _pairs(data: LabelledSet, targets: np.ndarray) -> tuple[list[tuple[str, str]], np.ndarray]:
    pairs = [("\n\n".join(s.retrieved_contexts or []), s.response or "") for s in data.dataset]
    return pairs, (np.asarray(targets, float) >= 0.5).astype(int)


def finetune_verifier(judge: Any, data: LabelledSet, targets: np.ndarray, *, out: str | Path | None = None,
                      epochs: int = 4, held_out: float = 0.25, learning_rate: float = 2e-5, batch_size: int = 16,
                      min_labels: int = MIN_LABELS, min_per_class: int = MIN_PER_CLASS, seed: int = 0,
                      threads: int = 2) -> tuple[FaithfulnessWithVerifier, dict[str, Any]]:
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

    def scores(indices: list[int]) -> np.ndarray:
        model.eval()
        with torch.inference_mode():
            encoded = tokenizer([pairs[i][0] for i in indices], [pairs[i][1] for i in indices], padding=True,
                                truncation="longest_first", max_length=256, return_tensors="pt")
            return torch.sigmoid(model(**encoded).logits[:, 0]).numpy()

    start = roc_auc(labels[held], scores(held))
    best, best_state, history = start, None, []
    optimizer = torch.optim.AdamW([p for n, p in model.named_parameters() if "word_embeddings" not in n],
                                  lr=learning_rate, weight_decay=0.01)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    for epoch in range(1, epochs + 1):
        model.train()
        order = list(train)
        rng.shuffle(order)
        for at in range(0, len(order), batch_size):
            batch = order[at:at + batch_size]
            encoded = tokenizer([pairs[i][0] for i in batch], [pairs[i][1] for i in batch], padding=True,
                                truncation="longest_first", max_length=256, return_tensors="pt")
            loss = loss_fn(model(**encoded).logits[:, 0], torch.tensor(labels[batch], dtype=torch.float32))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        value = roc_auc(labels[held], scores(held))
        history.append({"epoch": epoch, "held_out_roc_auc": value})
        if value is not None and (best is None or value > best):
            best, best_state = value, {k: v.detach().clone() for k, v in model.state_dict().items()}
    report = {"labels": len(labels), "trained_on": len(train), "held_out": len(held),
              "shipped_held_out_roc_auc": start, "epochs": history}
    epochs_text = ", ".join("n/a" if e["held_out_roc_auc"] is None else f"{e['held_out_roc_auc']:.3f}"
                            for e in history)
    if best_state is None:
        report["kept"] = "shipped"
        report["decision"] = (f"the shipped verifier was kept: no epoch beat it on the {len(held)} held-out items "
                              f"(shipped ROC-AUC {_num(start)}; epochs {epochs_text}; trained on {len(train)} of "
                              f"{len(labels)} items)")
        return judge, report
    model.load_state_dict(best_state)
    digest = hashlib.sha256(repr((sorted(pairs), labels.tolist(), seed)).encode()).hexdigest()[:12]
    folder = (Path(out) if out is not None else Path("runs") / "finetuned-verifier" / digest).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    report["kept"] = "fine-tuned"
    report["decision"] = (f"the fine-tuned verifier was kept: held-out ROC-AUC {best:.3f} against {_num(start)} for "
                          f"the shipped one on {len(held)} items (epochs {epochs_text}; trained on {len(train)} of "
                          f"{len(labels)} items)")
    report["folder"] = str(folder)  # absolute: the judge loads from any working directory
    params = {**judge.get_params(), "verifier": str(folder)}
    return FaithfulnessWithVerifier(**params, lm=judge.judge_lm, adapter=judge.judge_adapter), report
