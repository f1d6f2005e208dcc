"""The samples both sides of the Ragas comparison score: deterministic RAG question/answer/context triples
(stdlib only, so the peers' own environment can import it)."""

from __future__ import annotations

import random

CITIES = ["Paris", "Tokyo", "Rome", "Madrid", "Lima", "Cairo", "Nairobi", "Oslo", "Quito", "Hanoi"]
COUNTRIES = ["France", "Japan", "Italy", "Spain", "Peru", "Egypt", "Kenya", "Norway", "Ecuador", "Vietnam"]


def side_by_side_samples(n: int = 100, seed: int = 0) -> list[dict[str, object]]:
    """``n`` samples with user_input, response (right or wrong, one or two sentences), retrieved_contexts
    and reference, the field names both libraries use."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = i % len(CITIES)
        right = rng.random() < 0.6
        city = CITIES[k] if right else CITIES[(k + 3) % len(CITIES)]
        response = f"The capital of {COUNTRIES[k]} is {city}."
        if rng.random() < 0.5:
            response += f" It is a large city with a long history, visited by many people every year ({i})."
        out.append({
            "user_input": f"What is the capital of {COUNTRIES[k]}? ({i})",
            "response": response,
            "retrieved_contexts": [f"{CITIES[k]} is the capital and largest city of {COUNTRIES[k]}.",
                                   f"{COUNTRIES[k]} has a population of many millions ({i})."],
            "reference": f"The capital of {COUNTRIES[k]} is {CITIES[k]}.",
        })
    return out
