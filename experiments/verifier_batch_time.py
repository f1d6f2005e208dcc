"""Where a training batch of the verifier spends its time on this CPU, and what removing each cost would save.

    .venv/bin/python experiments/verifier_batch_time.py                     # ~15 min on 2 cores
    .venv/bin/python experiments/verifier_batch_time.py --batches 40 --rounds 1 --profile

``make verifier`` took 84 min on an AMD EPYC without AVX-512 (docs/verifier.md, "Training it again"), 60 min
being the issue's target. This trains the first ``--batches`` batches of the shipped first parent's plan
(``soup_recipe().parents[0]``: its mix, order, seed and loop) from a fresh model, once per variant, variants in
turn, round after round (the machine's speed drifts between minutes), and prints each variant's mean
seconds a batch (what a training's wall time is made of; the first 10 batches of each run not counted),
split into forward, backward and the optimizer step, and a hash of the weights after the last batch (equal
hashes: the same bytes). The variants:

- ``shipped``: the steps of ``train_verifier``'s loop (PyTorch's SDPA attention, AdamW, dropout 0.1), without
  its checks and checkpoints;
- ``eager-fused``: the same updates with eager attention and the fused AdamW kernel (other rounding, same
  distribution of dropout masks);
- ``no-attention-dropout``: the shipped loop with the attention probabilities' dropout at 0 (a recipe change);
- ``no-dropout``: every dropout at 0 and the fused AdamW (what is left is the model's own arithmetic: the
  floor of float32 training on this CPU, short of training fewer or shorter pairs);
- ``compiled`` (not in the default list): the shipped loop with the model under ``torch.compile`` (dynamic
  shapes; its compiling falls in the untimed first batches, whose seconds each round's line prints).

First it times float32 matrix products of a long batch's shapes (16 x 110 tokens by 384 x 1536, and back):
their GFLOP/s, against what the two cores can do, says whether the products themselves have room to gain.
``--profile`` adds PyTorch's profiler table of one shipped-loop run (operators by their own CPU time).
Nothing is written; prints no MLflow run; not run by the tests. Must not read the evaluation sets.

Run 2026-11-29 on the AVX2-only AMD EPYC (docs/verifier-experiments.md, "Measured: where a training batch's time goes"):
the products at 146-178 GFLOP/s, near the cores' peak; the floor 0.81-0.82 of the shipped loop's seconds a
batch, so ~69 min for ``make verifier`` there: over the hour whatever the loop's overhead; ``compiled`` 1.024
of the shipped loop, and 34.6 s (compiling) for the first 10 batches against 9.9.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from calibration.verifier.mix import training_mix  # noqa: E402
from calibration.verifier.soup import soup_recipe  # noqa: E402
from calibration.verifier.training import batches, frozen_names, optimizer_and_schedule  # noqa: E402
from judges.lm.verifier.files import base_classifier  # noqa: E402

VARIANTS = ("shipped", "eager-fused", "no-attention-dropout", "no-dropout", "compiled")
#: The variants run when ``--variants`` is not given.
MEASURED = VARIANTS[:4]
WARM = 10


def run(variant: str, config, encoded, labels, plan, n: int, tokenizer, profile: bool = False) -> dict:
    """Train ``n`` batches of ``plan`` from a fresh seeded model as ``variant`` does; the times of each phase."""
    import torch

    torch.manual_seed(config.seed)
    model, _ = base_classifier(num_labels=1)
    if variant == "eager-fused":
        model.set_attn_implementation("eager")
    for module in model.modules():
        if variant == "no-attention-dropout" and type(module).__name__ == "BertSelfAttention":
            module.dropout.p = 0.0  # read as the attention probabilities' dropout by both attention kernels
        if variant == "no-dropout" and isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    frozen = frozen_names(model, config.frozen_layers)
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(name not in frozen)
    trained = [p for p in model.parameters() if p.requires_grad]
    fused = {"fused": True} if variant in ("eager-fused", "no-dropout") else {}
    optimizer, schedule = optimizer_and_schedule(model, config, len(plan), **fused)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    forward_pass = torch.compile(model, dynamic=True) if variant == "compiled" else model
    phases: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": [], "batch": []}
    warm = 0.0
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) if profile else None
    for step, batch in enumerate(plan[:n]):
        if profiler is not None and step == WARM:
            profiler.__enter__()
        start = time.perf_counter()
        features = tokenizer.pad({k: [encoded[k][i] for i in batch] for k in encoded.keys()}, return_tensors="pt")
        loss = loss_fn(forward_pass(**features).logits[:, 0].float(), labels[batch])
        forward = time.perf_counter()
        loss.backward()
        backward = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        end = time.perf_counter()
        if step < WARM:
            warm += end - start
        else:
            for key, seconds in (("forward", forward - start), ("backward", backward - forward),
                                 ("optimizer", end - backward), ("batch", end - start)):
                phases[key].append(seconds)
    if profiler is not None:
        profiler.__exit__(None, None, None)
        print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=15), flush=True)
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return {**{k: statistics.fmean(v) for k, v in phases.items()}, "loss": loss.item(), "warm": warm,
            "hash": digest.hexdigest()[:12]}


def gemm_rate(threads: int, repeats: int = 50) -> str:
    """GFLOP/s of float32 matrix products of a long batch's shapes (the feed-forward layer's, both ways)."""
    import torch

    torch.set_num_threads(threads)
    cells = []
    for m, k, n in ((1760, 384, 1536), (1760, 1536, 384)):
        a, b = torch.randn(m, k), torch.randn(k, n)
        for _ in range(3):
            a @ b
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        cells.append(f"{m}x{k} @ {k}x{n}: {2 * m * k * n * repeats / (time.perf_counter() - start) / 1e9:.0f} GFLOP/s")
    return "; ".join(cells)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=120, help="batches a run trains (the first 10 not timed)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(MEASURED), help=f"of {', '.join(VARIANTS)}")
    parser.add_argument("--profile", action="store_true", help="also print the profiler's table of the shipped loop")
    args = parser.parse_args()
    variants = args.variants.split(",")
    if unknown := sorted(set(variants) - set(VARIANTS)):
        parser.error(f"--variants: unknown {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    if args.batches <= WARM:
        parser.error(f"--batches must be over {WARM} (the first {WARM} are not timed), got {args.batches}")
    import torch

    config = soup_recipe().parents[0]
    print(f"matrix products, float32, {config.threads} threads: {gemm_rate(config.threads)}", flush=True)
    torch.set_num_threads(config.threads)
    torch.use_deterministic_algorithms(True)
    train, _ = training_mix(config)
    _, tokenizer = base_classifier(num_labels=1)
    encoded = tokenizer([p.evidence for p in train], [p.claim for p in train], truncation="longest_first",
                        max_length=config.max_length)
    plan = batches([len(ids) for ids in encoded["input_ids"]], config.batch_size, config.seed)
    labels = torch.tensor([float(p.label) for p in train])
    if args.profile:
        run("shipped", config, encoded, labels, plan, min(args.batches, WARM + 20), tokenizer, profile=True)
    results: dict[str, list[dict]] = {v: [] for v in variants}
    for round_ in range(args.rounds):
        for variant in variants:
            results[variant].append(run(variant, config, encoded, labels, plan, args.batches, tokenizer))
            last = results[variant][-1]
            print(f"round {round_ + 1} {variant}: {last['batch']:.3f} s a batch ({last['warm']:.1f} s for the "
                  f"first {WARM}), loss {last['loss']:.4f}, weights {last['hash']}", flush=True)
    base = statistics.median(r["batch"] for r in results[variants[0]])
    print(f"\nbatches {WARM + 1}-{args.batches} of the shipped first parent's plan, {args.rounds} rounds; a cell is "
          f"the median over rounds of each run's mean seconds a batch (ratio: against {variants[0]})")
    print("| variant | s a batch | min-max over rounds | forward | backward | optimizer | ratio | weights |")
    print("|---|---:|---|---:|---:|---:|---:|---|")
    for variant, runs in results.items():
        cell = {k: statistics.median(r[k] for r in runs) for k in ("batch", "forward", "backward", "optimizer")}
        spread = f"{min(r['batch'] for r in runs):.3f}-{max(r['batch'] for r in runs):.3f}"
        hashes = ", ".join(sorted({r["hash"] for r in runs}))
        print(f"| {variant} | {cell['batch']:.3f} | {spread} | {cell['forward']:.3f} | {cell['backward']:.3f} | "
              f"{cell['optimizer']:.3f} | {cell['batch'] / base:.3f} | {hashes} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
