"""What one training of the groundedness verifier is told: ``TrainConfig``, checked field by field as it is made.

    TrainConfig()                                        # the shipped first parent's mix and loop
    TrainConfig(per_source={"fever_symmetric": 64}, perturbed=32, begin_parts=())     # a tiny slice, for tests

The mix fields are read by ``verifier_mix.training_mix``, the loop's by ``verifier_training.train_verifier``;
``verifier_soup.scaled`` multiplies the counts. Every error names ``TrainConfig`` and the field (and, for
``per_source``, the source), before any data is read.

Owns: the fields, their defaults and their checks. Must not read data or train.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from calibration.data.loaders import BEGIN_FILES
from calibration.verifier.pairs import EVALUATION_SOURCES, LOADERS

#: The default mix: pairs drawn per source (label-balanced where the source allows).
DEFAULT_MIX = {"vitaminc_real": 22000, "vitaminc_synthetic": 12000, "mnli": 9815, "snli": 6000,
               "fever_symmetric": 1420, "factcheck_gpt": 3000, "expertqa": 3000, "halueval_qa": 6000}


#: all-MiniLM-L6-v2's encoder layers (``TrainConfig.frozen_layers`` freezes up to all but one of them).
ENCODER_LAYERS = 6

#: The precisions a training may run its forward passes in (``TrainConfig.precision``).
PRECISIONS = ("float32", "bfloat16")


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 0
    per_source: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_MIX))
    perturbed: int = 10000
    #: The share of the rule-made pairs (either label) dressed as chat replies (``perturb.as_reply``) after
    #: they are made, with a random stream of their own (the pairs stay those of the undressed mix); 0 in
    #: the shipped model's mix.
    as_replies: float = 0.0
    #: The share of evidence sentences compressed faithfully (``calibration.verifier.compress``) before the
    #: rules make pairs from them, so compressions come as positives and with a changed fact alike; 0 in
    #: the shipped model's mix.
    compressed: float = 0.0
    #: With ``compressed``: whether facts are also changed in the compressions (True) or only in the
    #: sentences as they stand, so compressions come as positives only (False). True before this option.
    compressed_negatives: bool = True
    #: Supported pairs whose claim is in other words than its evidence, drawn again on top of the mix
    #: (``other_words_positives``); 0 in the shipped model's mix.
    other_words: int = 0
    #: SummEval sentences and changed-fact copies of them (``calibration.verifier.summary_pairs``); 0 when shipped.
    summeval: int = 0
    #: Minimal pairs from the corpus's evidence, a sentence with a direction word flipped (not supported) and
    #: kept (supported) (``verifier_mix.direction_pairs``); 0 in the shipped model's mix.
    direction: int = 0
    #: Also write the uniform average of the weights from this share of the steps on (snapshots every
    #: ``AVERAGE_EVERY`` steps) into ``<out>/averaged/``: the same run, not a different one (the average
    #: never feeds back into training). 0 (no average) for the shipped model.
    average_from: float = 0.0
    #: The weight on a lexical bias model's log-odds added to the logit in the loss (``verifier_bias``); 0: plain.
    debias: float = 0.0
    begin_parts: tuple[str, ...] = ("cmu", "tc")
    #: How many times the BEGIN dev pairs go into the mix (1 in the shipped model's mix). A repeated pair's
    #: copies share its group, so they land on one side of the split; a held-out one is scored that often.
    begin_repeat: int = 1
    max_length: int = 160
    #: Encoder layers frozen from the bottom, with every embedding (0 in the shipped model's mix: only the word
    #: embeddings are frozen). The backward pass then stops above them: each frozen layer of the six saves
    #: about a tenth of a batch's time (measured), and the model learns far more slowly
    #: (docs/verifier-log.md, "Direction pairs, run 6").
    frozen_layers: int = 0
    batch_size: int = 16
    learning_rate: float = 5e-5
    warmup: float = 0.06
    weight_decay: float = 0.01
    held_out: int = 400
    checkpoint_every: int = 200
    eval_every: int = 500
    #: torch's compute threads, capped by the cores the process may use (``judges.lm.threads.usable_cores``).
    threads: int = 2
    #: The forward passes' precision: "float32" (the shipped model), or "bfloat16" (torch's autocast on the
    #: CPU; weights, gradients and AdamW stay float32): ~1.9x faster where the CPU has bfloat16 units
    #: (AVX512-BF16, AMX), other tensors than float32's, docs/verifier-log.md, "bfloat16 training".
    precision: str = "float32"

    def __post_init__(self) -> None:
        """Every field checked as the configuration is made (``replace`` too), each error naming its field."""
        def is_int(value: Any) -> bool:
            return isinstance(value, int) and not isinstance(value, bool)

        for name, low in (("seed", None), ("perturbed", 0), ("other_words", 0), ("summeval", 0),
                          ("direction", 0), ("held_out", 0), ("begin_repeat", 1), ("max_length", 1),
                          ("frozen_layers", 0), ("batch_size", 1), ("checkpoint_every", 1), ("eval_every", 1),
                          ("threads", 1)):
            value = getattr(self, name)
            if not is_int(value) or (low is not None and value < low):
                raise ValueError(f"TrainConfig: {name} must be an int{'' if low is None else f' >= {low}'}, "
                                 f"got {value!r}")
        for name in ("as_replies", "compressed", "average_from", "debias", "warmup"):
            share = getattr(self, name)
            if isinstance(share, bool) or not isinstance(share, int | float) or not 0.0 <= share <= 1.0:
                raise ValueError(f"TrainConfig: {name} must be a share in [0, 1], got {share!r}")
        if self.frozen_layers > ENCODER_LAYERS - 1:
            raise ValueError(f"TrainConfig: frozen_layers must be an int in [0, {ENCODER_LAYERS - 1}] (the base "
                             f"has {ENCODER_LAYERS} encoder layers; one must train), got {self.frozen_layers!r}")
        if isinstance(self.learning_rate, bool) or not isinstance(self.learning_rate, int | float) \
                or not 0 < self.learning_rate < math.inf:
            raise ValueError(f"TrainConfig: learning_rate must be a finite number > 0, got {self.learning_rate!r}")
        if isinstance(self.weight_decay, bool) or not isinstance(self.weight_decay, int | float) \
                or not 0 <= self.weight_decay < math.inf:
            raise ValueError(f"TrainConfig: weight_decay must be a finite number >= 0, got {self.weight_decay!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"TrainConfig: precision must be {' or '.join(map(repr, PRECISIONS))}, "
                             f"got {self.precision!r}")
        if not isinstance(self.compressed_negatives, bool):
            raise ValueError(f"TrainConfig: compressed_negatives must be True or False, got {self.compressed_negatives!r}")
        if not isinstance(self.per_source, dict):
            raise ValueError(f"TrainConfig: per_source must be a dict of source -> pairs, got {self.per_source!r}")
        for source, count in self.per_source.items():
            if source in EVALUATION_SOURCES or source not in LOADERS:
                why = "is held out for evaluation" if source in EVALUATION_SOURCES else f"is not one of {sorted(LOADERS)}"
                raise ValueError(f"TrainConfig: per_source[{source!r}] {why}")
            if not is_int(count) or count < 0:
                raise ValueError(f"TrainConfig: per_source[{source!r}] must be an int >= 0, got {count!r}")
        parts = self.begin_parts
        if isinstance(parts, str) or not isinstance(parts, Sequence) or any(p not in BEGIN_FILES for p in parts):
            raise ValueError(f"TrainConfig: begin_parts must be a sequence of {sorted(BEGIN_FILES)}, got {parts!r}")
        object.__setattr__(self, "begin_parts", tuple(parts))  # as declared, whatever sequence was given
