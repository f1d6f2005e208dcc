"""P(verdict) from an LM's token log-probabilities, for judges run with ``use_logprobs=True``: the mass on
true/yes against false/no at the position where a JSON completion gives a boolean field.

Owns: reading log-probabilities. Must not call an LM (the judges' steps do) or score a metric.
"""

from __future__ import annotations

import math
import re
from typing import Any

_TRUE_WORDS = ("true", "yes")
_FALSE_WORDS = ("false", "no")


def _true_false_mass(token: dict[str, Any]) -> tuple[float, float]:
    p_true = p_false = 0.0
    seen = set()
    for candidate in list(token.get("top_logprobs") or []) + [token]:
        word = candidate["token"].strip().lower()
        if not word or candidate["token"] in seen:
            continue
        seen.add(candidate["token"])
        probability = math.exp(candidate["logprob"])
        if any(w.startswith(word) for w in _TRUE_WORDS):
            p_true += probability
        elif any(w.startswith(word) for w in _FALSE_WORDS):
            p_false += probability
    return p_true, p_false


def verdict_probabilities(logprobs: Any, field: str) -> list[float]:
    """P(true) for each boolean ``field`` in a JSON completion, from the LM's token log-probabilities.

    Walks the generated tokens; after the text ``"field":`` the first position whose alternatives include
    a true/false word (" true", "False", "yes" ...; the grammar may first force a space, whose
    alternatives already carry the model's choice) gives ``P(true) = p_true / (p_true + p_false)``. An
    alternative missing from the top list adds nothing; with neither present, the chosen token decides
    (1.0 or 0.0).
    """
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not content:
        return []
    pattern = re.compile(rf'"{re.escape(field)}"\s*:\s*$')
    text, out, pending, last_key = "", [], False, -1
    for token in content:
        match = pattern.search(text)
        if match and match.start() != last_key:  # a new occurrence of the key
            pending, last_key = True, match.start()
        if pending:
            p_true, p_false = _true_false_mass(token)
            if p_true + p_false > 0:
                out.append(p_true / (p_true + p_false))
                pending = False
            elif token["token"].strip():
                out.append(1.0 if token["token"].strip().lower().startswith(("t", "y")) else 0.0)
                pending = False
        text += token["token"]
    return out
