"""Training the groundedness verifier (``judges.lm.verifier`` scores with it): the room of its own on the
calibration floor.

    config.py        ``TrainConfig``: every setting of a training run, and the shipped recipe
    pairs.py         public (evidence, claim, supported?) pairs from ``../shared/data/verifier`` and BEGIN
    perturb.py       rule-made pairs: a copy with one fact changed (number, name, negation, direction)
    compress.py      shorter copies of a sentence, for the pairs above
    summary_pairs.py pairs from SummEval's summaries against their articles' windows
    mix.py           the training mix of all of those
    bias.py          the lexical-bias model of a debiased training (a product of experts)
    training.py      one training run: seeded, resumable, safetensors only
    soup.py          the shipped recipe: two trainings and their weight average (``make verifier``)
    contrastive.py   the hand-written test sets in ``sets/`` (never trained on)

``fit(optimizer="finetune")`` (``calibration.fitting.finetune``) fine-tunes the shipped verifier on a user's
labels with ``training.py``. What was tried and measured: docs/verifier-log.md.

Must not score metrics or calibrate judges (``calibration.fitting`` does).
"""
