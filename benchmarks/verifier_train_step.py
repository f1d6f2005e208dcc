"""One training step of the verifier on this CPU, by frozen layers, and how near the CPU's matrix speed it runs.

    .venv/bin/python benchmarks/verifier_train_step.py             # ~1.5 min on 2 cores
    .venv/bin/python benchmarks/verifier_train_step.py --threads 4

One fixed batch (the first 16 pairs of the hand-written contrastive set, padded to the longest) through the
base classifier as ``train_verifier`` builds it, with ``TrainConfig.frozen_layers`` = 0, 2, 3, 4, 5
(``verifier_training.frozen_names``): forward, backward and AdamW timed apart, medians of ``--steps`` steps
after 5 of warm-up. Then torch's float32 matrix product at the model's shapes (the batch's tokens x 384 x
1536 and back) and at 2048 x 2048 x 2048, and the forward pass's rate from its count of multiply-adds
(2 x the encoder's weights x the batch's tokens: attention scores and the head left out, so a floor).
Written 2026-11-29 for docs/verifier-log.md, run 6.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from calibration.verifier.mix import contrastive_set  # noqa: E402
from calibration.verifier.training import frozen_names  # noqa: E402
from judges.lm.verifier.files import base_classifier  # noqa: E402

FROZEN_COUNTS = (0, 2, 3, 4, 5)


def main() -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, tokenizer = base_classifier(num_labels=1)
    pairs = contrastive_set()[:16]
    features = tokenizer([p.evidence for p in pairs], [p.claim for p in pairs], padding=True,
                         truncation="longest_first", max_length=160, return_tensors="pt")
    labels = torch.tensor([float(p.label) for p in pairs])
    tokens = int(features["input_ids"].numel())
    print(f"batch: {len(pairs)} pairs x {features['input_ids'].shape[1]} tokens, {args.threads} threads\n")
    print("| frozen layers | forward ms | backward ms | AdamW ms | step ms |")
    print("|---|---|---|---|---|")
    forward_ms = {}
    for count in FROZEN_COUNTS:
        frozen = set(frozen_names(model, count))
        for name, parameter in model.named_parameters():
            parameter.requires_grad_(name not in frozen)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
        times = []
        for step in range(5 + args.steps):
            start = time.perf_counter()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(**features).logits[:, 0], labels)
            forward = time.perf_counter()
            loss.backward()
            backward = time.perf_counter()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if step >= 5:
                times.append((forward - start, backward - forward, time.perf_counter() - backward))
        cells = [1000 * statistics.median(t[i] for t in times) for i in range(3)]
        forward_ms[count] = cells[0]
        print(f"| {count} | {cells[0]:.0f} | {cells[1]:.0f} | {cells[2]:.0f} | {sum(cells):.0f} |", flush=True)
    encoder = sum(p.numel() for n, p in model.named_parameters() if n.startswith("bert.encoder."))
    print(f"\nforward pass, {encoder * tokens / 1e9:.1f} G multiply-adds at {tokens} tokens: "
          f"{2 * encoder * tokens / (forward_ms[0] / 1000) / 1e9:.0f} GFLOP/s with nothing frozen")
    print("\n| matrix product (m x k x n) | GFLOP/s |")
    print("|---|---|")
    for m, k, n in ((tokens, 384, 1536), (tokens, 1536, 384), (2048, 2048, 2048)):
        a, b = torch.randn(m, k), torch.randn(k, n)
        for _ in range(3):
            a @ b
        start = time.perf_counter()
        for _ in range(args.steps):
            a @ b
        print(f"| {m} x {k} x {n} | {2 * m * k * n * args.steps / (time.perf_counter() - start) / 1e9:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
