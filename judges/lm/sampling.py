"""Choosing the next token fast without changing it: greedy grammar-constrained sampling that tests the
best token first, and prompt-lookup drafting (opt-in, not exact).

Owns: ``GreedyGrammarSampler`` (llama.cpp's grammar sampler applied to the few tokens that can win) and
``PromptLookup`` (draft tokens copied from the prompt). Must not load a model; llama.cpp is imported
when a sampler is built.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np


class GreedyGrammarSampler:
    """Greedy decoding under a grammar that tests the grammar on the best token first.

    llama.cpp's grammar sampler tests every token of the vocabulary against the grammar at every step
    (49,152 tokens for SmolLM2: more time a token than the model's own step). The greedy answer
    under a grammar is the highest-logit token the grammar allows; when the unconstrained best token is
    allowed (most steps: inside a JSON string almost anything is) it is that answer, so only it is tested;
    when it is rejected, the ``tiers`` best tokens are tested (64, then 1,024), and the whole vocabulary
    only when none of them is allowed (rare steps). Each token is judged on its own by the grammar, and a tier's best allowed token is taken
    only when its logit is above every token outside the tier, so this picks the same token as llama.cpp's
    chain (grammar, then greedy; ties to the lowest id in both) at every step: the same completions,
    faster. Used for temperature 0 without penalties or logits processors; anything else takes
    llama.cpp's own chain."""

    tiers = (64, 1024)
    #: llama.cpp's ``llama_token_data`` as a NumPy record, to fill and read candidate arrays in place
    _token_data = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])

    def __init__(self, vocab: Any, grammar: Any, n_vocab: int):
        import llama_cpp

        self._c = llama_cpp
        self._grammar = llama_cpp.llama_sampler_init_grammar(vocab, grammar._grammar.encode("utf-8"),
                                                             grammar._root.encode("utf-8"))
        if not self._grammar:
            raise ValueError("llama.cpp could not parse the grammar")
        self.n_vocab = n_vocab
        self.full_checks = self.tier_checks = self.steps = 0
        self._one = (llama_cpp.llama_token_data * 1)()
        self._tier = (llama_cpp.llama_token_data * max(self.tiers, default=1))()
        self._tier_view = np.frombuffer(self._tier, dtype=self._token_data)
        self._all = (llama_cpp.llama_token_data * n_vocab)()
        self._all_view = np.frombuffer(self._all, dtype=self._token_data)
        self._all_view["id"] = np.arange(n_vocab, dtype=np.int32)

    def _allowed(self, data: Any, size: int) -> None:
        """The grammar sets the logit of every token it rejects in ``data[:size]`` to -inf."""
        candidates = self._c.llama_token_data_array(data=data, size=size, selected=-1, sorted=False)
        self._c.llama_sampler_apply(self._grammar, ctypes.byref(candidates))

    def sample(self, ctx: Any, idx: int = -1) -> int:
        logits = np.ctypeslib.as_array(self._c.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,))
        token = int(np.argmax(logits))
        self._one[0].id, self._one[0].logit, self._one[0].p = token, float(logits[token]), 0.0
        self._allowed(self._one, 1)
        self.steps += 1
        if self._one[0].logit == -np.inf:
            token = self._best_allowed(logits)
        self._c.llama_sampler_accept(self._grammar, token)
        return token

    def _best_allowed(self, logits: np.ndarray) -> int:
        """The highest-logit token the grammar allows (the lowest id among equals)."""
        for size in self.tiers:
            if size >= self.n_vocab:
                break
            self.tier_checks += 1
            order = np.argpartition(logits, self.n_vocab - size)
            top, outside_best = order[self.n_vocab - size:], logits[order[:self.n_vocab - size]].max()
            view = self._tier_view[:size]
            view["id"], view["logit"] = top, logits[top]
            self._allowed(self._tier, size)
            best = view["logit"].max()
            if best > outside_best:  # no token outside the tier can tie or beat it
                return int(view["id"][view["logit"] == best].min())
        self.full_checks += 1
        self._all_view["logit"] = logits
        self._allowed(self._all, self.n_vocab)
        return int(np.argmax(self._all_view["logit"]))

    def accept(self, token: int) -> None:
        self._c.llama_sampler_accept(self._grammar, token)

    def reset(self) -> None:
        self._c.llama_sampler_reset(self._grammar)

    def close(self) -> None:
        if getattr(self, "_grammar", None):
            self._c.llama_sampler_free(self._grammar)
            self._grammar = None

    __del__ = close


class PromptLookup:
    """Drafts the next tokens of an answer from its own context: the tokens that followed the latest earlier
    occurrence of the context's last ``min_match`` to ``max_match`` tokens (the longest such match wins),
    ``max_tokens`` of them at most; nothing when no such match exists.

    A judge's answers copy their prompt: claims quote the response, verdicts quote the claims, and the JSON
    keys repeat. llama.cpp evaluates the token just chosen and the drafted ones in one batch; the greedy
    choice at each position keeps a drafted token only when it is the token chosen there. A batch of 8
    tokens costs a few single steps, so drafting pays only on long matches (3 or more tokens, 7 drafted:
    measured in docs/performance.md).

    Not exact: llama.cpp's logits for a token evaluated inside a batch differ from those of the same token
    evaluated alone (by up to half a logit at most positions after a batch's first; Q4_1 and Q8_0 weights,
    f16 and f32 KV caches alike), so a near-tie can go the other way: Faithfulness changed its verdicts on
    2 of 30 BEGIN turns (``benchmarks/engine_speed.py --paired``). Hence off by default
    (``LlamaCppEngine(draft_tokens=7)`` turns it on, for greedy grammar-constrained answers), like flash
    attention."""

    def __init__(self, max_tokens: int = 7, min_match: int = 3, max_match: int = 8):
        for name, value in (("max_tokens", max_tokens), ("min_match", min_match), ("max_match", max_match)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"PromptLookup: {name} must be a positive int, got {value!r}")
        if max_match < min_match:
            raise ValueError(f"PromptLookup: max_match ({max_match}) is under min_match ({min_match})")
        self.max_tokens, self.min_match, self.max_match = max_tokens, min_match, max_match

    def __call__(self, input_ids: Sequence[int]) -> np.ndarray:
        ids = np.asarray(input_ids, dtype=np.intc)
        for n in range(min(self.max_match, len(ids) - 1), self.min_match - 1, -1):
            # starts j <= len - 1 - n: the match is earlier than the tail itself and something follows it
            windows = np.lib.stride_tricks.sliding_window_view(ids[:-1], n)
            starts = np.flatnonzero((windows == ids[-n:]).all(axis=1))
            if starts.size:
                start = int(starts[-1]) + n
                return ids[start:start + self.max_tokens]
        return ids[:0]
